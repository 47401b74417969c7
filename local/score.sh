#!/usr/bin/env bash
# The recipe's scoring (Kaldi aishell's local/score.sh): WER and CER over LM weights and word
# insertion penalties, through steps/score_kaldi.sh --cer true. Options are passed on.
set -euo pipefail
exec "$(dirname "$0")/../steps/score_kaldi.sh" --cer true "$@"
