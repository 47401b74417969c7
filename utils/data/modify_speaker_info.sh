#!/usr/bin/env bash
# Copy a data directory with pseudo-speakers of at most --utts-per-spk-max utterances each (each
# speaker's utterances split in order; pseudo-speaker ids <speaker>-00001, ...). Kaldi's
# utils/data/modify_speaker_info.sh. With 1, everything keyed by speaker becomes per utterance:
# CMVN stats above all, for data whose channel changes with every utterance (voice search, and
# the simulated corpus, which draws noise, band limit, colouring and level per utterance).
set -euo pipefail

# Begin configuration section.
utts_per_spk_max=1
# End configuration section.

help_message="Usage: $0 [options] <srcdir> <destdir>
e.g.: $0 --utts-per-spk-max 1 data/train data/train_uttspk
Options:
  --utts-per-spk-max <n>    # most utterances per pseudo-speaker (default $utts_per_spk_max)
Copies wav.scp, text, segments, feats.scp and the other per-utterance files; writes utt2spk,
spk2utt and spk2gender (a pseudo-speaker has its speaker's gender). cmvn.scp is not copied: it is
per speaker; run steps/compute_cmvn_stats.sh on <destdir>."

. "$(dirname "$0")/../parse_options.sh"

if [ $# -ne 2 ]; then
  echo "$help_message" >&2; exit 1
fi
srcdir=$1
destdir=$2
lock_dirs "$destdir"
[ -f "$srcdir/utt2spk" ] || die "expected file $srcdir/utt2spk to exist"
case "$utts_per_spk_max" in
  ''|*[!0-9]*|0) echo "Error: $0: --utts-per-spk-max must be a positive integer, not '$utts_per_spk_max'" >&2
                 exit 1 ;;
esac
[ "$(cd "$srcdir" && pwd)" != "$(mkdir -p "$destdir" && cd "$destdir" && pwd)" ] || \
  die "<srcdir> and <destdir> must differ"

for f in wav.scp text segments feats.scp utt2dur utt2num_frames utt2uniq reco2file_and_channel \
         frame_shift; do
  [ -f "$srcdir/$f" ] && cp "$srcdir/$f" "$destdir/$f"
done
rm -f "$destdir/cmvn.scp"
# utt2spk is sorted by utterance and each speaker's utterances are in that order, so numbering
# them in order keeps the pseudo-speakers sorted the way utt2spk is (validate_data_dir checks it)
awk -v max="$utts_per_spk_max" \
  '{ n[$2]++; printf "%s %s-%05d\n", $1, $2, int((n[$2] - 1) / max) + 1 }' \
  "$srcdir/utt2spk" > "$destdir/utt2spk"
"$(dirname "$0")/../utt2spk_to_spk2utt.pl" < "$destdir/utt2spk" > "$destdir/spk2utt"
if [ -f "$srcdir/spk2gender" ]; then
  awk 'NR == FNR { gender[$1] = $2; next }
       { spk = $1; sub(/-[0-9]+$/, "", spk); print $1, gender[spk] }' \
    "$srcdir/spk2gender" "$destdir/spk2utt" > "$destdir/spk2gender"
fi

validate_opts=
[ -f "$destdir/feats.scp" ] || validate_opts="$validate_opts --no-feats"
[ -f "$destdir/text" ] || validate_opts="$validate_opts --no-text"
[ -f "$destdir/wav.scp" ] || validate_opts="$validate_opts --no-wav"
# shellcheck disable=SC2086  # validate_opts is a list of options
"$(dirname "$0")/../validate_data_dir.sh" $validate_opts "$destdir"
log "$(wc -l < "$srcdir/spk2utt" 2>/dev/null || echo '?') speakers -> $(wc -l < "$destdir/spk2utt") pseudo-speakers in $destdir"
