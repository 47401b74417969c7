#!/usr/bin/env bash
# Convert an alignment dir (Kaldi's or this toolkit's: ali.JOB.gz + final.mdl) to another model
# and tree, e.g. a GMM's 3-state alignments at 10 ms to a network tree with the one-frame topology
# at 30 ms, as Kaldi's chain recipes do with convert-ali --frame-subsampling-factor. Writes an
# alignment dir: ali.JOB.gz (one job per job of the source dir), final.mdl and tree (copies of the
# new model's), num_jobs, frame_subsampling_factor, phones.txt; logs in <dir>/log/convert.JOB.log.
# The logic is `emasr convert-ali`.
set -euo pipefail

# Begin configuration section.
cmd=run.pl                  # job launcher, e.g. "$train_cmd" from cmd.sh
frame_subsampling_factor=1  # F: write the alignments at 1/F of the source dir's frame rate
subsample_at=centre         # centre | start: the 10 ms frame that stands for each window of F
                            # (centre: this toolkit's frame stacking; start: Kaldi's)
reorder=true                # self-loops after their state's forward transition, as Kaldi's
max_failed=0.1              # a job fails when more than this fraction of its utterances
                            # cannot be converted (too few frames for their phones)
# End configuration section.

help_message="Usage: $0 [options] <src-ali-dir> <model-dir> <dir>
e.g.: $0 --frame-subsampling-factor 3 exp/tri1_ali exp/nnet_tree exp/nnet_tree_ali
<src-ali-dir> has ali.JOB.gz, final.mdl (the model that wrote them) and num_jobs;
<model-dir> has the new final.mdl and tree.
Options:
  --cmd CMD                       job launcher (default $cmd)
  --frame-subsampling-factor F    rate 1/F of the source's (default $frame_subsampling_factor)
  --subsample-at centre|start     frame standing for a window of F (default $subsample_at)
  --reorder true|false            reordered output, as Kaldi's (default $reorder)
  --max-failed FRACTION           unconvertible utterances allowed (default $max_failed)"

utils_dir="$(cd "$(dirname "$0")/../../utils" && pwd)"
. "$utils_dir/parse_options.sh"
export PATH="$utils_dir:$PATH"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
srcdir=$1; modeldir=$2; dir=$3
lock_dirs "$dir"

for f in "$srcdir/final.mdl" "$modeldir/final.mdl" "$modeldir/tree"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
if [ -f "$srcdir/num_jobs" ]; then
  nj=$(cat "$srcdir/num_jobs")
else
  nj=$(find "$srcdir" -maxdepth 1 -name 'ali.*.gz' | wc -l)
fi
[ "$nj" -ge 1 ] || die "expected files $srcdir/ali.JOB.gz to exist"
for n in $(seq "$nj"); do
  [ -f "$srcdir/ali.$n.gz" ] || die "expected file $srcdir/ali.$n.gz to exist"
done
src_factor=$(cat "$srcdir/frame_subsampling_factor" 2>/dev/null || echo 1)
check_phones_compatible.sh "$srcdir/phones.txt" "$modeldir/phones.txt"
emasr check-compatible --model "$modeldir/final.mdl" --tree "$modeldir/tree"
[ "$(cd "$srcdir" && pwd -P)" != "$(mkdir -p "$dir" && cd "$dir" && pwd -P)" ] || die "<src-ali-dir> and <dir> must differ"

mkdir -p "$dir/log"
rm -f "$dir/num_jobs"  # written last: a dir without it is incomplete
cp -L "$modeldir/final.mdl" "$dir/final.mdl"
cp -L "$modeldir/tree" "$dir/tree"
for f in phones.txt; do
  if [ -f "$modeldir/$f" ]; then cp "$modeldir/$f" "$dir/$f"
  elif [ -f "$srcdir/$f" ]; then cp "$srcdir/$f" "$dir/$f"; fi
done

log "converting alignments from $srcdir to the model and tree of $modeldir" \
     "(frame subsampling factor $frame_subsampling_factor), putting them in $dir"
$cmd JOB=1:"$nj" "$dir/log/convert.JOB.log" \
  emasr convert-ali --frame-subsampling-factor "$frame_subsampling_factor" \
    --subsample-at "$subsample_at" --reorder "$reorder" --max-failed "$max_failed" \
    "$srcdir/final.mdl" "$dir/final.mdl" "$dir/tree" "$srcdir/ali.JOB.gz" "$dir/ali.JOB.gz" \
  || die "conversion failed; see $dir/log/convert.*.log"

factor=$((src_factor * frame_subsampling_factor))
if [ "$factor" -gt 1 ]; then
  echo "$factor" > "$dir/frame_subsampling_factor"
else
  rm -f "$dir/frame_subsampling_factor"
fi
echo "$nj" > "$dir/num_jobs"
skipped=$({ grep -h "not converted" "$dir"/log/convert.*.log || true; } | wc -l)
log "done converting alignments ($skipped utterance(s) could not be converted)"
