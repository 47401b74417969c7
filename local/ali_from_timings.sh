#!/usr/bin/env bash
# The oracle alignment dir of the simulated corpus: for every utterance of a data dir, the
# alignment of a model and tree that follows the synthesizer's phone timings
# (corpus/timings/<set>.jsonl), silence in the frames no phone covers (`emasr ali-from-timings`).
# Writes ali.JOB.gz (one job per split of the data dir), and copies final.mdl, tree, phones.txt,
# cmvn_opts and delta_order from <model-dir>, so that steps/train_deltas.sh --realign-iters ""
# trains a GMM on the synthesizer's labels and steps/nnet/convert_ali.sh takes them to a network
# tree. Logs in <dir>/log/ali_from_timings.JOB.log.
set -euo pipefail

# Begin configuration section.
cmd=run.pl      # job launcher, e.g. "$train_cmd" from cmd.sh
nj=2            # jobs: the data dir's split
silence=sil     # the phone of the frames between, before and after the timed phones
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <model-dir> <dir> <timings.jsonl>...
e.g.: $0 data/train exp/tri1_ali exp/oracle_ali corpus/timings/train.jsonl
<model-dir> has final.mdl and tree; the data dir needs utt2num_frames (make_fbank.sh/make_mfcc.sh
write it), every utterance of it a line in the timings.
Options:
  --cmd CMD           job launcher (default $cmd)
  --nj N              jobs (default $nj)
  --silence PHONE     the silence phone (default $silence)"

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"
if [ $# -lt 4 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
data=$1; srcdir=$2; dir=$3; shift 3
lock_dirs "$dir"
timings=("$@")

for f in "$data/utt2num_frames" "$srcdir/final.mdl" "$srcdir/tree" "$srcdir/phones.txt" \
         "${timings[@]}"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
mkdir -p "$dir/log"
split_data.sh "$data" "$nj"
sdata=$data/split$nj
for f in final.mdl tree phones.txt cmvn_opts delta_order; do
  [ -f "$srcdir/$f" ] && cp "$srcdir/$f" "$dir/$f"
done
$cmd JOB=1:"$nj" "$dir/log/ali_from_timings.JOB.log" \
  emasr ali-from-timings --silence-phone "$silence" "$dir/final.mdl" "$dir/tree" \
    "$dir/phones.txt" "$sdata/JOB/utt2num_frames" "$dir/ali.JOB.gz" "${timings[@]}"
echo "$nj" > "$dir/num_jobs"
log "wrote the oracle alignments of $(wc -l < "$data/utt2num_frames") utterances of $data to $dir"
