#!/usr/bin/env bash
# utt2spk_to_spk2utt.pl [utt2spk] > spk2utt
# Reads "utt spk" lines (file or stdin) and prints "spk utt1 utt2 ..." per speaker, speakers in
# order of first appearance, as Kaldi's utils/utt2spk_to_spk2utt.pl. The logic is
# `emasr utt2spk-to-spk2utt`.
set -euo pipefail
if [ $# -gt 1 ] || [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  echo "Usage: $0 [utt2spk] > spk2utt" >&2; exit 1
fi
exec emasr utt2spk-to-spk2utt "$@"
