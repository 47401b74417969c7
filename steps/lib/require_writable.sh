# Checks that a step may write where it is asked to, made before any work so that a read-only dir
# fails at once, with a message naming it, instead of part-way through with a job's traceback.
# Sourced by the steps that write into a data dir: make_*.sh (through make_feats.sh) and
# compute_cmvn_stats.sh.

# require_writable DIR WHAT: exit 1 unless DIR, the WHAT directory, is writable. Root may write
# whatever the permission bits say, so [ -w ] alone passes for root: the bits are checked too.
require_writable() {
  if [ ! -w "$1" ] || [ -z "$(find "$1" -maxdepth 0 -perm /222)" ]; then
    die "cannot write to $1 (read-only); expected a writable $2 directory"
  fi
}

# require_writable_dirs DATA LOGDIR OUTDIR WHAT: the data dir (its feats.scp, cmvn.scp ... are
# rewritten), then the log dir and the WHAT output dir, created first if they do not exist.
require_writable_dirs() {
  require_writable "$1" data
  mkdir -p "$2" "$3"
  require_writable "$2" log
  require_writable "$3" "$4"
}
