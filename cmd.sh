# How recipes run their jobs: every step takes --cmd "$train_cmd" (or $decode_cmd, $cuda_cmd) and
# calls it as `$cmd JOB=1:$nj exp/x/log/name.JOB.log command...`, Kaldi's calling form.
#
# run.pl runs the jobs on this machine (at most one per CPU; --mem, --gpu etc. are ignored).
# On a cluster, switch to queue.pl (GridEngine, options mapped through conf/queue.conf) or
# slurm.pl (Slurm, conf/slurm.conf), e.g.:
#   export train_cmd="queue.pl --mem 2G"
#   export decode_cmd="queue.pl --mem 4G"
#   export cuda_cmd="queue.pl --gpu 1"
# or, on Slurm (conf/slurm.conf maps the options; a -x option goes to sbatch as it is):
#   export train_cmd="slurm.pl --mem 2G -p cpu"
#   export decode_cmd="slurm.pl --mem 4G -p cpu"
#   export cuda_cmd="slurm.pl --gpu 8 --time 24:00:00 -p gpu"   # partition, gres, time limit
# cuda_cmd runs each network training as one job; with run.sh --num-nodes M that job has M nodes
# (sbatch --nodes M) and starts one torchrun agent on each (docs/recipe.md, the cluster runbook).
export train_cmd="run.pl"
export decode_cmd="run.pl"
export cuda_cmd="run.pl"
