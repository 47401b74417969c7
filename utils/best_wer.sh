#!/usr/bin/env bash
# Print the lowest %WER line read on stdin, followed by the file it came from (Kaldi's
# utils/best_wer.sh), e.g.:  grep WER exp/mono/decode_test/wer_* | utils/best_wer.sh
set -euo pipefail
if [ $# -ne 0 ]; then
  echo "Usage: grep WER <decode-dir>/wer_* | $0" >&2; exit 1
fi
exec emasr best-wer
