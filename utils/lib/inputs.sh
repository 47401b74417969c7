# What a step's outputs were made from: the sha256 of every input file, in sha256sum's format, in
# <dir>/inputs.sha256 (emasr.io.inputs_record reads it too). Sourced by utils/parse_options.sh.
# A decode writes it last, after its scores, and removes it first: a dir whose record is missing
# or no longer matches its inputs is not reused by the experiment driver (it decodes again) nor
# reported (emasr report refuses it), however its model, graph or features were replaced.
#   remove_inputs_record DIR          before the step touches its outputs
#   record_inputs DIR FILE...         once they are complete (an .scp adds its archives)
#   inputs_unchanged DIR              true when DIR has a record and every file in it still
#                                     has its digest; otherwise the first changed file in $changed

INPUTS_RECORD=inputs.sha256

scp_archives() {
  # scp_archives SCP: the archives an scp file points into, each once, in the scp's order
  cut -d' ' -f2- "$1" | sed 's/:[0-9]*$//' | awk '!seen[$0]++'
}

remove_inputs_record() {
  rm -f "$1/$INPUTS_RECORD"
}

record_inputs() {
  local dir=$1 file
  shift
  for file in "$@"; do
    [ -f "$file" ] || continue
    echo "$file"
    # an scp's archives: the features themselves, not only where they are
    case "$file" in *.scp) scp_archives "$file" ;; esac
  done | awk '!seen[$0]++' | tr '\n' '\0' | xargs -0 -r sha256sum > "$dir/$INPUTS_RECORD.tmp"
  mv "$dir/$INPUTS_RECORD.tmp" "$dir/$INPUTS_RECORD"
}

inputs_unchanged() {
  changed=
  if [ ! -f "$1/$INPUTS_RECORD" ]; then
    changed="it has no $INPUTS_RECORD: its decode did not finish"
    return 1
  fi
  changed=$(sha256sum --check --quiet "$1/$INPUTS_RECORD" 2>&1 | head -n 1 |
            sed "s/: FAILED.*$/ differs/") || true
  [ -z "$changed" ]
}
