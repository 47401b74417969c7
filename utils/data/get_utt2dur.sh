#!/usr/bin/env bash
# Write <data>/utt2dur, `utt seconds` per utterance (Kaldi's utils/data/get_utt2dur.sh): from
# segments, else from the wav.scp audio (WAV headers; `command |` entries are run), else from
# utt2num_frames or feats.scp times the frame shift. A complete utt2dur is kept as it is.
# The logic is `emasr get-utt2dur`.
set -euo pipefail

# Begin configuration section.
cmd=run.pl       # accepted for Kaldi compatibility: one process reads the headers
nj=4             # likewise
frame_shift=     # seconds per frame for durations from feats.scp (default: <data>/frame_shift or 0.01)
read_entire_file=false  # accepted for Kaldi compatibility: a header that does not add up is
                        # always checked against the whole file
# End configuration section.

help_message="Usage: $0 [options] <datadir>
e.g.: $0 data/train
This script works out the durations of utterances in seconds and writes <datadir>/utt2dur.
Options:
  --frame-shift <seconds>   # frame shift for durations from feats.scp (default: <datadir>/frame_shift or 0.01)"

. "$(dirname "$0")/../parse_options.sh"

if [ $# -ne 1 ]; then
  echo "$help_message" >&2; exit 1
fi
data=$1
[ ! -d "$data" ] || lock_dirs "$data"
[ -f "$data/utt2spk" ] || die "expected file $data/utt2spk to exist"
opts=()
[ -n "$frame_shift" ] && opts+=(--frame-shift "$frame_shift")
emasr get-utt2dur ${opts[@]+"${opts[@]}"} "$data"
log "computed $data/utt2dur"
