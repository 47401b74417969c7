# The bookkeeping of egs/aishell_sim/run.sh's stages (sourced by it): what each stage's done marker
# records, and the provenance notes its report gets (utils/lib/recipe.sh writes the markers).

stage_settings() {
  # stage_settings N: the options that shape stage N's outputs (recorded in its done marker, so a
  # rerun with other settings stops instead of mixing outputs)
  case "$1" in
    0) key_values profile corpus_dir simulate corpus_seed ;;
    1) key_values profile cmvn_per_utt ;;
    2) key_values profile lm_text gmm_topology ;;
    4) key_values profile mono_subset mono_totgauss mono_opts ;;
    5) key_values profile num_leaves tri_totgauss gmm_systems fmllr_opts ;;
    6) key_values profile gmm_decode_opts gmm_scoring_opts gmm_decode_sets gmm_systems \
         nnet_tree_leaves fmllr_opts ;;
    7) key_values profile targets_opts gmm_systems nnet_tree_leaves ;;
    *) key_values profile ;;
  esac
}

stage_times() {
  # "0: 12 s, 1: 3 s, ... (stages 0-7 total N s)" from the done markers
  local f n total=0 out=""
  for n in 0 1 2 3 4 5 6 7; do
    f=exp/done/stage$n
    if [ -f "$f" ]; then
      out="$out${out:+, }$n: $(head -1 "$f" | cut -d' ' -f1) s"
      total=$((total + $(head -1 "$f" | cut -d' ' -f1)))
    fi
  done
  echo "${out:-none} (stages 0-7 total $total s)"
}

write_report_notes() {
  # write_report_notes FILE SPEC: the lines the report adds to its notes: the command (ready to
  # paste), the corpus, the stages' wall times and --report-note
  local shown=(emasr experiment show --key)
  {
    echo "command: \`$start_command\` (profile $profile, $("${shown[@]}" workers "$2") workers," \
      "seeds $("${shown[@]}" seeds "$2"))"
    if [ "$simulate" = true ]; then
      echo "corpus: simulated by local/simulate_corpus.py (seed $corpus_seed): it stands in for" \
        "AISHELL-1 to exercise the pipeline, not for real acoustics, and these models are not" \
        "models of real speech (local/real_speech_cer.sh decodes real recordings with them)"
    fi
    echo "stage wall times: $(stage_times)"
    if [ "$stage" -lt 8 ]; then   # (an invocation of stages 8-10 alone has only its setup here)
      echo "wall time of this run.sh invocation (stages $stage-$stop_stage, setup included) up to" \
        "the experiment: $SECONDS s"
    fi
    [ -z "$report_note" ] || echo "$report_note"
  } > "$1"
}
