#!/usr/bin/env bash
# filter_scp.pl [--exclude] [-f <field>] <id-list> [<in.scp>] > out.scp
# Prints the lines of in.scp (default: stdin) whose <field>-th field (default 1) is the first field
# of some line of <id-list>; with --exclude, the other lines. Kaldi's utils/filter_scp.pl (same
# name, options and output); the logic is `emasr filter-scp`.
set -euo pipefail

usage="Usage: filter_scp.pl [--exclude] [-f <field-to-filter-on>] id_list [in.scp] > out.scp
Prints only the input lines whose f'th field (default: first) is in 'id_list'.
Note: only the first field of each line in id_list matters. With --exclude, prints
only the lines that were *not* in id_list."

opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --exclude) opts+=(--exclude); shift ;;
    -f)
      if [ $# -lt 2 ]; then echo "$0: option -f needs a field number" >&2; exit 1; fi
      opts+=(-f "$2"); shift 2 ;;
    --help|-h) echo "$usage"; exit 0 ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "$usage" >&2; exit 1
fi
exec emasr filter-scp ${opts[@]+"${opts[@]}"} "$@"
