#!/usr/bin/env bash
# The verdict campaign (PLAN.md beside this script) in resumable pieces, one call each:
#   verdict/run.sh V0     the corpus recipe, stages 0-7, with the dev and test sets of 30 speakers
#   verdict/run.sh V1     DNN 3x512, seed 1: one worker, and BMUF-8 at block momentum 0.5, 0.75
#                         and 0.875 (the earlier choice, 0.75, bracketed on both sides)
#   verdict/run.sh V2     the same, MA-8 at 1x, 2x, 4x and 8x the one-worker rate
#   verdict/run.sh V3..V9 seeds 2..8 of one worker, MA-8 and BMUF-8 at the points seed 1 chose,
#                         each piece's report over every seed so far (verdict/dnn3/)
#   verdict/run.sh L1     the LSTMP (3x256, projection 128), one worker, 24 epochs, seed 1
#   verdict/run.sh L2     BMUF-8 of it from L1's model after epoch 2, block momentum 0.5 and 0.75
#                         (L1 too, where its dir is gone: a fresh checkout runs V0, then L2)
#   verdict/run.sh L3     MA-8 of it from the same warm start at 1x and 2x the rate (verdict/lstm/)
#   verdict/run.sh A1..A3 the EMA against annealing on the DNN 3x512: one worker and BMUF-8 with
#                         the rate annealed to lr/100 (A1), lr/1000 (A2), linearly to 0 (A3),
#                         seeds 1-3 each (verdict/anneal/)
# A piece whose runs and decodes exist (their .done markers) skips them, so a killed piece resumes
# when called again; V2-V9 also skip the runs the committed verdict/dnn3/counts record (the spec's
# earlier_counts), so on a fresh checkout V0 and then the next piece continue the campaign. Each finished piece appends one line to verdict/pieces.log: the piece, its
# command, wall time, machine, commit and the sha256 of the network targets and training features.
set -euo pipefail

help_message="Usage: $0 <piece>   (V0-V9 L1-L3 A1-A3; the pieces are described in PLAN.md)"
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 1 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
piece=$1
cd "$(dirname "$0")/.."

# every piece trains 8 virtual workers in one process; the EMAs' half-lives (frames) are
# PLAN.md's, the report's +EMA row the one best on dev; each model from its best dev epoch
common=(--workers-per-process 8 --num-workers 8 --ema-half-life-frames 100000,400000,1600000)
best_epoch="train.final_epoch=best_dev_acc"
# the DNN 3x512 at 12 epochs; its grid searched on seed 1, the other seeds train seed 1's choice
dnn3=(--nnet-dir exp/verdict_dnn3 --archs dnn --epochs 12 --dnn-opts "$best_epoch" --grid-seed 1
      --ma-lr-times-workers false --results verdict/dnn3/RESULTS.md
      --title "The verdict: DNN 3x512, 12 epochs, each model at its best dev epoch, 8 workers")
bmuf_grid="bmuf: sync.block_momentum=0.5,0.75,0.875"
ma_grid="ma: train.lr=0.1,0.2,0.4,0.8"
seeds_to() { seq -s ' ' 1 "$1"; }
# the LSTMP of the parity campaign, 24 epochs; the parallel runs start from one worker's model
# after 2 epochs and train the 22 after it (--warm-start-epochs)
lstm=(--nnet-dir exp/verdict_lstm --archs lstm --epochs 24 --seeds 1 --grid-seed 1
      --lstm-opts "model.num_layers=3 model.hidden_size=256 model.proj_size=128 $best_epoch"
      --warm-start-epochs 2 --ma-lr-times-workers false --results verdict/lstm/RESULTS.md
      --title "The LSTMP (3x256, projection 128), 24 epochs, parallel runs from one worker's epoch 2, 8 workers")
# A: BMUF-8 at the block momentum V1 chose on dev (PLAN.md records it when V1 lands)
anneal_bmuf_momentum=0.75
anneal() {   # anneal NAME "SCHEDULE OVERRIDES" TITLE
  ./run.sh --stage 8 --stop-stage 10 "${common[@]}" --nnet-dir "exp/verdict_anneal_$1" --archs dnn \
    --epochs 12 --seeds "1 2 3" --dnn-opts "$best_epoch $2" \
    --grid "bmuf: sync.block_momentum=$anneal_bmuf_momentum" \
    --strategies "single single+ema single+avg bmuf bmuf+ema bmuf+avg" \
    --results "verdict/anneal/$1/RESULTS.md" --title "The EMA against annealing: DNN 3x512, $3"
}

. utils/lib/recipe.sh   # record_piece (and the recipe's log lines and traps)

case $piece in
  V0) ./run.sh --stage 0 --stop-stage 7 --gmm-decode-sets "" ;;
  V1) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${dnn3[@]}" --seeds 1 \
        --strategies "single single+ema bmuf bmuf+ema" --grid "$bmuf_grid" ;;
  V[2-9])
    n=${piece#V}; seeds=$(seeds_to $((n == 2 ? 1 : n - 1)))
    # the earlier pieces' runs as committed (their exp dirs need not be here: a fresh checkout
    # runs V0 again, whose inputs the report checks against the counts', then the next piece)
    earlier=()
    [ ! -f verdict/dnn3/counts/systems.json ] ||
      earlier=(--spec-opts "earlier_counts=verdict/dnn3/counts")
    ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${dnn3[@]}" --seeds "$seeds" \
      ${earlier[@]+"${earlier[@]}"} --strategies "single single+ema ma ma+ema bmuf bmuf+ema" --grid "$ma_grid; $bmuf_grid" ;;
  L1) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${lstm[@]}" --strategies "single single+ema" ;;
  L[23])
    # the earlier L pieces' runs as committed; the one-worker run trains again where its dir is
    # gone (the warm start needs its checkpoint), and the recorded parallel runs must have
    # started from the same parameters (the plan checks their regime.json)
    earlier=()
    [ ! -f verdict/lstm/counts/systems.json ] ||
      earlier=(--spec-opts "earlier_counts=verdict/lstm/counts")
    rows="single single+ema bmuf bmuf+ema" grid="bmuf: sync.block_momentum=0.5,0.75"
    [ "$piece" = L2 ] || { rows="$rows ma ma+ema"; grid="ma: train.lr=0.1,0.2; $grid"; }
    ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${lstm[@]}" ${earlier[@]+"${earlier[@]}"} \
      --strategies "$rows" --grid "$grid" ;;
  A1) anneal lr001 "train.final_lr=0.001" "the rate annealed to lr/100, seeds 1-3" ;;
  A2) anneal lr0001 "train.final_lr=0.0001" "the rate annealed to lr/1000, seeds 1-3" ;;
  A3) anneal linear0 "train.schedule=linear train.final_lr=0" "the rate annealed linearly to 0, seeds 1-3" ;;
  *) die "unknown piece '$piece' (expected V0-V9, L1-L3, A1-A3: PLAN.md)" ;;
esac

record_piece verdict/pieces.log "$piece" "verdict/run.sh $piece"
