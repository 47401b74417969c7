# The toolkit's one log line, for shell scripts as for the Python steps (emasr.log):
#   2026-12-06 14:52:22 INFO file:line message
# Sourced by utils/parse_options.sh (so by every step and recipe) and by utils/lib/recipe.sh.

log() {
  # log [--error] "message": a line on stdout, the calling file and line before the message
  local level=INFO
  if [ "${1-}" = --error ]; then level=ERROR; shift; fi
  echo -e "$(date '+%Y-%m-%d %H:%M:%S') $level ${BASH_SOURCE[1]##*/}:${BASH_LINENO[0]} $*"
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
