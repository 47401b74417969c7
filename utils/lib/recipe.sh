#!/usr/bin/env bash
# What every recipe's run.sh shares, sourced after its options are parsed and it is in its own
# directory: the toolkit's log lines (utils/lib/log.sh), `run` (log a command, then run it), the ERR trap that
# names the failed command, the INT/TERM traps that stop the run, stage selection, the stage
# done markers and the input digests a report records (archive_sha256).
#
# A recipe sets `stage`, `stop_stage` and `last_stage` (its highest stage number) and may define
# `stage_settings N`, which prints the options that shape stage N as key=value words: the done
# marker records them, and a later run whose settings differ stops instead of silently reusing
# the stage's outputs.

. "$(dirname "${BASH_SOURCE[0]}")/log.sh"   # log, shell_quoted, log_command
. "$(dirname "${BASH_SOURCE[0]}")/inputs.sh"   # scp_archives

current_command=
# the failed command, after the lines in which it said why (its Error line, a job's log named)
trap 'rc=$?; log --error "FAILED (exit $rc): ${current_command:-$BASH_COMMAND}"' ERR
# Ctrl-C or a kill stops the recipe once the running command has ended. Without these traps bash
# goes on to the next command whenever that command's process exited normally after the signal
# (a Python step that caught it, or got it while exiting with 0), as if nothing had happened.
trap 'log "interrupted (SIGINT) in: ${current_command:-$BASH_COMMAND}"; exit 130' INT
trap 'log "interrupted (SIGTERM) in: ${current_command:-$BASH_COMMAND}"; exit 143' TERM

run() {
  # run CMD...: log the command (shell-quoted, ready to paste back), then run it (set -e stops
  # the recipe when it fails); the command does not log itself again (EMASR_LOGGED_BY)
  current_command=$(shell_quoted "$@")
  log "running: $current_command"
  EMASR_LOGGED_BY=$$ "$@"
  current_command=
}

check_stage_range() {
  # --stage and --stop-stage must be stage numbers of this recipe (before any work)
  local value
  for value in "stage=$stage" "stop-stage=$stop_stage"; do
    if ! [[ ${value#*=} =~ ^[0-9]+$ ]] || [ "${value#*=}" -gt "$last_stage" ]; then
      die "--${value%%=*} must be a stage number from 0 to $last_stage, got '${value#*=}'"
    fi
  done
}

stage_on() {
  [ "$stage" -le "$1" ] && [ "$stop_stage" -ge "$1" ]
}

settings_of() {
  # settings_of N: the recipe's stage_settings N, or nothing when it defines none
  if declare -F stage_settings > /dev/null; then stage_settings "$1"; fi
}

key_values() {
  # key_values KEY...: "key=value ..." of these variables, each value one word (spaces -> commas)
  local key value out=""
  for key in "$@"; do
    value=${!key}
    out="$out${out:+ }$key=${value// /,}"
  done
  echo "$out"
}

settings_changes() {
  # settings_changes RECORDED CURRENT: "key: 'recorded' -> 'current'" for the keys that differ
  local word key out=""
  declare -A was=()
  for word in $1; do was[${word%%=*}]=${word#*=}; done
  for word in $2; do
    key=${word%%=*}
    [ "${was[$key]-}" = "${word#*=}" ] || out="$out${out:+; }$key: '${was[$key]-}' -> '${word#*=}'"
  done
  echo "$out"
}

begin_stage() {
  # begin_stage N "what": false (skip) when stage N's done marker exists; stops the recipe when
  # the marker was written with other settings
  local marker=exp/done/stage$1 recorded current
  if [ -f "$marker" ]; then
    recorded=$(sed -n 's/^settings: //p' "$marker")
    current=$(settings_of "$1")
    if [ -n "$recorded" ] && [ "$recorded" != "$current" ]; then
      die "stage $1 ($2) was done with other settings ($(settings_changes "$recorded" "$current")):" \
        "its outputs do not match this run. Remove $marker to redo it (and the stages after it)," \
        "or run with the settings it was done with"
    fi
    log "stage $1 ($2): done already ($marker: $(head -1 "$marker")); skipped"
    return 1
  fi
  log "stage $1: $2"
  stage_start=$(date +%s)
}

end_stage() {
  # end_stage N: the done marker (seconds taken, date, the settings), written last and atomically
  mkdir -p exp/done
  {
    echo "$(( $(date +%s) - stage_start )) s, finished $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
    echo "settings: $(settings_of "$1")"
  } > "exp/done/stage$1.tmp"
  mv "exp/done/stage$1.tmp" "exp/done/stage$1"
  log "stage $1 done in $(( $(date +%s) - stage_start )) s"
}

archive_sha256() {
  # sha256 (12 hex digits) of the archives an scp file points into, in the scp's order, or
  # "not built": two runs on the same inputs (and the same --nj) show the same digest
  [ -f "$1" ] || { echo "not built"; return; }
  scp_archives "$1" | xargs cat | sha256sum | cut -c1-12
}

record_piece() {
  # record_piece LOG PIECE COMMAND: a campaign piece's provenance, one line appended to LOG when
  # it lands: its command, wall time (this shell's), machine, commit and the digests of the
  # network targets and training features it trained on (run from the recipe dir)
  {
    printf '%s: `%s`, %s s, finished %s, commit %s, %s CPU cores (%s)' "$2" "$3" "$SECONDS" \
      "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "$(git rev-parse --short HEAD)" "$(nproc)" \
      "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    printf ', sha256 targets %s, train features %s\n' "$(archive_sha256 exp/nnet/targets/pdf.scp)" \
      "$(archive_sha256 data/train_fbank/feats.scp)"
  } >> "$1"
}
