# lock_dirs DIR...: an exclusive lock on each dir a step writes, held until the step exits.
# Sourced by utils/parse_options.sh, so every step has it; a step calls it once its arguments are
# read and before it reads or removes anything in those dirs:
#   lock_dirs "$dir"
# A second step on the same dir fails at once, naming the holder's command and PID. The lock is
# flock(1) on <dir>/.lock through a file descriptor the step keeps open: the kernel releases it
# when the step and every job it started are gone (killed included), so a lock left by a dead run
# is not a lock. A holder killed by SIGKILL leaves its jobs' launcher running only until it
# notices (it watches the steps above it) and stops them: a second step then waits for that
# (LOCK_TAKEOVER_S, 20 s) and takes the lock over, or names the process that still holds it.
# Dirs a parent step already holds (a decode's scoring, a recipe's steps) are
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
    flock --nonblock "$fd" || take_over_lock "$fd" "$path" "$dir"
    [ "$(stat -L -c %i "/proc/$$/fd/$fd")" = "$(stat -c %i "$path" 2>/dev/null)" ] && return 0
    exec {fd}>&-
  done
  die "could not lock $dir ($path kept changing)"
}

take_over_lock() {
  # take_over_lock FD PATH DIR: the lock is held. When the step its line names still runs, fail
  # naming it. When that step is gone (killed), the jobs it left are stopping (their launcher
  # watches it, emasr.parallel.signals.StepWatch) and the lock is taken over once they have;
  # a process that still holds it after LOCK_TAKEOVER_S seconds is named, live, with its command.
  local fd=$1 path=$2 dir=$3 holder pid
  holder=$(tail -n 1 "$path")
  pid=$(sed -n 's/^PID \([0-9]*\):.*/\1/p' <<< "$holder")
  if [ -z "$pid" ] || pid_running "$pid"; then
    die "$dir is in use by another step (stop it, or wait for it): $holder"
  fi
  log "$dir: its lock's step (PID $pid) no longer runs; waiting up to ${LOCK_TAKEOVER_S:-20} s" \
    "for the jobs it started to stop"
  if flock --timeout "${LOCK_TAKEOVER_S:-20}" "$fd"; then
    log "$dir: took over the lock of PID $pid (its jobs have stopped)"
    return 0
  fi
  exec {fd}>&-   # so that the holders found below are not this step and its children
  pid=$(find /proc/[0-9]*/fd -lname "$(readlink -f "$path")" 2> /dev/null | cut -d/ -f3 |
        grep -vx "$$" | sort -n | head -n 1)
  die "$dir is in use by PID ${pid:-?} ($(tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null |
    cut -c1-200)), left running by a step that no longer runs ($holder): stop it, or wait for it"
}

pid_running() {
  # pid_running PID: true while the process runs (a zombie, killed but not yet reaped, does not)
  local stat
  stat=$(2> /dev/null < "/proc/$1/stat") || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
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
