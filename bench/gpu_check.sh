#!/usr/bin/env bash
# The GPU checks of the paper's recipe in one short run (at most --budget, 500 s), for a machine
# with a GPU and the network targets and fbank data dirs of a recipe run:
#  1. bench/train.py on the GPU with a large-profile-sized DNN (6 x 1024, 2000 pdfs): the trainer
#     against a hand-written loop, one EMA update against a block, and 1, 2, 4 workers (workers
#     beyond the GPUs share them through gloo); (g) the trainer with the resident data path
#     against the stream loader and the loop;
#  2. the same DNN in bf16 with TF32 matmuls (trainers and loop alike), the resident shard in fp16,
#     and (h): one process of K = 1, 2, 4, 8, 16, 32 virtual workers (BMUF) of 256 frames each,
#     frames/s against K x one worker and TFLOP/s done; (i) tensor operations (and kernel
#     launches) per step, K = 1, 8, 32; then (h) for K = 1, 8, 32 again with the step compiled
#     in reduce-overhead mode (CUDA graphs, train.compile_mode), against the eager sweep;
#  3. short trainings of the large profile's models (conf/nnet/dnn.yaml and lstm.yaml as they
#     are) with steps/nnet/train.sh: one worker (nccl), the DNN again with the fast options
#     ($fast_opts), and 4 workers BMUF+EMA (DNN and LSTM) and MA+EMA (DNN);
#  4. bench/train.py's speed-up curve on the CPU cores: 1, 2, 4, 8 workers of one thread, and (g).
# Each part is cut short rather than overrun --budget. Everything lands in <out-dir>: log.txt,
# speedup_cuda.json and speedup_cpu.json (for `emasr report --bench`), gpu_util.csv, exp/<run>/.
set -u

# Begin configuration section.
device=cuda       # cuda | cpu (cpu: the same plumbing on a machine without a GPU)
epochs=6          # epochs of each training
budget=500        # seconds for everything
train_opts=       # extra config overrides for the trainings, e.g. "model.hidden_dim=64"
fast_opts="data.loader=resident data.resident_dtype=float16 train.precision=bf16 train.tf32=true train.optimizer_impl=fused"
# End configuration section.

. "$(dirname "$0")/../utils/parse_options.sh"
if [ $# -ne 4 ]; then
  echo "Usage: $0 [--device cuda|cpu] [--epochs 6] [--budget 500] [--train-opts 'k=v ...'] \\"
  echo "          [--fast-opts 'k=v ...']   (the overrides of the dnn_single_fast training)"
  echo "          <targets-dir> <train-data-dir> <dev-data-dir> <out-dir>"
  echo "e.g.: $0 exp/nnet/targets data/train_fbank data/dev_fbank exp/gpu_check"
  exit 1
fi
targets=$1; train_data=$2; dev_data=$3; out=$4
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$root/utils:$root/steps:$root/steps/nnet:$PATH PYTHONUNBUFFERED=1
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
t0=$SECONDS
left() { echo $((budget - (SECONDS - t0))); }
limit() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 5 ? l - 5 : 1)); }
step() { echo "=== $(date +%T) [$((SECONDS - t0)) s] $*"; }

step environment
nvidia-smi -L 2>/dev/null; echo "cores: $(nproc)"
python -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count(), torch.version.cuda)"
smi=
if [ "$device" = cuda ] && command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv -l 1 \
    > "$out/gpu_util.csv" &
  smi=$!
fi

big=(--utts 512 --hidden 1024 --layers 6 --pdfs 2000 --repeats 2 --threads 2)
step "bench/train.py on $device: 6x1024 DNN, 2000 pdfs, 1, 2, 4 workers; (g) the resident loader"
timeout "$(limit 150)" python "$root/bench/train.py" --device "$device" --workers 1,2,4 --resident \
  "${big[@]}" --json "$out/speedup_$device.json"
echo "rc=$?"

step "bench/train.py on $device: the same DNN in bf16 with TF32, the resident shard in fp16"
timeout "$(limit 80)" python "$root/bench/train.py" --device "$device" --workers "" --resident \
  --resident-dtype float16 --precision bf16 --tf32 "${big[@]}"
echo "rc=$?"

# 2048 utterances: 64 per worker at K = 32 (9 blocks an epoch), so each epoch's fixed costs do not
# decide the large-K points (with 512, 2 blocks an epoch)
step "bench/train.py on $device: K virtual workers of the same DNN in bf16, K = 1 to 32; (i)"
timeout "$(limit 150)" python "$root/bench/train.py" --device "$device" --workers "" --resident \
  --resident-dtype float16 --precision bf16 --tf32 "${big[@]}" --utts 2048 --repeats 1 \
  --virtual-sweep 1,2,4,8,16,32 --host-operations 1,8,32
echo "rc=$?"

# (a) and (g) of this run compile in their first round, hence two rounds (the best is the second)
step "bench/train.py on $device: the same sweep for K = 1, 8, 32, compiled as CUDA graphs"
timeout "$(limit 100)" python "$root/bench/train.py" --device "$device" --workers "" --resident \
  --resident-dtype float16 --precision bf16 --tf32 "${big[@]}" --utts 2048 --repeats 2 \
  --virtual-sweep 1,8,32 --compile reduce-overhead
echo "rc=$?"

train() {   # train NAME 'extra config overrides' train.sh-options...
  local name=$1 opts=$2; shift 2
  step "train $name: $* ${opts:+--set-opts '$opts'}"
  [ "$(left)" -gt 40 ] || { echo "skipped: $(left) s left"; return; }
  timeout "$(limit 110)" steps/nnet/train.sh --epochs "$epochs" \
    --set-opts "dist.device=$device $train_opts $opts" \
    "$@" "$targets" "$train_data" "$dev_data" "$out/exp/$name"
  echo "rc=$?"
  grep -E "epoch [0-9]+:|Error" "$out/exp/$name/log/train.log" | tail -8
}
# relative to the working directory: the committed log carries no machine's absolute paths
dnn=(--nnet-config "$(realpath --relative-to=. "$root/conf/nnet/dnn.yaml")")
lstm=(--nnet-config "$(realpath --relative-to=. "$root/conf/nnet/lstm.yaml")")
ema=(--ema-half-life-frames 90000)
train dnn_single      ""           "${dnn[@]}" --num-workers 1 --strategy single
train dnn_single_fast "$fast_opts" "${dnn[@]}" --num-workers 1 --strategy single
train dnn_bmuf4       ""           "${dnn[@]}" --num-workers 4 --strategy bmuf "${ema[@]}"
train lstm_single     ""           "${lstm[@]}" --num-workers 1 --strategy single
train lstm_bmuf4      ""           "${lstm[@]}" --num-workers 4 --strategy bmuf "${ema[@]}"
train dnn_ma4         ""           "${dnn[@]}" --num-workers 4 --strategy ma "${ema[@]}"

step "bench/train.py on the CPU cores: 4x256 DNN, 1, 2, 4, 8 workers of one thread; (g)"
timeout "$(limit 120)" python "$root/bench/train.py" --device cpu --workers 1,2,4,8 --utts 256 \
  --repeats 1 --threads 1 --resident --json "$out/speedup_cpu.json"
echo "rc=$?"

[ -n "$smi" ] && kill "$smi"
step done
