# The toolkit's console format, for shell scripts as for the Python steps (emasr.log;
# docs/reliability.md, "The console"): what a step does and warns about is a log line
#   2026-12-06 14:52:22 INFO file:line message       (log; WARNING: warn)
# and what stops it is one line on stderr, naming the file and what was expected
#   Error: steps/x.sh: expected file data/train/feats.scp to exist      (die)
# Sourced by utils/parse_options.sh (so by every step and recipe) and by utils/lib/recipe.sh.

log() {
  # log [--error] "message": a line on stdout (stderr for --error), the calling file and line
  # before the message
  if [ "${1-}" = --error ]; then
    shift
    echo -e "$(date '+%Y-%m-%d %H:%M:%S') ERROR ${BASH_SOURCE[1]##*/}:${BASH_LINENO[0]} $*" >&2
    return
  fi
  echo -e "$(date '+%Y-%m-%d %H:%M:%S') INFO ${BASH_SOURCE[1]##*/}:${BASH_LINENO[0]} $*"
}

warn() {
  # warn "message": a log line at WARNING on stderr (what a step goes on despite)
  echo -e "$(date '+%Y-%m-%d %H:%M:%S') WARNING ${BASH_SOURCE[1]##*/}:${BASH_LINENO[0]} $*" >&2
}

die() {
  # die "message": the step's one Error line on stderr, then exit 1 (the console format,
  # docs/reliability.md: "Error: <script>: <what is wrong, naming the file and what was expected>")
  echo "Error: $0: $*" >&2
  exit 1
}

shell_quoted() {
  # shell_quoted ARG...: the words as a shell reads them back (quoted where they need it)
  local arg out=""
  for arg in "$@"; do
    if [[ -z $arg || $arg =~ [^A-Za-z0-9_./=:,+@%^-] ]]; then
      arg="'${arg//\'/\'\\\'\'}'"
    fi
    out="$out${out:+ }$arg"
  done
  printf '%s' "$out"
}

log_command() {
  # log_command "$0" "$@": the command a script was started with, once and ready to paste back
  # (kept in step_command for the lock file, utils/lib/lock.sh); not logged when the recipe's
  # `run` (utils/lib/recipe.sh) has just logged it as this script's parent
  step_command=$(shell_quoted "$@")
  [ "${EMASR_LOGGED_BY:-}" = "$PPID" ] && return 0
  echo "$(date '+%Y-%m-%d %H:%M:%S') INFO ${1##*/}:${BASH_LINENO[1]} $step_command"
}
