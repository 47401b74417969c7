#!/usr/bin/env bash
# Kaldi's name for utils/validate_lang.sh (same options and checks), so that recipes written for
# Kaldi (`utils/validate_lang.pl data/lang`) run unchanged.
exec "$(dirname "$0")/validate_lang.sh" "$@"
