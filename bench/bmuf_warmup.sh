#!/usr/bin/env bash
# The GPU check's 4-worker BMUF DNN (conf/nnet/dnn.yaml as it is: 6x1024, lr 0.1, tau 16, Nesterov,
# eta = 1 - 1/N) on the CPU, at a constant rate for --epochs epochs, next to the same run with a
# block-momentum warm-up (the first --warmup-blocks syncs as model averaging), with a lower block
# momentum, and one worker: the dev loss and frame accuracy per epoch of each (docs/recipe.md).
# Inputs as a small-profile run leaves them, e.g. from egs/aishell_sim after stage 7:
#   utils/subset_data_dir.sh data/train_fbank 1760 data/train_fbank_third
#   bench/bmuf_warmup.sh exp/nnet/targets data/train_fbank_third data/dev_fbank exp/bmuf_warmup
set -euo pipefail

# Begin configuration section.
epochs=2
warmup_blocks=8   # about one epoch of a third of the small training set at 4 workers
# End configuration section.

. "$(dirname "$0")/../utils/parse_options.sh"
if [ $# -ne 4 ]; then
  echo "Usage: $0 [--epochs 2] [--warmup-blocks 8] <targets-dir> <train-data-dir> <dev-data-dir> <out-dir>" >&2
  exit 1
fi
targets=$1; train=$2; dev=$3; out=$4
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/path.sh"   # the project's environment (.venv, utils/ and steps/ on PATH)
for variant in "bmuf4|4|bmuf|" "bmuf4_warmup|4|bmuf|sync.warmup_blocks=$warmup_blocks" \
               "bmuf4_eta0.5|4|bmuf|sync.block_momentum=0.5" "single|1|single|"; do
  IFS='|' read -r name workers strategy opts <<< "$variant"
  start=$SECONDS
  "$root/steps/nnet/train.sh" --nnet-config "$root/conf/nnet/dnn.yaml" --num-workers "$workers" \
    --strategy "$strategy" --epochs "$epochs" --set-opts "train.schedule=constant $opts" \
    "$targets" "$train" "$dev" "$out/$name" > /dev/null
  echo "$name: $((SECONDS - start)) s"
  grep -o "epoch [0-9]*: dev loss [0-9.]* acc [0-9.]*" "$out/$name/log/train.log"
done
