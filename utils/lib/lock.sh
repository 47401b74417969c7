# lock_dirs DIR...: an exclusive lock on each dir a step writes, held until the step exits.
# Sourced by utils/parse_options.sh, so every step has it; a step calls it once its arguments are
# read and before it reads or removes anything in those dirs:
#   lock_dirs "$dir"
# A second step on the same dir fails at once, naming the holder's command and PID. The lock is
# flock(1) on <dir>/.lock through a file descriptor the step keeps open: the kernel releases it
# when the step and every job it started are gone (killed included), so a lock left by a dead run
# is not a lock. Dirs a parent step already holds (a decode's scoring, a recipe's steps) are
# listed in EMASR_LOCKED_DIRS and pass through. When the step exits, an EXIT trap removes its lock
# files, and the dirs lock_dirs had to create if the step left them empty (bad input found after
# the lock); a script with an EXIT trap of its own calls release_locks in it.

locked_dirs=()
created_dirs=()

lock_dirs() {
  local dir abs
  for dir in "$@"; do
    if [ ! -d "$dir" ]; then
      mkdir -p "$dir"
      created_dirs+=("$dir")
    fi
    abs=$(cd "$dir" && pwd -P)
    case ":${EMASR_LOCKED_DIRS:-}:" in *":$abs:"*) continue ;; esac
    lock_file "$abs/.lock" "$dir"
    printf 'PID %s: %s\n' "$$" "${step_command:-$0}" > "$abs/.lock"
    locked_dirs+=("$abs")
    export EMASR_LOCKED_DIRS="${EMASR_LOCKED_DIRS:+$EMASR_LOCKED_DIRS:}$abs"
    trap release_locks EXIT
  done
}

lock_file() {
  # lock_file PATH DIR: flock PATH on a new descriptor kept open, or fail naming its holder. A
  # holder removes its lock file when it exits: when the file we locked is no longer the one at
  # PATH, we locked a removed file and try again on the new one.
  local path=$1 dir=$2 fd try
  for try in 1 2 3 4 5; do
    exec {fd}>>"$path"   # append: the holder's line stays readable until we hold the lock
    if ! flock --nonblock "$fd"; then
      echo "$0: $dir is in use by another step (stop it, or wait for it): $(tail -n 1 "$path")" >&2
      exit 1
    fi
    [ "$(stat -L -c %i "/proc/$$/fd/$fd")" = "$(stat -c %i "$path" 2>/dev/null)" ] && return 0
    exec {fd}>&-
  done
  echo "$0: could not lock $dir ($path kept changing)" >&2
  exit 1
}

release_locks() {
  # the step's lock files, and the dirs lock_dirs created that the step left empty
  local dir
  for dir in ${locked_dirs[@]+"${locked_dirs[@]}"}; do
    rm -f "$dir/.lock"
  done
  for dir in ${created_dirs[@]+"${created_dirs[@]}"}; do
    rmdir "$dir" 2>/dev/null || true
  done
}
