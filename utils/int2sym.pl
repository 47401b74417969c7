#!/usr/bin/env bash
# int2sym.pl [-f <field-range>] <symtab> [<input>...] > output
# Kaldi's utils/int2sym.pl (same options; no trailing space on the lines): maps the integers of
# the selected fields to their symbols, e.g. int2sym.pl -f 2- data/lang/words.txt hyp.int.
# A non-integer token or an integer not in the table is an error. The logic is `emasr int2sym`.
set -euo pipefail
case "${1:-}" in
  ''|--help|-h)
    echo "Usage: int2sym.pl [options] symtab [input] > output
options: [-f (<field>|<field_start>-<field-end>)]
e.g.: -f 2, or -f 3-4" >&2
    [ -n "${1:-}" ] && exit 0; exit 1 ;;
esac
exec emasr int2sym "$@"
