#!/usr/bin/env bash
# Train the word n-gram LM from unsegmented text (like a query log). The logic is `emasr train-lm`:
# sentencepiece (unigram) word units, pypinyin pronunciations for new words (added to the dict's
# lexicon.txt, so run utils/prepare_lang.sh after this), modified Kneser-Ney, dev perplexity.
set -euo pipefail

# Begin configuration section.
order=3
vocab_size=8000     # sentencepiece vocabulary size (soft limit)
max_word_length=4   # longest word unit, in characters
oov_word="<UNK>"
# End configuration section.

help_message="Usage: $0 [options] <lm-text> <dict-dir> <dev-text> <lm-dir>
e.g.: $0 corpus/lm_text data/local/dict data/dev/text data/local/lm
<lm-text> is a file or a directory of *.txt files, one unsegmented sentence per line.
Options:
  --order <n>          # n-gram order (default $order)
  --vocab-size <n>     # sentencepiece vocabulary size (default $vocab_size)
  --max-word-length <n> # longest word unit in characters (default $max_word_length)
  --oov-word <word>    # word for tokens without a pronunciation (default $oov_word)
Writes <lm-dir>/\${order}gram.arpa.gz, <lm-dir>/dev_perplexity and <lm-dir>/log/train_lm.log."

utils_dir="$(cd "$(dirname "$0")/../utils" && pwd)"
. "$utils_dir/parse_options.sh"

if [ $# -ne 4 ]; then
  printf '%b\n' "$help_message" >&2; exit 1
fi
text=$1
dict=$2
dev_text=$3
dir=$4
lock_dirs "$dir"
[ -e "$text" ] || die "expected $text to exist"
for f in "$dict/lexicon.txt" "$dev_text"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
mkdir -p "$dir/log"

emasr --log-file "$dir/log/train_lm.log" train-lm --order "$order" --vocab-size "$vocab_size" \
  --max-word-length "$max_word_length" --oov-word "$oov_word" "$text" "$dict" "$dev_text" "$dir"
cat "$dir/dev_perplexity"
