#!/usr/bin/env bash
# The oracle (docs/gmm.md): how close can a GMM aligner come to the synthesizer's phone
# boundaries when its labels are perfect, and what do perfect labels buy a network? In the
# ladder's work dir (exp/ladder_work, after ladder/run.sh --baseline false):
#  1. exp/oracle_ali (train) and exp/oracle_ali_train_dev: alignments of tri1's model and tree that
#     follow the synthesizer's timings (local/ali_from_timings.sh);
#  2. exp/tri1_oracle: tri1's recipe (deltas, the ladder's leaves and Gaussians) trained on them
#     without realignment, then its Viterbi alignment of train (exp/tri1_oracle_ali);
#  3. exp/tri1_oracle_em: the same recipe with Kaldi's realignment at iterations 10, 20 and 30,
#     started from the oracle (exp/tri1_oracle_em_ali): does EM move away from the truth?
#  4. the boundary error of each against the timings, next to tri1's and tri3's training
#     alignments;
#  5. the ladder's DNN (3 x 512, one worker, seed 1, exp/nnet/dnn_single_s1's configuration) on
#     the oracle alignments converted to the same network tree (exp/nnet_tree, grown from tri3's),
#     decoded like it and compared with it at each one's dev-chosen LM weight and penalty.
# Writes ladder/oracle/RESULTS.md; every piece resumes (done files and the decode dirs' best_cer).
set -euo pipefail

num_leaves=1200     # the ladder's tri1
totgauss=10000

help_message="Usage: $0 [--num-leaves N] [--totgauss N]
The oracle alignments and what a GMM and the ladder's DNN make of them, in exp/ladder_work
(after ladder/run.sh --baseline false); report ladder/oracle/RESULTS.md."
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 0 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
cd "$(dirname "$0")/.."
results=$PWD/ladder/oracle/RESULTS.md
. ladder/workdir.sh   # workdir DIR, dev_chosen_hyp DIR SET, piece NAME COMMAND...
w=exp/ladder_work
for f in "$w/exp/tri1_ali/final.mdl" "$w/exp/tri3_ali/ali.1.gz" "$w/exp/nnet_tree/graph/HCLG.fst" \
         "$w/exp/nnet/dnn_single_s1/decode_test/scoring_kaldi/best_cer"; do
  [ -f "$f" ] || die "expected $f: run ladder/run.sh --baseline false first"
done
mkdir -p ladder/oracle
start=$(date +%s)

cd "$w"
. ./path.sh
. ./cmd.sh
timings=(corpus/timings/train.jsonl corpus/timings/dev.jsonl)
pieces=exp/oracle   # piece's done files
mkdir -p $pieces

oracle_alignments() {
  local/ali_from_timings.sh --cmd "$train_cmd" data/train exp/tri1_ali exp/oracle_ali "${timings[@]}"
  local/ali_from_timings.sh --cmd "$train_cmd" data/train_dev exp/tri1_ali \
    exp/oracle_ali_train_dev "${timings[@]}"
}
gmm_on_oracle() {  # gmm_on_oracle DIR REALIGN_ITERS
  steps/train_deltas.sh --cmd "$train_cmd" --realign-iters "$2" "$num_leaves" "$totgauss" \
    data/train data/lang exp/oracle_ali "$1"
  steps/align_si.sh --cmd "$train_cmd" --nj 2 data/train data/lang "$1" "${1}_ali"
}
nnet_on_oracle() {
  steps/nnet/convert_ali.sh --cmd "$train_cmd" --frame-subsampling-factor 3 \
    exp/oracle_ali_train_dev exp/nnet_tree exp/nnet_tree_oracle_ali_train_dev
  steps/nnet/make_targets.sh --cmd "$train_cmd" --frame-subsampling-factor 3 \
    --priors-from data/train_fbank exp/nnet_tree_oracle_ali_train_dev data/train_dev_fbank \
    exp/nnet_oracle/targets
  steps/nnet/train.sh --cmd "$cuda_cmd" --nnet-config exp/nnet/dnn_single_s1/conf.yaml \
    --num-workers 1 --strategy single --block-size 16 --epochs 3 --resume true \
    exp/nnet_oracle/targets data/train_fbank data/dev_fbank exp/nnet_oracle/dnn_single_s1 </dev/null
  for x in dev test; do
    # the reference's decode and scoring options, read from its logs
    steps/nnet/decode.sh --cmd "$decode_cmd" --nj 2 --trans-mdl exp/nnet_tree/final.mdl \
      --acwt 0.5 --beam 13 --lattice-beam 5 --max-active 1500 \
      --scoring-opts "--min-lmwt 0.5 --max-lmwt 4 --lmwt-step 0.1 --word-ins-penalty 0.0,0.5" \
      exp/nnet_tree/graph "data/${x}_fbank" "exp/nnet_oracle/dnn_single_s1/decode_$x"
  done
}

piece alignments oracle_alignments
piece tri1_oracle gmm_on_oracle exp/tri1_oracle ""
piece tri1_oracle_em gmm_on_oracle exp/tri1_oracle_em "10 20 30"
piece dnn nnet_on_oracle

{
  echo "# The oracle: GMM alignments and a DNN from the synthesizer's phone timings"
  echo
  echo "- command: \`egs/aishell_sim/ladder/oracle.sh --num-leaves $num_leaves --totgauss $totgauss\`" \
       "(in exp/ladder_work, after \`ladder/run.sh --baseline false\`), at $(git rev-parse --short HEAD)"
  echo "- machine: $(nproc) CPU cores; pieces (exp/oracle/*.done):" \
       "$(for f in exp/oracle/*.done; do printf '%s %s; ' "$(basename "$f" .done)" "$(cat "$f")"; done)"
  echo
  echo "## Boundary error of the training alignments against the synthesizer's timings"
  echo
  echo "(\`emasr ali-boundary-error --phone-offsets DIR data/lang/phones.txt corpus/timings/train.jsonl\`;"
  echo "oracle_ali: the timings themselves on the 10 ms grid; tri1_oracle: tri1 trained on them"
  echo "without realignment, then aligning; tri1_oracle_em: with realignment at 10, 20, 30)"
  for ali in oracle_ali tri1_oracle_ali tri1_oracle_em_ali tri1_ali tri3_ali; do
    echo
    echo "### exp/$ali"
    echo '```'
    emasr ali-boundary-error --phone-offsets "exp/$ali" data/lang/phones.txt \
      corpus/timings/train.jsonl
    emasr ali-info "exp/$ali" --phones data/lang/phones.txt | grep "one-frame"
    echo '```'
  done
  echo
  echo "## The DNN on the oracle's labels against the DNN on tri3's (same network tree and settings)"
  echo
  echo "(A: exp/nnet/dnn_single_s1, tri3's alignments; B: exp/nnet_oracle/dnn_single_s1, the"
  echo "oracle's; \`emasr compare-cer\`, each at its LM weight and penalty chosen on dev;"
  echo "dev frame accuracy of the last epoch from each run's metrics.jsonl)"
  for x in dev test; do
    echo
    echo "### $x"
    echo '```'
    emasr compare-cer "data/$x/text" "$(dev_chosen_hyp exp/nnet/dnn_single_s1 "$x")" \
      "$(dev_chosen_hyp exp/nnet_oracle/dnn_single_s1 "$x")"
    echo '```'
  done
  echo
  echo '```'
  for run in exp/nnet/dnn_single_s1 exp/nnet_oracle/dnn_single_s1; do
    python3 - "$run" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(f"{sys.argv[1]}/metrics.jsonl") if '"dev_' in l]
last = rows[-1]
print(sys.argv[1], {k: round(v, 4) for k, v in last.items() if k.startswith("dev_")})
EOF
  done
  echo '```'
  echo
  echo "wall time of this invocation: $(( $(date +%s) - start )) s"
} > "$results.tmp"
mv "$results.tmp" "$results"
log "wrote $results"
