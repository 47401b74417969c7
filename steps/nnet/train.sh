#!/usr/bin/env bash
# Train a DNN or LSTM acoustic model with N synchronous workers (torchrun, one process each):
# a sync rule of emasr.nnet.sync.RULES (single / MA / BMUF / DiLoCo) every --block-size
# minibatches, optional EMA model.
# Logic lives in `emasr train`; this script wires options and launches the workers.
set -euo pipefail

# Begin configuration section.
cmd=run.pl      # job launcher for the torchrun job, e.g. "$cuda_cmd" from cmd.sh on a cluster
nnet_config=    # YAML config, e.g. conf/nnet/dnn.yaml (defaults fill the rest)
num_workers=1   # workers on each node (N: what the sync rules count, times --num-nodes)
num_nodes=1     # nodes: one torchrun agent on each, a c10d rendezvous on the first
                # (steps/nnet/torchrun_nodes.sh; the --cmd launcher is given --num-nodes)
workers_per_process=  # K: workers trained side by side in each process (dist.workers_per_process);
                # torchrun starts N / K processes (default: --set-opts' value, else 1)
strategy=       # a sync rule of emasr.nnet.sync.RULES (default: the config's)
block_size=     # tau: minibatches between syncs
ema_decay=      # EMA decay per sync
ema_half_life_frames=  # or: EMA half life in training frames
epochs=
init_model=     # warm start (train.init_model): a model file of this toolkit (final.pt, ema.pt) or
                # an epoch-end checkpoint dir (<exp>/checkpoints/epochEEE-block000000); the run
                # trains the epochs after the ones it had trained, up to --epochs
set_opts=       # extra config overrides, space separated: "train.lr=0.2 model.hidden_dim=512"
resume=false    # continue from the latest complete checkpoint
max_restarts=0  # torchrun --max-restarts: restart the worker group this many times after a worker
                # fails; a restarted group resumes from the latest complete checkpoint
trans_mdl=      # Kaldi final.mdl of the alignments (e.g. exp/tri3_ali/final.mdl): copied with its
                # tree to <exp-dir> so steps/nnet/decode.sh finds the TransitionModel there
torchrun_opts=  # torchrun options of your own for several nodes, e.g. "--nnodes 2 --rdzv-backend
                # c10d --rdzv-endpoint host:29400 --rdzv-id job1" (replace --standalone; a job
                # that starts this same command on every node; --num-nodes does all of it)
# End configuration section.

help_message="Usage: $0 [options] <targets-dir> <train-data-dir> <dev-data-dir> <exp-dir>
e.g.: $0 --num-workers 4 --strategy bmuf --ema-decay 0.99 --nnet-config conf/nnet/dnn.yaml \\
        exp/dnn/targets data/train_fbank data/dev_fbank exp/dnn
Writes <exp-dir>/final.pt (and ema.pt with an EMA), checkpoints, metrics.jsonl, regime.json
(frames per sync, syncs, the frames trained, BMUF's data rule, the warm start); log in
<exp-dir>/log/train.log. Every epoch trains every frame of the data at any --num-workers (the
epoch's last block is shorter). Before training, prints one warning line when BMUF's data rule
is broken (emasr regime; log/regime.log).
Options:
  --nnet-config FILE              YAML config (conf/nnet/dnn.yaml); defaults fill the rest
  --num-workers N                 synchronous workers on each node (default $num_workers)
  --num-nodes M                   M nodes of N workers: one job of M nodes through --cmd
                                  (slurm.pl: sbatch --nodes M, srun on each), or M agents
                                  here with run.pl (default $num_nodes)
  --workers-per-process K         K of them in each process, batched (N / K processes; K | N)
  --strategy RULE                 synchronization: a sync rule, e.g. single, ma, bmuf, diloco
                                  (emasr train --help lists them; default: the config's)
  --block-size TAU                minibatches between syncs
  --ema-decay A | --ema-half-life-frames F   EMA of the synchronized model
  --epochs E                      epochs (a warm start's included)
  --init-model FILE|DIR           warm start: W_g, the averaged models and every worker start
                                  at a model file's parameters (final.pt, ema.pt, ...) or at an
                                  epoch-end checkpoint's W_g (<exp>/checkpoints/epochEEE-
                                  block000000), the optimizers fresh; the run trains epochs
                                  k+1..E after the file's k, the learning-rate schedule going
                                  on from there (train.init_model; a file of another
                                  architecture, input dimension or pdf set is refused)
  --set-opts 'k=v ...'            config overrides, e.g. 'train.lr=0.2 model.hidden_dim=512'
  --resume true                   continue from the latest complete checkpoint
  --max-restarts N                restart the worker group N times after a worker fails
  --trans-mdl ALI/final.mdl       the alignments' Kaldi model (copied with its tree to <exp-dir>)
  --torchrun-opts '...'           your own torchrun options for several nodes (replace
                                  --standalone; not with --num-nodes)
  --cmd CMD                       job launcher (default run.pl)"

. "$(dirname "$0")/../../utils/parse_options.sh"

if [ $# -ne 4 ]; then
  printf '%s\n' "$help_message" >&2
  exit 1
fi
targets=$1; train_data=$2; dev_data=$3; dir=$4
lock_dirs "$dir"

if ! [[ $num_workers =~ ^[0-9]+$ ]] || [ "$num_workers" -lt 1 ]; then
  die "--num-workers must be a positive integer (workers on each node), got '$num_workers'"
fi
if [ "$num_nodes" -lt 1 ]; then
  die "--num-nodes must be a positive integer, got '$num_nodes'"
fi
if [ "$num_nodes" -gt 1 ] && [ -n "$torchrun_opts" ]; then
  die "give --num-nodes or --torchrun-opts, not both (--num-nodes sets torchrun's nodes" \
    "and rendezvous)"
fi
# K from --workers-per-process, or from --set-opts; --num-workers keeps counting workers (N)
opts_k=
for kv in $set_opts; do
  case $kv in dist.workers_per_process=*) opts_k=${kv#dist.workers_per_process=} ;; esac
done
if [ -n "$workers_per_process" ] && [ -n "$opts_k" ] && [ "$workers_per_process" != "$opts_k" ]; then
  die "--workers-per-process $workers_per_process and --set-opts dist.workers_per_process=$opts_k differ"
fi
per_process=${workers_per_process:-${opts_k:-1}}
if ! [[ $per_process =~ ^[0-9]+$ ]] || [ "$per_process" -lt 1 ]; then
  die "--workers-per-process must be a positive integer, got '$per_process'"
fi
if [ $((num_workers % per_process)) -ne 0 ]; then
  die "--num-workers $num_workers is not a multiple of --workers-per-process $per_process" \
       "(processes = workers / workers per process)"
fi
processes=$((num_workers / per_process))
for f in "$targets/pdf.scp" "$targets/num_pdfs" "$targets/prior.vec" \
         "$train_data/feats.scp" "$dev_data/feats.scp"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
if [ -n "$nnet_config" ] && [ ! -f "$nnet_config" ]; then
  die "expected file $nnet_config to exist"
fi
if [ -n "$init_model" ] && [ ! -e "$init_model" ]; then
  die "--init-model: expected file $init_model to exist (a model file or an epoch-end" \
    "checkpoint dir)"
fi
if [ -n "$trans_mdl" ]; then
  [ -f "$trans_mdl" ] || die "expected file $trans_mdl to exist"
  # Targets of one model trained against another's TransitionModel decode to nonsense: check
  # the pdf counts (and the tree beside the model) before any work.
  compat=(--targets "$targets" --model "$trans_mdl")
  [ -f "$(dirname "$trans_mdl")/tree" ] && compat+=(--tree "$(dirname "$trans_mdl")/tree")
  emasr check-compatible "${compat[@]}" || exit 1
fi
args=()
[ -n "$nnet_config" ] && args+=(--config "$nnet_config")
[ -n "$strategy" ] && args+=(--strategy "$strategy")
[ -n "$block_size" ] && args+=(--block-size "$block_size")
[ -n "$ema_decay" ] && args+=(--ema-decay "$ema_decay")
[ -n "$ema_half_life_frames" ] && args+=(--ema-half-life-frames "$ema_half_life_frames")
[ -n "$epochs" ] && args+=(--epochs "$epochs")
# a YAML single-quoted string, so that any path stays a string (its quotes doubled)
[ -n "$init_model" ] && args+=(--set "train.init_model='${init_model//\'/\'\'}'")
for kv in $set_opts; do args+=(--set "$kv"); done
[ -n "$workers_per_process" ] && args+=(--set "dist.workers_per_process=$workers_per_process")
# the regime before anything is written (emasr regime, from the targets' lengths, as the trainer
# deals the shards; it refuses targets without frames or at another frame rate): its numbers in
# log/regime.log, one warning line here when BMUF's data rule is broken
regime_err=$(mktemp)
if ! regime=$(emasr regime "${args[@]}" --num-workers $((num_workers * num_nodes)) "$targets" \
                "$train_data" 2> "$regime_err"); then
  sed "s|^Error: |Error: $0: |" "$regime_err" >&2   # emasr's Error line, naming this step
  rm -f "$regime_err"
  exit 1
fi
cat "$regime_err" >&2   # log lines (the data rule's warning)
rm -f "$regime_err"
mkdir -p "$dir/log"
printf '%s\n' "$regime" > "$dir/log/regime.log"
if [ -n "$trans_mdl" ]; then
  cp "$trans_mdl" "$dir/final.mdl"
  [ -f "$(dirname "$trans_mdl")/tree" ] && cp "$(dirname "$trans_mdl")/tree" "$dir/tree"
fi
[ "$resume" = true ] && args+=(--resume)

# The job's environment, set on its command line: a scheduler's job does not inherit this shell's
# (slurm.pl exports only PATH). A restarted worker group must not read the previous group's
# rendezvous keys (stale gloo/NCCL addresses: "connectFullMesh failed ... Connection refused";
# pytorch issue 135712): each rendezvous round gets its own store instead of sharing torchrun's.
# The trainer checks that K x processes is N (a K from --nnet-config would otherwise change N).
job_env=(env TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 EMASR_NUM_WORKERS="$num_workers")
launcher=(python -m torch.distributed.run --max-restarts "$max_restarts")
job_opts=()
if [ "$num_nodes" -gt 1 ]; then
  # one job of M nodes (the launcher's --num-nodes), one agent per node, the same command on each
  launcher=("$(dirname "$0")/torchrun_nodes.sh" "$num_nodes" --max-restarts "$max_restarts"
            --nproc-per-node "$processes")
  job_opts=(--num-nodes "$num_nodes")
elif [ -n "$torchrun_opts" ]; then
  # shellcheck disable=SC2206
  launcher+=($torchrun_opts --nproc-per-node "$processes")
else
  launcher+=(--standalone --nproc-per-node "$processes")
fi
# torchrun runs `emasr train` (via the module, so the venv's emasr is used) once per worker.
launcher+=(--module emasr.cli train "${args[@]}" "$targets" "$train_data" "$dev_data" "$dir")

log "training with $num_workers worker(s) in $processes process(es)$([ "$num_nodes" -eq 1 ] ||
  echo " on each of $num_nodes nodes"); log in $dir/log/train.log"
$cmd ${job_opts[@]+"${job_opts[@]}"} "$dir/log/train.log" "${job_env[@]}" "${launcher[@]}"
# the averaged models beside the global one: every other <name>.pt (emasr.nnet.averages)
averaged=$(cd "$dir" && ls -- *.pt 2> /dev/null | grep -vx final.pt | paste -sd' ' || true)
log "trained $dir/final.pt${averaged:+ and ${averaged// /, }}"
