#!/usr/bin/env bash
# tri3 (SAT) with a transform that can move on one-utterance pseudo-speakers, against tri2, on the
# small profile (docs/gmm.md): in its own work dir (exp/sat_work, the default run's exp/ left as
# it is), the corpus simulated as the default run's, mono -> tri1 -> tri2 -> tri3 on Kaldi's 3-state
# topology with diagonal fMLLR and --fmllr-min-count 100 (Kaldi's defaults: full, 500), then tri2
# (steps/decode.sh) and tri3 (steps/decode_fmllr.sh, two passes) decoded on dev and test, and the
# two compared at each one's dev-chosen LM weight and penalty (emasr compare-cer). About 75 minutes
# on 2 cores; every piece resumes (run.sh's done markers, the decode dirs' best_cer).
set -euo pipefail

fmllr_opts="--fmllr-update-type diag --fmllr-min-count 100"

help_message="Usage: $0 [--fmllr-opts '...']
tri2 against tri3 with --fmllr-opts (default '$fmllr_opts') in exp/sat_work; the comparison
is printed and written to exp/sat_work/compare_tri2_tri3.txt; then a DNN on the network tree of
tri3's alignments, reported in ladder/sat_diag/RESULTS.md."
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 0 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
cd "$(dirname "$0")/.."

. ladder/workdir.sh   # workdir DIR
w=exp/sat_work
workdir "$w"
ladder=(--workdir "$w" --gmm-systems "mono tri1 tri2 tri3" --fmllr-opts "$fmllr_opts"
        --gmm-decode-sets "")
./run.sh "${ladder[@]}" --stop-stage 5

(
cd "$w"
. ./path.sh
scoring=(--scoring-opts "--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5")
for sys in tri2 tri3; do
  [ -f "exp/$sys/graph/HCLG.fst" ] || utils/mkgraph.sh data/lang_test "exp/$sys" "exp/$sys/graph"
  for x in dev test; do
    [ -f "exp/$sys/decode_$x/scoring_kaldi/best_cer" ] && continue
    decode=steps/decode.sh
    [ "$sys" = tri3 ] && decode="steps/decode_fmllr.sh $fmllr_opts"   # SI, then fMLLR
    # shellcheck disable=SC2086
    $decode --nj 2 --beam 11 --lattice-beam 5 "${scoring[@]}" "exp/$sys/graph" "data/$x" \
      "exp/$sys/decode_$x"
  done
done

# each system at its LM weight and penalty chosen on dev
for x in dev test; do
  echo "== $x, each system at its dev-chosen LM weight and penalty (fMLLR: $fmllr_opts)"
  emasr compare-cer "data/$x/text" "$(dev_chosen_hyp exp/tri2 "$x")" \
    "$(dev_chosen_hyp exp/tri3 "$x")"
done | tee compare_tri2_tri3.txt
)

mkdir -p ladder/sat_diag
./run.sh "${ladder[@]}" --archs dnn --strategies single --seeds 1 --results ladder/sat_diag/RESULTS.md \
  --title "Results: the small profile's DNN on the network tree of tri3 with diagonal fMLLR per utterance"
