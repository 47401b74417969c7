#!/usr/bin/env bash
# Check a lang dir (Kaldi's utils/validate_lang.pl): symbol tables, phone lists and their .int/.csl
# forms, topo, L.fst, L_disambig.fst and G.fst if present. The logic is `emasr validate-lang`.
set -euo pipefail
. "$(dirname "$0")/lib/log.sh"   # log, die: the console format

usage="Usage: $0 [--skip-determinization-check] <lang-dir>
e.g.: $0 data/lang
Every problem found is listed; the exit status is 1 if there is any."

while [ $# -gt 0 ]; do
  case "$1" in
    --skip-determinization-check|--skip-disambig-check) shift ;;  # accepted for Kaldi compatibility
    --help|-h) echo "$usage"; exit 0 ;;
    -*) echo "Error: $0: invalid option $1" >&2; echo "$usage" >&2; exit 1 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ]; then
  echo "$usage" >&2; exit 1
fi
[ -d "$1" ] || die "no such directory $1"
exec emasr validate-lang "$1"
