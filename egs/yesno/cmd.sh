# How this recipe runs its jobs: the repository's defaults (run.pl on this machine; see ../../cmd.sh
# for GridEngine and Slurm). To change them for this recipe only, export train_cmd, decode_cmd and
# cuda_cmd below the source line, e.g.
#   export cuda_cmd="slurm.pl --gpu 1 --time 8:00:00"   # network training (one job per run)
# shellcheck disable=SC1091
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)/cmd.sh"
