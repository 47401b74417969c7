#!/usr/bin/env bash
# Data dirs of the yesno corpus (Kaldi's egs/yesno/s5/local/prepare_data.sh): one utterance per
# recording, named by its file (0_1_1_0_... : NO YES YES NO ...), one speaker "global", wav.scp
# with absolute paths (the corpus is read in place). Train: the 31 recordings whose first word is
# NO (0_*); test: the 29 starting with YES (1_*). That is the split Kaldi's tutorial made (the
# first half of the directory listing), without the README files it also listed as test
# utterances.
set -euo pipefail
. utils/lib/log.sh   # log, die: the console format

if [ $# -ne 1 ]; then
  echo "Usage: $0 <waves_yesno-dir>" >&2
  echo "e.g.: $0 /data/waves_yesno" >&2
  exit 1
fi
waves=$(cd "$1" && pwd -P)

# words of an utterance id: 0_1_1 -> NO YES YES
words() { echo "$1" | tr '_' '\n' | awk '{printf "%s%s", (NR > 1 ? " " : ""), ($1 == 1 ? "YES" : "NO")} END {print ""}'; }

prepare() {  # prepare <set> <first word 0|1>
  local dir=data/$1 utt n=0
  rm -rf "$dir" && mkdir -p "$dir"
  for wav in "$waves"/"$2"_*.wav; do
    [ -f "$wav" ] || continue
    utt=$(basename "$wav" .wav)
    case "$utt" in *[!01_]*) die "$wav: expected a name of 0s and 1s joined by _" ;; esac
    echo "$utt $wav" >> "$dir/wav.scp"
    echo "$utt $(words "$utt")" >> "$dir/text"
    echo "$utt global" >> "$dir/utt2spk"
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || die "no recordings $waves/$2_*.wav (expected Kaldi's waves_yesno)"
  for f in wav.scp text utt2spk; do sort "$dir/$f" -o "$dir/$f"; done
  utils/utt2spk_to_spk2utt.pl "$dir/utt2spk" > "$dir/spk2utt"
  utils/validate_data_dir.sh --no-feats "$dir"
  log "$dir: $n utterances"
}
prepare train_yesno 0
prepare test_yesno 1
