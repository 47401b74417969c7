#!/usr/bin/env bash
# The yesno grammar (Kaldi's egs/yesno/s5/input/task.arpabo and local/prepare_lm.sh): a unigram
# in which YES and NO are equally likely, as data/lang_test_tg/G.fst.
set -euo pipefail
lm=data/local/lm
mkdir -p "$lm"
# Kaldi's task.arpabo says "ngram 1=3" over four entries; kaldilm wants the true count.
cat > "$lm/task.arpabo" <<'ARPA'

\data\
ngram 1=4

\1-grams:
-1	NO
-1	YES
-99	<s>
-1	</s>

\end\
ARPA
utils/format_lm.sh data/lang "$lm/task.arpabo" data/local/dict/lexicon.txt data/lang_test_tg
