#!/usr/bin/env bash
# The paper's experiment (Tian et al. 2017: BMUF and the EMA of the synchronized model) on a
# simulated AISHELL-1 corpus: stages 0-7 make the corpus, data, lang and LM, features, the GMM
# ladder and its decodes, the networks' tree and targets; stages 8-10 are the experiment of a spec
# (conf/experiment/<profile>.yaml through steps/nnet/experiment.sh: train, decode, report). Each
# stage leaves a done marker (exp/done/stageN) and is skipped when it exists (docs/recipe.md).
set -eEuo pipefail   # -E: the ERR trap of utils/lib/recipe.sh also sees failures in functions

# Begin configuration section. Empty: the profile's default (conf/profile/<profile>.sh).
stage=0
stop_stage=10
profile=small       # tiny (CI, minutes) | small (the default run, 2 cores) | large (GPU cluster)
corpus_dir=corpus   # the AISHELL-1 tree (data_aishell/, resource_aishell/)
simulate=true       # false: the corpus exists and stage 0 only checks it
corpus_seed=1       # seed of the simulation
cmvn_per_utt=       # CMVN per utterance (one-utterance pseudo-speakers); default: = --simulate
lm_text=            # unsegmented LM text, file or dir of *.txt (default: <corpus-dir>/lm_text)
nj=                 # parallel jobs of features, GMMs and decoding
gmm_systems=        # the GMM ladder, a prefix of "mono tri1 tri2 tri3" (docs/gmm.md)
gmm_topology=kaldi  # kaldi (3 states) | skip (one frame possible: the networks may share its tree)
nnet_tree_leaves=   # leaves of the networks' own tree at 30 ms (0: the last GMM's; skip only)
fmllr_opts=         # tri3's fMLLR (default with per-utterance CMVN: diag, 100 frames)
mono_subset= mono_totgauss= num_leaves= tri_totgauss=   # GMM sizes (mono_subset 0: all)
gmm_decode_opts= gmm_scoring_opts=   # steps/decode.sh beams, local/score.sh LM weights
gmm_decode_sets="dev test"   # the sets the GMMs decode ("": only the graph the networks need)
spec=               # the experiment of stages 8-10 (default: conf/experiment/<profile>.yaml)
spec_opts=          # its keys over it, shell words: "seeds='1 2 3' epoch_choice=best_dev_acc"
nnet_dir=exp/nnet   # where the network runs go
report_note=        # a line added to the report's notes
workdir=            # where data/ and exp/ go (default: here; egs/aishell/run.sh runs in its own)
# Short names of spec keys, each given one `--set key=value` (local/lib/spec_options.sh):
archs= strategies= num_workers= workers_per_process= num_nodes= seeds= grid= grid_seed=
epochs= block_size= warm_start_epochs= ema_half_life_frames= avg_start= last_k= nnet_opts=
dnn_opts= lstm_opts= nnet_train_opts= nnet_decode_opts= nnet_scoring_opts= controls_decoded_at=
results= title= ma_lr_times_workers=true
# End configuration section.

help_message="Usage: $0 [options]   (each variable of its configuration section is an option)
Stages: 0 simulate corpus  1 data prep  2 dict, lang, LM  3 features and CMVN  4 monophone
  5 triphones and alignments  6 graphs and GMM decoding  7 the networks' tree and targets
  8 network training  9 network decoding  10 report (RESULTS.md and plots/)
  --stage N --stop-stage M      run stages N..M (default $stage..$stop_stage)
  --profile tiny|small|large    stages 0-7: conf/profile/<profile>.sh (default $profile)
  --spec FILE --spec-opts \"seeds='1 2 3' title='A title'\"   stages 8-10 (docs/experiment.md)
  --archs --strategies (rows) --seeds --grid --epochs ...   short names of spec keys
e.g.: $0 --profile tiny --stage 8 --spec-opts \"seeds='1 2' averages.ema=30000,90000\"
Jobs run through cmd.sh (run.pl here; queue.pl or slurm.pl on a cluster)."

. "$(dirname "$0")/utils/lib/log.sh"
start_command=$(shell_quoted "$0" "$@")   # the report's provenance: the command, ready to paste
default_corpus=$corpus_dir
. "$(dirname "$0")/utils/parse_options.sh"
[ $# -eq 0 ] || { printf '%b\n' "$help_message" >&2; exit 1; }
# paths given are relative to where the recipe started; it runs in its own directory
absolute() { case "$1" in /*|"") echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ "$corpus_dir" = "$default_corpus" ] || corpus_dir=$(absolute "$corpus_dir")
lm_text=$(absolute "$lm_text") results=$(absolute "$results")
cd "${workdir:-$(dirname "$0")}" && . ./cmd.sh && . ./path.sh
last_stage=10 && . utils/lib/recipe.sh && check_stage_range   # log, run, stage_on, done markers
. local/lib/settings.sh && recipe_settings   # the profile's defaults, the GMM ladder's checks
. local/lib/stages.sh   # stage_settings (the done markers' settings), the report's notes
log "profile $profile: nj $nj, the experiment $spec"

if stage_on 0 && begin_stage 0 "corpus in $corpus_dir"; then
  if [ "$simulate" = true ]; then
    mkdir -p exp/simulate/log
    run $train_cmd exp/simulate/log/simulate.log python local/simulate_corpus.py \
      --profile "$profile" --out "$corpus_dir" --nj "$nj" --seed "$corpus_seed"
  fi
  for f in data_aishell/transcript/aishell_transcript_v0.8.txt resource_aishell/lexicon.txt; do
    [ -f "$corpus_dir/$f" ] || die "expected file $corpus_dir/$f to exist"
  done
  for x in $sets; do
    [ -d "$corpus_dir/data_aishell/wav/$x" ] || \
      die "expected directory $corpus_dir/data_aishell/wav/$x to exist"
  done
  [ -e "$lm_text" ] || die "expected the LM text $lm_text to exist (--lm-text)"
  end_stage 0
fi

if stage_on 1 && begin_stage 1 "data prep: data/{train,dev,test}"; then
  run local/aishell_data_prep.sh "$corpus_dir/data_aishell/wav" \
    "$corpus_dir/data_aishell/transcript"
  # per-speaker CMVN left the simulator's per-utterance channels in the features (docs/recipe.md)
  for x in $sets; do
    if [ "$cmvn_per_utt" = true ]; then
      rm -rf "data/$x.uttspk"
      run utils/data/modify_speaker_info.sh --utts-per-spk-max 1 "data/$x" "data/$x.uttspk"
      rm -rf "data/$x" && mv "data/$x.uttspk" "data/$x"
    fi
  done
  end_stage 1
fi

if stage_on 2 && begin_stage 2 "dict, LM, lang, lang_test"; then
  run local/aishell_prepare_dict.sh --text data/train/text "$corpus_dir/resource_aishell"
  # the LM adds its new words (with pypinyin pronunciations) to the dict: prepare_lang comes after
  run local/train_lms.sh "$lm_text" data/local/dict data/dev/text data/local/lm
  run utils/prepare_lang.sh --topology "$gmm_topology" data/local/dict "<UNK>" data/local/lang \
    data/lang
  run utils/format_lm.sh data/lang data/local/lm/3gram.arpa.gz data/local/dict/lexicon.txt \
    "$gmm_lang"
  end_stage 2
fi

if stage_on 3 && begin_stage 3 "features: MFCC+pitch (GMMs) and fbank (networks), CMVN"; then
  for x in $sets; do
    run utils/copy_data_dir.sh "data/$x" "data/${x}_fbank"
    run steps/make_mfcc_pitch.sh --cmd "$train_cmd" --nj "$nj" "data/$x" "exp/make_mfcc/$x" mfcc
    run steps/compute_cmvn_stats.sh "data/$x" "exp/make_mfcc/$x" mfcc
    run utils/fix_data_dir.sh "data/$x"
    run steps/make_fbank.sh --cmd "$train_cmd" --nj "$nj" "data/${x}_fbank" "exp/make_fbank/$x" \
      fbank
    run steps/compute_cmvn_stats.sh "data/${x}_fbank" "exp/make_fbank/$x" fbank
    run utils/fix_data_dir.sh "data/${x}_fbank"
  done
  end_stage 3
fi

if stage_on 4 && begin_stage 4 "monophone GMM"; then
  mono_data=data/train
  if [ "$mono_subset" -gt 0 ]; then
    mono_data=data/train_${mono_subset}short
    run utils/subset_data_dir.sh --shortest data/train "$mono_subset" "$mono_data"
  fi
  # shellcheck disable=SC2086
  run steps/train_mono.sh --cmd "$train_cmd" --nj "$nj" --totgauss "$mono_totgauss" $mono_opts \
    "$mono_data" data/lang exp/mono
  end_stage 4
fi

if stage_on 5 && begin_stage 5 "triphone GMMs ($gmm_systems); alignments of train and dev"; then
  # each system trains on the alignments of the one before it
  ali=(--cmd "$train_cmd" --nj "$nj" data/train data/lang)
  tri=(--cmd "$train_cmd" --num-leaves "$num_leaves" --totgauss "$tri_totgauss")
  run steps/align_si.sh "${ali[@]}" exp/mono exp/mono_ali
  run steps/train_deltas.sh "${tri[@]}" --nj "$nj" data/train data/lang exp/mono_ali exp/tri1
  if has_gmm tri2; then
    run steps/align_si.sh "${ali[@]}" exp/tri1 exp/tri1_ali
    run steps/train_lda_mllt.sh "${tri[@]}" data/train data/lang exp/tri1_ali exp/tri2
  fi
  if has_gmm tri3; then
    run steps/align_si.sh "${ali[@]}" exp/tri2 exp/tri2_ali
    # shellcheck disable=SC2086
    run steps/train_sat.sh "${tri[@]}" $fmllr_opts data/train data/lang exp/tri2_ali exp/tri3
  fi
  # the targets' alignments: of train and dev (the networks' dev frame accuracy); their own tree
  # grows on train alone (dev stays held out)
  run utils/combine_data.sh data/train_dev data/train data/dev
  run $nnet_align --cmd "$train_cmd" --nj "$nj" data/train_dev data/lang "exp/$nnet_gmm" \
    "exp/${nnet_gmm}_ali_train_dev"
  if [ -n "$nnet_tree" ] && [ ! -f "exp/${nnet_gmm}_ali/ali.1.gz" ]; then
    run $nnet_align "${ali[@]}" "exp/$nnet_gmm" "exp/${nnet_gmm}_ali"
  fi
  end_stage 5
fi

if stage_on 6 && begin_stage 6 "graphs and GMM decoding of '$gmm_decode_sets'"; then
  for sys in $gmm_systems; do
    # without decoding, only the graph the networks share is made
    [ -n "$gmm_decode_sets" ] || { [ "$sys" = "$nnet_gmm" ] && [ -z "$nnet_tree" ]; } || continue
    run utils/mkgraph.sh "$gmm_lang" "exp/$sys" "exp/$sys/graph"
    decode=steps/decode.sh
    [ "$sys" = tri3 ] && decode="steps/decode_fmllr.sh $fmllr_opts"   # SI, then fMLLR
    for x in $gmm_decode_sets; do
      # shellcheck disable=SC2086
      run $decode --cmd "$decode_cmd" --nj "$nj" $gmm_decode_opts \
        --scoring-opts "$gmm_scoring_opts" "exp/$sys/graph" "data/$x" "exp/$sys/decode_$x"
    done
  done
  end_stage 6
fi

if stage_on 7 && begin_stage 7 "network targets from the $nnet_gmm alignments"; then
  run utils/combine_data.sh data/train_dev_fbank data/train_fbank data/dev_fbank
  nnet_ali=exp/${nnet_gmm}_ali_train_dev
  if [ -n "$nnet_tree" ]; then
    # Kaldi chain's way: a one-frame lang dir and a tree grown at 1/3 of the frame rate (a split
    # gains a third of the likelihood there: --tree-thresh 100 asks what 300 asks at 10 ms)
    run utils/prepare_lang_nnet.sh "$gmm_lang" data/lang_test_nnet
    run steps/nnet/build_tree.sh --cmd "$train_cmd" --frame-subsampling-factor 3 --tree-thresh 100 \
      "$nnet_tree_leaves" data/train data/lang_test_nnet "exp/${nnet_gmm}_ali" "$nnet_tree"
    run steps/nnet/convert_ali.sh --cmd "$train_cmd" --frame-subsampling-factor 3 "$nnet_ali" \
      "$nnet_tree" "${nnet_tree}_ali_train_dev"
    run utils/mkgraph.sh data/lang_test_nnet "$nnet_tree" "$nnet_graph"
    nnet_ali=${nnet_tree}_ali_train_dev
  fi
  # shellcheck disable=SC2086
  run steps/nnet/make_targets.sh --cmd "$train_cmd" --frame-subsampling-factor 3 $targets_opts \
    --priors-from data/train_fbank "$nnet_ali" data/train_dev_fbank exp/nnet/targets
  end_stage 7
fi

if stage_on 8 || stage_on 9 || stage_on 10; then
  # the spec as this run resolves it ($spec, the options over it), then its stages 1-3
  . local/lib/spec_options.sh && spec_sets
  mkdir -p "$(dirname "$nnet_dir")"
  run emasr experiment show --out "$nnet_dir.spec.yaml" ${spec_set_args[@]+"${spec_set_args[@]}"} \
    "$spec"
  write_report_notes "$nnet_dir.notes" "$nnet_dir.spec.yaml"
  gmm_dirs=$(printf ' exp/%s' $gmm_systems)
  run steps/nnet/experiment.sh --stage $((stage > 8 ? stage - 7 : 1)) \
    --stop-stage $((stop_stage - 7)) --nj "$nj" --train-cmd "$train_cmd" \
    --decode-cmd "$decode_cmd" --cuda-cmd "$cuda_cmd" --report-notes "$nnet_dir.notes" \
    --report-dirs "$gmm_dirs" "$nnet_dir.spec.yaml" exp/nnet/targets data/train_fbank \
    data/dev_fbank data/test_fbank "$nnet_graph" "$nnet_trans_mdl" "$nnet_dir"
fi
log "done (stages $stage..$stop_stage)"
