#!/usr/bin/env bash
# Turn an alignment dir (Kaldi's or this toolkit's: ali.JOB.gz + final.mdl) into frame-level pdf
# targets at the network's frame rate, with pdf counts and log priors. The logic is
# `emasr make-targets`; this script checks its inputs and wires the options.
set -euo pipefail

# Begin configuration section.
frame_subsampling_factor=   # k: the network reads 1 frame in k (the feature pipeline's stacking);
                            # default: <ali-dir>/frame_subsampling_factor when it has one (an
                            # alignment dir at the network's rate), else 3
ali_type=transition         # transition | pdf: what the alignments hold
num_pdfs=                   # for --ali-type pdf without final.mdl or num_pdfs in the ali dir
prior_floor=5e-6            # floor on the priors before the log
max_lost=0.02               # fail when more than this fraction of utterances get no targets
max_unseen_pdfs=0.5         # fail when more than this fraction of the pdfs get no frame (the
                            # alignments then come from another model)
priors_from=                # count the priors over this data dir's utterances only (the
                            # training set when <feat-data-dir> also holds the dev set)
cmd=run.pl                  # job launcher (one job), e.g. "$train_cmd" from cmd.sh
# End configuration section.

help_message="Usage: $0 [options] <ali-dir> <feat-data-dir> <targets-dir>
e.g.: $0 --frame-subsampling-factor 3 exp/tri3_ali data/train_fbank exp/dnn/targets
Writes <targets-dir>/pdf.scp (+ pdf.JOB.ark), num_pdfs, pdf_counts, prior.vec,
frame_subsampling_factor, tree.sha256 (when <ali-dir> has a tree), skipped, summary; log in <targets-dir>/log/make_targets.log.
Options:
  --frame-subsampling-factor K   network frame rate is 1/K of the 10 ms features (default: the
                                 ali dir's frame_subsampling_factor, else 3)
  --ali-type transition|pdf      alignments of transition ids (need final.mdl) or pdf ids
  --num-pdfs N                   number of pdfs for --ali-type pdf
  --prior-floor F                floor on the priors (default 5e-6)
  --max-lost FRACTION            allowed fraction of utterances without targets (default 0.02)
  --max-unseen-pdfs FRACTION     allowed fraction of pdfs without a target frame (default 0.5)
  --priors-from DATA-DIR         priors over this data dir's utterances (default: all targets)
  --cmd CMD                      job launcher (default run.pl)"

. "$(dirname "$0")/../../utils/parse_options.sh"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2
  exit 1
fi
ali_dir=$1; data=$2; dir=$3
lock_dirs "$dir"

if [ "$ali_type" = transition ]; then
  if [ ! -f "$ali_dir/final.mdl" ]; then
    die "expected file $ali_dir/final.mdl to exist"
  fi
fi
if ! ls "$ali_dir"/ali.*.gz "$ali_dir"/ali.[0-9]* >/dev/null 2>&1; then
  die "expected files $ali_dir/ali.JOB.gz to exist"
fi
if [ ! -f "$data/utt2num_frames" ] && [ ! -f "$data/feats.scp" ]; then
  die "expected file $data/utt2num_frames or $data/feats.scp to exist"
fi
if [ -z "$frame_subsampling_factor" ]; then
  frame_subsampling_factor=$(cat "$ali_dir/frame_subsampling_factor" 2>/dev/null || echo 3)
fi
if [ "$ali_type" = transition ] && [ -f "$ali_dir/tree" ]; then
  # The alignments are read through final.mdl: it must be the model of the dir's tree.
  emasr check-compatible --model "$ali_dir/final.mdl" --tree "$ali_dir/tree" || exit 1
fi
mkdir -p "$dir/log"

args=(--frame-subsampling-factor "$frame_subsampling_factor" --ali-type "$ali_type"
      --prior-floor "$prior_floor" --max-lost "$max_lost" --max-unseen-pdfs "$max_unseen_pdfs")
[ -n "$num_pdfs" ] && args+=(--num-pdfs "$num_pdfs")
[ -n "$priors_from" ] && args+=(--priors-from "$priors_from")

$cmd "$dir/log/make_targets.log" emasr make-targets "${args[@]}" "$ali_dir" "$data" "$dir"
written=$(grep -h '^utterances_written' "$dir/summary" | cut -d' ' -f2)
log "wrote targets to $dir ($written utterances)"
