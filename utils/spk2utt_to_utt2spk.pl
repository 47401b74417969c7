#!/usr/bin/env bash
# spk2utt_to_utt2spk.pl [spk2utt] > utt2spk
# Reads "spk utt1 utt2 ..." lines (file or stdin) and prints "utt spk" for each utterance, in
# input order, as Kaldi's utils/spk2utt_to_utt2spk.pl. The logic is `emasr spk2utt-to-utt2spk`.
set -euo pipefail
if [ $# -gt 1 ] || [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "Usage: $0 [spk2utt] > utt2spk" >&2; exit 1
fi
exec emasr spk2utt-to-utt2spk "$@"
