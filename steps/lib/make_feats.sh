# The body of Kaldi's feature steps, steps/make_{fbank,mfcc,mfcc_pitch,fbank_pitch}.sh: they differ
# only in the feature kind, so each sets what its kind is and sources this file, with no arguments,
# so that it parses the step's own "$@" (and $0, in every message, stays the step's name).
#
# What a step sets first, after the defaults of its --*-config options (its configuration section):
#   feat_kind      the kind in file names: raw_<kind>_<set>.JOB.{ark,scp}, make_<kind>_<set>.JOB.log
#   feat_desc      the kind in messages: "computing <desc> failed", "succeeded making <desc> ..."
#   feat_compute   the emasr subcommand that computes one job's features, then each config option it
#                  takes with the variable that holds the file (the step's option is that variable's
#                  name with dashes, as parse_options.sh reads it), e.g.
#                  (compute-mfcc-pitch-feats --mfcc-config mfcc_config --pitch-config pitch_config);
#                  names, not values, as the values are known only once the options are parsed
#   usage_example  optional: the usage's example <log-dir> <feat-dir>, by default
#                  exp/make_<kind>/train and the base features' name (fbank for fbank_pitch); its
#                  last word also names the <feat-dir> argument (<fbank-dir>)
#
# Then, as each step did on its own before: one `emasr <compute>` job per utterance split, and
# `emasr merge-feats-jobs` writes <data>/{feats.scp,utt2num_frames,utt2dur,frame_shift,conf/}.

# Begin configuration section (the options every make_*.sh takes).
nj=4
cmd=run.pl
compress=true
write_utt2num_frames=true  # accepted for Kaldi compatibility: utt2num_frames is always written
write_utt2dur=true         # likewise utt2dur
# End configuration section.

# config_usage VAR: the usage line of the config option whose file VAR holds, with its default.
config_usage() {
  local what
  case $1 in fbank_config) what=fbank ;; mfcc_config) what=MFCC ;; pitch_config) what=pitch ;; esac
  printf '  %-26s # Kaldi-syntax %s config (default %s)\n' "--${1//_/-} <file>" "$what" "${!1}"
}
usage_configs=
for ((i = 2; i < ${#feat_compute[@]}; i += 2)); do
  usage_configs+=$'\n'$(config_usage "${feat_compute[i]}")
done
usage_example=${usage_example:-exp/make_$feat_kind/train ${feat_kind%%_*}}
dir_arg="<${usage_example##* }-dir>"  # the usage's name for <feat-dir>: <fbank-dir>, <mfcc-dir>
help_message="Usage: $0 [options] <data-dir> [<log-dir> [$dir_arg]]
e.g.: $0 data/train $usage_example
Note: <log-dir> defaults to <data-dir>/log, and $dir_arg defaults to <data-dir>/data.
Options:
  --nj <nj>                  # number of parallel jobs (default $nj)
  --cmd <run.pl|queue.pl ..> # how to run jobs (default $cmd)$usage_configs
  --compress <true|false>    # compress the matrices as Kaldi's --compress (default $compress)
Writes $dir_arg/raw_${feat_kind}_<set>.JOB.{ark,scp}, then <data-dir>/{feats.scp,utt2num_frames,
utt2dur,frame_shift,conf/}. Unusable utterances are named in the job logs and skipped; the step
fails if fewer than 95% of the utterances get features."
# parse_options.sh takes any variable set by now for an option: the kind's are read-only so that
# --feat-kind and the like are errors, and the usage's parts are dropped.
readonly feat_kind feat_desc feat_compute
unset usage_configs usage_example dir_arg i

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"  # run.pl, split_data.sh even when the caller's PATH lacks them
# shellcheck source=steps/lib/require_writable.sh
. "$(dirname "${BASH_SOURCE[0]}")/require_writable.sh"

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
data=$1
logdir=${2:-$data/log}
featdir=${3:-$data/data}
[ ! -d "$data" ] || lock_dirs "$data" "$featdir"

# The kind's config files, now that the options have set them: each goes to the compute jobs by
# the option feat_compute names, and to merge-feats-jobs (which copies it into <data>/conf) by
# --config.
configs=()
compute_config_opts=()
merge_config_opts=()
for ((i = 1; i < ${#feat_compute[@]}; i += 2)); do
  config_var=${feat_compute[i + 1]}
  configs+=("${!config_var}")
  compute_config_opts+=("${feat_compute[i]}" "${!config_var}")
  merge_config_opts+=(--config "${!config_var}")
done

for f in "$data/wav.scp" "$data/utt2spk" "${configs[@]}"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
name=$(basename "$data")
require_writable_dirs "$data" "$logdir" "$featdir" feature
featdir=$(cd "$featdir" && pwd)  # the scp files must name the arks by absolute path
# A killed job (Ctrl-C) leaves its ark under a temporary name: remove an earlier run's now, and
# this run's on any exit (after a success there are none).
clean_tmp() {
  rm -f "$featdir/raw_${feat_kind}_$name".*.tmp.* "$logdir"/utt2num_frames.*.tmp.* \
    "$logdir"/utt2dur.*.tmp.*
}
clean_tmp
trap 'clean_tmp; release_locks' EXIT

validate_data_dir.sh --quiet --no-text --no-feats "$data"   # its warnings are the data prep's
if [ -f "$data/feats.scp" ]; then
  mkdir -p "$data/.backup"
  log "moving $data/feats.scp to $data/.backup"
  mv "$data/feats.scp" "$data/.backup/"
fi

split_data.sh --per-utt "$data" "$nj"
sdata=$data/split${nj}utt
segments_opt=()
[ -f "$data/segments" ] && segments_opt=(--segments "$sdata/JOB/segments")
compress_opt=--no-compress
[ "$compress" = true ] && compress_opt=--compress

raw=$featdir/raw_${feat_kind}_$name  # each job writes $raw.JOB.ark and $raw.JOB.scp
$cmd JOB=1:"$nj" "$logdir/make_${feat_kind}_${name}.JOB.log" \
  emasr "${feat_compute[0]}" "${compute_config_opts[@]}" \
    "$compress_opt" ${segments_opt[@]+"${segments_opt[@]}"} \
    --utt2num-frames "$logdir/utt2num_frames.JOB" --utt2dur "$logdir/utt2dur.JOB" \
    "$sdata/JOB/wav.scp" "$raw.JOB.ark" "$raw.JOB.scp" \
  || { echo "Error: $0: computing $feat_desc failed; see $logdir/make_${feat_kind}_${name}.*.log" >&2
       exit 1; }

emasr merge-feats-jobs --nj "$nj" --scp-pattern "$raw.JOB.scp" \
  --log-dir "$logdir" "${merge_config_opts[@]}" "$data"

log "succeeded making $feat_desc features for $name"
