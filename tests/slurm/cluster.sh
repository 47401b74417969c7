#!/usr/bin/env bash
# A real Slurm cluster of two nodes on this machine, for the tests (and for trying slurm.pl by hand):
#   tests/slurm/cluster.sh start STATE_DIR   install slurm-wlm and munge when missing (Debian, as
#                                           root), write STATE_DIR/slurm.conf, start munged,
#                                           slurmctld and two slurmd (n1, n2: 1 CPU each, on
#                                           127.0.0.1 with their own ports), wait until both idle
#   tests/slurm/cluster.sh stop STATE_DIR    stop the daemons by their PIDs
# Then `export SLURM_CONF=STATE_DIR/slurm.conf` and sbatch, srun, squeue, scancel talk to it.
# No cgroups (proctrack/linuxproc, task/none) and no accounting: it runs in a container as root.
# Exit status 2 (and one line on stderr) where this machine cannot run it: not root, no apt-get,
# or the packages cannot be installed.
set -euo pipefail

usage="Usage: $0 start|stop STATE_DIR"
[ $# -eq 2 ] || { echo "$usage" >&2; exit 1; }
action=$1
state=$(mkdir -p "$2" && cd "$2" && pwd -P)
log() { echo "$(date '+%F %T') cluster.sh: $*" >&2; }
cannot() { echo "cluster.sh: cannot run a Slurm cluster here: $*" >&2; exit 2; }

stop() {
  local pid_file pids=() _
  for pid_file in "$state"/slurmd-n1.pid "$state"/slurmd-n2.pid "$state"/slurmctld.pid \
                  "$state"/munged.pid; do
    [ -s "$pid_file" ] && pids+=("$(cat "$pid_file")")
    rm -f "$pid_file"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill "${pids[@]}" 2> /dev/null || true
  for _ in $(seq 50); do kill -0 "${pids[@]}" 2> /dev/null || break; sleep 0.1; done
  kill -9 "${pids[@]}" 2> /dev/null || true
}

install_packages() {
  command -v slurmctld > /dev/null && command -v munged > /dev/null && return 0
  [ "$(id -u)" -eq 0 ] || cannot "slurm-wlm and munge are not installed and this is not root"
  command -v apt-get > /dev/null || cannot "slurm-wlm and munge are not installed and there is no apt-get"
  log "installing slurm-wlm and munge (Debian packages)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge; } \
    > "$state/apt.log" 2>&1 || cannot "apt-get install slurm-wlm munge failed (log: $state/apt.log)"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

write_conf() {
  local ctld_port n1_port n2_port
  ctld_port=$(free_port) n1_port=$(free_port) n2_port=$(free_port)
  mkdir -p "$state/spool/ctld" "$state/spool/n1" "$state/spool/n2"
  cat > "$state/slurm.conf" <<EOF
# written by tests/slurm/cluster.sh: two nodes on this machine
ClusterName=emasr-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge.socket
StateSaveLocation=$state/spool/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=30
# a task's stdout is written by its node's slurmd: the same files system here
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n1_port CPUs=1 RealMemory=2000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$n2_port CPUs=1 RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

start_munge() {
  # a key of our own (munged checks that its key belongs to the user running it)
  [ -f "$state/munge.key" ] || { head -c 1024 /dev/urandom > "$state/munge.key"; chmod 600 "$state/munge.key"; }
  munged --force --key-file="$state/munge.key" --socket="$state/munge.socket" \
    --pid-file="$state/munged.pid" --log-file="$state/munged.log" --seed-file="$state/munged.seed" \
    || cannot "munged did not start (log: $state/munged.log)"
}

wait_idle() {
  local _
  for _ in $(seq 150); do
    if [ "$(sinfo -h -N -o '%N %t' 2> /dev/null | grep -c ' idle$')" -eq 2 ]; then return 0; fi
    sleep 0.2
  done
  sinfo -N >&2 || true
  cannot "the nodes did not come up within 30 s (logs: $state/slurmctld.log, $state/slurmd-n*.log)"
}

case $action in
  start)
    install_packages
    stop   # an earlier cluster in this state dir
    write_conf
    export SLURM_CONF=$state/slurm.conf
    start_munge
    slurmctld -i -f "$SLURM_CONF" || cannot "slurmctld did not start (log: $state/slurmctld.log)"
    slurmd -N n1 -f "$SLURM_CONF" || cannot "slurmd n1 did not start (log: $state/slurmd-n1.log)"
    slurmd -N n2 -f "$SLURM_CONF" || cannot "slurmd n2 did not start (log: $state/slurmd-n2.log)"
    wait_idle
    log "cluster up: export SLURM_CONF=$SLURM_CONF" ;;
  stop) stop ;;
  *) echo "$usage" >&2; exit 1 ;;
esac
