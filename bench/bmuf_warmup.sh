#!/usr/bin/env bash
# BMUF at N workers (--num-workers, default 4) next to the same run with a block-momentum warm-up
# (the first --warmup-blocks syncs as model averaging), with a lower block momentum (0.5), with a
# 4 times shorter block (--block-size / 4: 4 times the syncs), and one worker: the dev loss and
# frame accuracy per epoch of each (docs/recipe.md); --variants picks some of them. The network
# is --nnet-config with --set-opts on top (default: conf/nnet/dnn.yaml as it is, 6x1024, lr 0.1,
# tau 16, Nesterov, eta = 1 - 1/N); the rate is constant unless --schedule default (the config's).
# Inputs as a small-profile run leaves them, e.g. from egs/aishell_sim after stage 7:
#   utils/subset_data_dir.sh data/train_fbank 1760 data/train_fbank_third
#   bench/bmuf_warmup.sh exp/nnet/targets data/train_fbank_third data/dev_fbank exp/bmuf_warmup
# The paper-scale DNN at 8 workers on the whole small training set, the annealed schedule:
#   bench/bmuf_warmup.sh --num-workers 8 --epochs 3 --warmup-blocks 12 --schedule default \
#     --set-opts "model.hidden_layers=8 model.hidden_dim=512" \
#     exp/nnet/targets data/train_fbank data/dev_fbank exp/bmuf_warmup_deep8
set -euo pipefail

# Begin configuration section.
epochs=2
num_workers=4
warmup_blocks=8   # about one epoch of a third of the small training set at 4 workers
block_size=16
schedule=constant # constant | default (the config's schedule)
nnet_config=      # default: conf/nnet/dnn.yaml
set_opts=         # config overrides of every variant, e.g. "model.hidden_layers=8"
variants="plain warmup eta0.5 tau single"   # which of the five runs to train
# End configuration section.

. "$(dirname "$0")/../utils/parse_options.sh"
if [ $# -ne 4 ]; then
  echo "Usage: $0 [--epochs 2] [--num-workers 4] [--warmup-blocks 8] [--block-size 16]" \
       "[--schedule constant|default] [--nnet-config FILE] [--set-opts '...']" \
       "[--variants '$variants']" \
       "<targets-dir> <train-data-dir> <dev-data-dir> <out-dir>" >&2
  exit 1
fi
targets=$1; train=$2; dev=$3; out=$4
root=$(cd "$(dirname "$0")/.." && pwd)
: "${nnet_config:=$root/conf/nnet/dnn.yaml}"
. "$root/path.sh"   # the project's environment (.venv, utils/ and steps/ on PATH)
case "$schedule" in
  constant) set_opts="train.schedule=constant $set_opts" ;;
  default) ;;
  *) echo "$0: --schedule must be constant or default, not '$schedule'" >&2; exit 1 ;;
esac
n=$num_workers
for variant in "plain|bmuf$n|$n|bmuf|$block_size|" \
               "warmup|bmuf${n}_warmup|$n|bmuf|$block_size|sync.warmup_blocks=$warmup_blocks" \
               "eta0.5|bmuf${n}_eta0.5|$n|bmuf|$block_size|sync.block_momentum=0.5" \
               "tau|bmuf${n}_tau$((block_size / 4))|$n|bmuf|$((block_size / 4))|" \
               "single|single|1|single|$block_size|"; do
  IFS='|' read -r key name workers strategy tau opts <<< "$variant"
  case " $variants " in *" $key "*) ;; *) continue ;; esac
  start=$SECONDS
  "$root/steps/nnet/train.sh" --nnet-config "$nnet_config" --num-workers "$workers" \
    --strategy "$strategy" --epochs "$epochs" --block-size "$tau" --set-opts "$set_opts $opts" \
    --resume true "$targets" "$train" "$dev" "$out/$name" > /dev/null
  echo "$name: $((SECONDS - start)) s"
  grep -o "epoch [0-9]*: dev loss [0-9.]* acc [0-9.]*" "$out/$name/log/train.log"
done
