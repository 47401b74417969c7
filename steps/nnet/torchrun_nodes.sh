#!/usr/bin/env bash
# One torchrun agent per node, all joined by a c10d rendezvous on the first: the job that
# steps/nnet/train.sh --num-nodes M runs through its --cmd (the launcher gives the M nodes).
#   steps/nnet/torchrun_nodes.sh M <torchrun options and script...>
# Inside a Slurm allocation of at least M nodes (slurm.pl --num-nodes M): the batch script runs on
# the allocation's first node, which hosts the rendezvous (its NodeAddr, a free port, the id
# emasr-<job id>), and `srun` starts the same torchrun command once on each of the M nodes.
# Anywhere else (run.pl): M agents on this machine, rendezvous on 127.0.0.1 (the loopback case).
# Either way the workers see RANK / WORLD_SIZE over all nodes; a failed agent stops the others.
set -euo pipefail

if [ $# -lt 2 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "Usage: $0 <num-nodes> <torchrun options and script...>" >&2
  exit 1
fi
nodes=$1; shift

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

if [ -n "${SLURM_JOB_ID:-}" ] && [ "${SLURM_JOB_NUM_NODES:-1}" -ge "$nodes" ]; then
  head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -1)
  # the address Slurm reaches the node by (a node name need not resolve)
  addr=$(scontrol show node "$head" -o | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
  endpoint=${addr:-$head}:$(free_port)
  echo "# torchrun_nodes.sh: $nodes nodes of Slurm job $SLURM_JOB_ID ($SLURM_JOB_NODELIST)," \
    "rendezvous at $endpoint"
  # --export=ALL: this script's environment (the job's path.sh, train.sh's settings) on every
  # node, where the batch job's --export=PATH would otherwise reach srun as SLURM_EXPORT_ENV
  exec srun --nodes "$nodes" --ntasks "$nodes" --ntasks-per-node 1 --kill-on-bad-exit=1 --export=ALL \
    python -m torch.distributed.run --nnodes "$nodes" --rdzv-backend c10d \
    --rdzv-endpoint "$endpoint" --rdzv-id "emasr-$SLURM_JOB_ID" "$@"
fi

endpoint=127.0.0.1:$(free_port)
echo "# torchrun_nodes.sh: $nodes agents on this machine, rendezvous at $endpoint"
pids=()
stop_agents() { kill "${pids[@]}" 2> /dev/null || true; }
trap stop_agents EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq "$nodes"); do
  python -m torch.distributed.run --nnodes "$nodes" --rdzv-backend c10d \
    --rdzv-endpoint "$endpoint" --rdzv-id "emasr-$$" "$@" &
  pids+=($!)
done
# the first agent to fail ends the job (the others would wait for it at the next rendezvous)
for _ in "${pids[@]}"; do
  code=0
  wait -n || code=$?
  [ "$code" -eq 0 ] || exit "$code"
done
pids=()
