#!/usr/bin/env bash
# The parity campaign (PLAN.md beside this script) in resumable pieces: each piece is one call,
#   parity/run.sh P0      the corpus recipe, stages 0-7 (no GMM decoding)
#   parity/run.sh P1      the parity probe (DNN 3x512, 12 epochs, single and BMUF-8) and its report
#   parity/run.sh P2      BMUF-8 of P1 at tau 4, and at block momentum 0.75, each against P1's
#                         one-worker run (parity/tau4/, parity/eta075/)
#   parity/run.sh P3a     the 8-layer DNN (8x512), 8 epochs, one worker with its EMAs and average
#                         (exp/parity_dnn8, the tuned baselines' pieces add their grids beside it)
#   parity/run.sh P3b     MA-8 of the 8-layer DNN at 1x, 2x, 4x and 8x the rate, the best on dev
#   parity/run.sh P3c     BMUF-8 of the 8-layer DNN at block momentum 1 - 1/8, 0.75 and 0.5
#   parity/run.sh P3d     BMUF-8 at block momentum 1 - 1/8 with the local rate halved and
#                         quartered (P3c: at the one-worker rate it stalled, as MA-8 at 4x and 8x)
#   parity/run.sh P3e     the 8-layer DNN at 16 epochs, one worker and BMUF-8 at block momentum 0.5
#                         (P3c's choice), each model file from its best dev epoch
#                         (train.final_epoch=best_dev_acc): parity at convergence (parity/dnn8_16/)
#   parity/run.sh P3f     MA-8 of the same at twice the rate (P3b's choice on dev), seed 1
#   parity/run.sh P3g     MA-8 of the same at 4x the rate too: MA's rate searched at 16 epochs
#   parity/run.sh P5c     seed 2 of one worker, MA-8 and BMUF-8 of P3e-P3f
#   parity/run.sh P5d     seed 3 of the same, and the verdict's report on the 8-layer DNN
#   parity/run.sh P4      the verdict's baselines on the DNN 3x512 at 12 epochs, where BMUF-8
#                         reached parity (P2): MA-8 at 1x to 8x the rate, beside P1's and P2's
#                         seed-1 runs (one worker, BMUF-8 at eta 1 - 1/8, eta 0.75, tau 4)
#   parity/run.sh P5a     seed 2 of one worker, MA-8 and BMUF-8, each at the point seed 1 chose
#   parity/run.sh P5b     seed 3 of the same, and the verdict's report (parity/dnn3/)
#   parity/run.sh P6a     the LSTMP (3x256, projection 128) at 12 epochs, each model from its best
#                         dev epoch, seed 1: one worker and BMUF-8 at block momentum 0.5
#   parity/run.sh P6b     the same LSTMP at 24 epochs (P6a: BMUF-8 still climbed at 12), one worker
#   parity/run.sh P6c     BMUF-8 of it at block momentum 0.5, and their report (parity/lstm24/)
#   parity/run.sh P9      when the EMA should start: BMUF-8 of the DNN 3x512 (P5b's point) with a
#                         warm-up of 12 syncs, each EMA kept from the first sync and from the end
#                         of the warm-up (ema-warm), three seeds (parity/warm/)
# A piece whose runs and decodes exist (their .done markers) skips them, so a killed piece resumes
# when called again. Each finished piece appends one line to parity/pieces.log: the piece, its
# command, wall time, machine, commit and the sha256 of the network targets and training features.
set -euo pipefail

help_message="Usage: $0 <piece>   (P0 P1 P2 P3a-P3g P4 P5a-P5d P6a-P6c P9; the pieces are described in PLAN.md)"
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 1 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
piece=$1
cd "$(dirname "$0")/.."

# every piece trains 8 virtual workers in one process and reports beside this script; the EMAs'
# half-lives (frames) are the list of PLAN.md, the report's +EMA row the one best on dev
common=(--workers-per-process 8 --num-workers 8 --ema-half-life-frames 100000,400000,1600000)
# P3 on: the paper's 8-layer DNN at 8 epochs (P1's dev frame accuracy peaked at epochs 7-8 for
# both one worker and BMUF-8, and the dev loss rose after 6), all its runs in one network dir
dnn8=(--nnet-dir exp/parity_dnn8 --archs dnn --dnn-opts model.hidden_layers=8 --epochs 8)
# the baselines' grids (emasr tuning-grid), each piece's report over every row trained so far
ma_grid="ma: train.lr=0.1,0.2,0.4,0.8"   # 1x to 8x the one-worker rate (Kaldi's N x rule at 8x)
bmuf_grid="bmuf: sync.block_momentum=0.875,0.75,0.5"
bmuf_lr_grid="bmuf: sync.block_momentum=0.875 train.lr=0.05,0.025"
# P3e: every BMUF-8 run of P3c-P3d still climbed at epoch 8 while one worker's dev loss rose after
# 6: twice the epochs, and each model taken at its own best dev epoch, so both are at convergence
dnn8_16=(--nnet-dir exp/parity_dnn8_16 --archs dnn --epochs 16
         --dnn-opts "model.hidden_layers=8 train.final_epoch=best_dev_acc")
# P4 on: the verdict on the DNN 3x512 at 12 epochs (P1, P2), its grid searched on seed 1 only;
# P1's and P2's seed-1 runs are its grid points (linked in). No +avg rows: P1's runs kept no
# cumulative average, and the EMA against BMUF, MA and one worker is what the verdict asks
dnn3=(--nnet-dir exp/parity_dnn3 --archs dnn --epochs 12 --grid-seed 1
      --results parity/dnn3/RESULTS.md --title "The verdict: DNN 3x512, 12 epochs, 8 workers")
dnn3_grid="ma: train.lr=0.1,0.2,0.4,0.8; bmuf: sync.block_momentum=0.875,0.75; bmuf: sync.block_size=4"
# P3f on: the verdict on the 8-layer DNN at 16 epochs, each model from its best dev epoch, at the
# points chosen on dev on seed 1: BMUF-8's block momentum P3c's; MA-8's rate P3b's (P3f), then
# searched again at 16 epochs (P3g: MA-8 at 0.2 still climbed at epoch 16, so the next rate up)
dnn8_16_grid="ma: train.lr=0.2,0.4; bmuf: sync.block_momentum=0.5"
# P9: BMUF-8 of the DNN 3x512 at the point its verdict chose (block momentum 0.75, tau 16), with
# a warm-up of 12 syncs (one epoch of 12) as plain model averaging; its EMAs kept twice, from the
# first sync and from the first sync after the warm-up (average.ema_after_warmup)
warm=(--nnet-dir exp/parity_warm --archs dnn --epochs 12 --seeds "1 2 3"
      --nnet-opts "sync.block_momentum=0.75 sync.warmup_blocks=12"
      --strategies "bmuf bmuf+ema bmuf+ema-warm" --results parity/warm/RESULTS.md
      --title "When the EMA starts: BMUF-8 with a warm-up, DNN 3x512, 12 epochs")
# P6a on: the paper's second model, the LSTMP of P4's first plan (3 x 256, projection 128), at 12
# epochs, each model from its best dev epoch (the 8-layer DNN's protocol, P3e), seed 1 first
lstm=(--archs lstm --grid-seed 1 --seeds 1
      --lstm-opts "model.num_layers=3 model.hidden_size=256 model.proj_size=128 train.final_epoch=best_dev_acc")
lstm_title() { echo "The LSTMP (3x256, projection 128), $1 epochs, each model at its best dev epoch," \
                    "8 workers"; }
lstm12=(--nnet-dir exp/parity_lstm --epochs 12 --results parity/lstm/RESULTS.md
        --title "$(lstm_title 12)")
# P6b on: twice the epochs (P3e's step for the 8-layer DNN), in a new network dir so that P6a's
# runs stay; one worker trained again, since the schedule's decay follows the planned epochs
lstm24=(--nnet-dir exp/parity_lstm24 --epochs 24 --results parity/lstm24/RESULTS.md
        --title "$(lstm_title 24)")
lstm_bmuf=(--strategies "single single+ema bmuf bmuf+ema" --grid "bmuf: sync.block_momentum=0.5")
rows() { for rule in "$@"; do printf '%s ' "$rule" "$rule+ema" "$rule+avg"; done; }

. utils/lib/recipe.sh   # record_piece (and the recipe's log lines and traps)

case $piece in
  P0) ./run.sh --stage 0 --stop-stage 7 --gmm-decode-sets "" ;;
  P1) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" --nnet-dir exp/parity --archs dnn --epochs 12 \
        --strategies "single single+ema bmuf bmuf+ema" \
        --results parity/RESULTS.md --title "Parity probe: DNN 3x512, 12 epochs, one worker and BMUF-8" ;;
  P2)
    # each setting in its own network dir (the run names do not carry tau or eta), with P1's
    # one-worker run linked in as the baseline (its EMAs' half-lives are in frames, as here)
    for setting in "tau4:--block-size 4" "eta075:--nnet-opts sync.block_momentum=0.75"; do
      name=${setting%%:*}
      mkdir -p "exp/parity_$name" "parity/$name"
      ln -sfn ../parity/dnn_single_s1 "exp/parity_$name/dnn_single_s1"
      # shellcheck disable=SC2086
      ./run.sh --stage 8 --stop-stage 10 "${common[@]}" --nnet-dir "exp/parity_$name" \
        --archs dnn --epochs 12 --strategies "single single+ema bmuf bmuf+ema" ${setting#*:} \
        --results "parity/$name/RESULTS.md" \
        --title "Parity probe, BMUF-8 at ${setting#*:}: DNN 3x512, 12 epochs"
    done ;;
  P3a|P3b|P3c|P3d)
    case $piece in
      P3a) strategies=$(rows single) grid= ;;
      P3b) strategies=$(rows single ma) grid=$ma_grid ;;
      P3c) strategies=$(rows single ma bmuf) grid="$ma_grid; $bmuf_grid" ;;
      P3d) strategies=$(rows single ma bmuf) grid="$ma_grid; $bmuf_grid; $bmuf_lr_grid" ;;
    esac
    ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${dnn8[@]}" --strategies "$strategies" \
      --grid "$grid" --ma-lr-times-workers false \
      --results parity/dnn8/RESULTS.md --title "Tuned baselines: DNN 8x512, 8 epochs" ;;
  P3e) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${dnn8_16[@]}" \
        --strategies "$(rows single bmuf)" --grid "bmuf: sync.block_momentum=0.5" \
        --results parity/dnn8_16/RESULTS.md \
        --title "Parity at convergence: DNN 8x512, 16 epochs, each model at its best dev epoch" ;;
  P3f|P3g|P5c|P5d)
    seeds=$(case $piece in P3f|P3g) echo 1 ;; P5c) echo "1 2" ;; P5d) echo "1 2 3" ;; esac)
    grid=$dnn8_16_grid
    [ "$piece" != P3f ] || grid="ma: train.lr=0.2; bmuf: sync.block_momentum=0.5"
    ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${dnn8_16[@]}" --seeds "$seeds" --grid-seed 1 \
      --strategies "$(rows single ma bmuf)" --grid "$grid" --ma-lr-times-workers false \
      --results parity/dnn8_16/RESULTS.md \
      --title "The verdict: DNN 8x512, 16 epochs, each model at its best dev epoch, 8 workers" ;;
  P4|P5a|P5b)
    if [ "$piece" = P4 ]; then
      mkdir -p exp/parity_dnn3 parity/dnn3
      for link in dnn_single_s1:parity/dnn_single_s1 dnn_bmuf_n8_s1_eta0.875:parity/dnn_bmuf_n8_s1 \
                  dnn_bmuf_n8_s1_eta0.75:parity_eta075/dnn_bmuf_n8_s1 \
                  dnn_bmuf_n8_s1_tau4:parity_tau4/dnn_bmuf_n8_s1; do
        ln -sfn "../${link#*:}" "exp/parity_dnn3/${link%%:*}"
      done
    fi
    seeds=$(case $piece in P4) echo 1 ;; P5a) echo "1 2" ;; P5b) echo "1 2 3" ;; esac)
    ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${dnn3[@]}" --seeds "$seeds" \
      --strategies "single single+ema ma ma+ema bmuf bmuf+ema" --grid "$dnn3_grid" \
      --ma-lr-times-workers false ;;
  P6a) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${lstm[@]}" "${lstm12[@]}" "${lstm_bmuf[@]}" ;;
  P6b) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${lstm[@]}" "${lstm24[@]}" \
         --strategies "single single+ema" ;;
  P6c) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${lstm[@]}" "${lstm24[@]}" "${lstm_bmuf[@]}" ;;
  P9) ./run.sh --stage 8 --stop-stage 10 "${common[@]}" "${warm[@]}" ;;
  *) echo "Error: $0: unknown piece '$piece' (expected P0, P1, P2, P3a-P3g, P4, P5a-P5d, P6a-P6c, P9: PLAN.md)" >&2
     exit 1 ;;
esac

record_piece parity/pieces.log "$piece" "parity/run.sh $piece"
