#!/usr/bin/env bash
# Kaldi's utils/lang/check_phones_compatible.sh: two phone symbol tables (phones.txt) must be the
# same phone set with the same integer ids, disambiguation symbols (#0, #1, ...) aside. A model
# used with a lang dir from another dict would otherwise read its phone ids as other phones.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "Usage: $0 <phones-symbol-table1> <phones-symbol-table2>" >&2
  echo "e.g.: $0 data/lang/phones.txt exp/tri1/phones.txt" >&2
  exit 1
fi
table1=$1; table2=$2

# a model dir without phones.txt (e.g. from an older Kaldi) cannot be checked: as Kaldi, allow it
[ -f "$table1" ] || exit 0
[ -f "$table2" ] || exit 0

if ! cmp -s <(grep -v '^#' "$table1") <(grep -v '^#' "$table2"); then
  echo "Error: $0: phone symbol tables $table1 and $table2 are not compatible: the model was" \
       "trained with a lang dir from another dict (first difference: $(diff \
       <(grep -v '^#' "$table1") <(grep -v '^#' "$table2") | grep -m1 '^[<>]'))" >&2
  exit 1
fi
