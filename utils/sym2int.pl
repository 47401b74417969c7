#!/usr/bin/env bash
# sym2int.pl [--map-oov <oov-symbol>] [-f <field-range>] <symtab> [<input>...] > output
# Kaldi's utils/sym2int.pl (same options and output): maps the symbols of the selected fields to
# their integers, e.g. sym2int.pl --map-oov '<UNK>' -f 2- data/lang/words.txt data/train/text.
# An unknown symbol without --map-oov is an error naming it. The logic is `emasr sym2int`.
set -euo pipefail
case "${1:-}" in
  ''|--help|-h)
    echo "Usage: sym2int.pl [options] symtab [input transcriptions] > output transcriptions
options: [--map-oov <oov-symbol> ]  [-f <field-range> ]
note: <field-range> can look like 4-5, or 4-, or 5-, or 1, it means the field
range in the input to apply the map to.
e.g.: echo <word> | sym2int.pl -f 1 words.txt" >&2
    [ -n "${1:-}" ] && exit 0; exit 1 ;;
esac
exec emasr sym2int "$@"
