#!/usr/bin/env bash
# The yesno dictionary (Kaldi's egs/yesno/s5/local/prepare_dict.sh): one phone per word, Y and N,
# and SIL for silence, which is also the lexicon entry of the OOV word <SIL>.
set -euo pipefail
. utils/lib/log.sh   # log, die: the console format
dict=data/local/dict
mkdir -p "$dict"
printf '%s\n' '<SIL> SIL' 'NO N' 'YES Y' > "$dict/lexicon.txt"
printf '%s\n' N Y > "$dict/nonsilence_phones.txt"
echo SIL > "$dict/silence_phones.txt"
echo SIL > "$dict/optional_silence.txt"
log "wrote $dict"
