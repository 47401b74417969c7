# Parse command-line options, Kaldi style. Source it after the "Begin configuration section":
#   . utils/parse_options.sh
#
#   --foo-bar VALUE   sets the EXISTING shell variable foo_bar (an unknown option is an error)
#   --foo-bar=VALUE   the same
#   --config FILE     sources FILE first (all --config files, left to right, before the other
#                     options, so the command line wins over the file wherever both set something)
#   --help, -h        prints "$help_message" (the script's usage) to stderr and exits 0
#   --                ends the options
# A variable whose current value is true or false accepts only true or false; one whose value is a
# number accepts only a number or a list of them ("1 2 3", "0.0,0.5"). Parsing stops at the
# first argument that is not an option; the caller sees the rest as "$@". Errors name the option and
# exit 1. Works under `set -euo pipefail`; leaves no helper variables behind.

. "$(dirname "${BASH_SOURCE[0]}")/lib/log.sh"   # log, log_command
. "$(dirname "${BASH_SOURCE[0]}")/lib/lock.sh"  # lock_dirs
. "$(dirname "${BASH_SOURCE[0]}")/lib/inputs.sh"  # record_inputs, inputs_unchanged

# Pass 1: source every --config file before the other options (Kaldi's precedence).
_po_args=("$@")
_po_i=0
while [ "$_po_i" -lt "${#_po_args[@]}" ]; do
  _po_arg=${_po_args[$_po_i]}
  case "$_po_arg" in
    --) break ;;
    --config=*) _po_file=${_po_arg#--config=} ;;
    --config)
      if [ $((_po_i + 1)) -ge "${#_po_args[@]}" ]; then
        die "option --config needs a value (a config file)"
      fi
      _po_file=${_po_args[$((_po_i + 1))]} ;;
    --*=*|-h) _po_i=$((_po_i + 1)); continue ;;
    --*) _po_i=$((_po_i + 2)); continue ;;
    *) break ;;
  esac
  if [ ! -r "$_po_file" ]; then
    die "missing config '$_po_file' (given to --config)"
  fi
  # shellcheck disable=SC1090
  . "$_po_file"
  case "$_po_arg" in --config) _po_i=$((_po_i + 2)) ;; *) _po_i=$((_po_i + 1)) ;; esac
done

# Pass 2: the options themselves. An option whose variable holds a number accepts only numbers
# (or a list of them, for the options that take one), so that `--nj abc` fails before any work.
_po_number='-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?'
while [ $# -gt 0 ]; do
  case "$1" in
    --help|-h)
      if [ -z "${help_message:-}" ]; then
        echo "Error: $0: no help found (the script sets no help_message)" 1>&2
      else
        printf '%b\n' "$help_message" 1>&2
      fi
      exit 0 ;;
    --) shift; break ;;
    --*=*) _po_opt=${1%%=*}; _po_value=${1#*=}; _po_shift=1 ;;
    --*)
      _po_opt=$1
      if [ $# -lt 2 ]; then
        die "option $_po_opt needs a value"
      fi
      _po_value=$2; _po_shift=2 ;;
    *) break ;;
  esac
  _po_name=${_po_opt#--}
  _po_name=${_po_name//-/_}
  if [ "$_po_name" = config ] && [ -z "${config+set}" ]; then
    shift "$_po_shift"; continue   # already sourced in pass 1; the script keeps no $config
  fi
  if ! [[ $_po_name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || [ -z "${!_po_name+set}" ]; then
    die "invalid option $_po_opt"
  fi
  case "${!_po_name}" in
    true|false)
      case "$_po_value" in
        true|false) ;;
        *) die "expected \"true\" or \"false\": $_po_opt $_po_value" ;;
      esac ;;
    *)
      if [[ ${!_po_name} =~ ^$_po_number$ ]] && ! [[ $_po_value =~ ^$_po_number([\ ,]+$_po_number)*$ ]]; then
        die "expected a number (or a list of numbers): $_po_opt '$_po_value'"
      fi ;;
  esac
  # printf -v assigns without eval, so values with spaces or quotes are safe.
  printf -v "$_po_name" '%s' "$_po_value"
  shift "$_po_shift"
done

# Every step runs `emasr`: without the environment (. ./path.sh), say how to set it up rather
# than fail later with "emasr: command not found". (A recipe's run.sh sources path.sh itself.)
case "$0" in
  steps/*|*/steps/*|utils/*|*/utils/*)
    command -v emasr > /dev/null || die "emasr is not on PATH; expected the toolkit's" \
      "environment: run '. ./path.sh' in the recipe dir (or the repository root) first, which" \
      "also creates .venv" ;;
esac
# The job launchers (--cmd, and a recipe's --train-cmd, --decode-cmd, --cuda-cmd) are checked
# before the step touches anything: a typo (--cmd runpl) or queue.pl where there is no GridEngine
# would otherwise fail at the first job, after the step had moved or removed its earlier outputs.
# An empty --cmd is almost always a scripting error upstream (Kaldi checks this too).
for _po_name in cmd train_cmd decode_cmd cuda_cmd; do
  [ -n "${!_po_name+set}" ] || continue
  [ -n "${!_po_name}" ] || die "empty argument to --${_po_name//_/-} option"
  read -ra _po_words <<< "${!_po_name}"
  case "${_po_words[0]}" in   # ours, beside this file (a step may put utils/ on PATH later)
    run.pl|queue.pl|slurm.pl) command -v "${_po_words[0]}" > /dev/null ||
      _po_words[0]="$(dirname "${BASH_SOURCE[0]}")/${_po_words[0]}" ;;
  esac
  command -v "${_po_words[0]}" > /dev/null || die "--${_po_name//_/-} '${!_po_name}': no" \
    "command '${_po_words[0]}'; expected a job launcher (run.pl, queue.pl, slurm.pl) on PATH"
  case "${_po_words[0]##*/}" in
    queue.pl|slurm.pl) "${_po_words[@]}" --check || exit 1 ;;   # its config and submit command
  esac
done
# This step in EMASR_STEPS ("PID:start-time:host ..."), which its children inherit: the job launchers
# watch every step above them and stop their jobs when one is gone, even killed by SIGKILL
# (emasr.parallel.signals.StepWatch), so that no job outlives the step that started it.
if [ -r "/proc/$$/stat" ]; then
  _po_value=$(< "/proc/$$/stat")
  read -ra _po_words <<< "${_po_value##*) }"
  export EMASR_STEPS="${EMASR_STEPS:+$EMASR_STEPS }$$:${_po_words[19]}:$(uname -n)"
fi
# The script's command line, logged once the options hold (a bad option prints only its error).
log_command "$0" "${_po_args[@]}"
unset _po_number _po_args _po_i _po_arg _po_file _po_opt _po_value _po_shift _po_name _po_words
true
