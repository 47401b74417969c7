#!/usr/bin/env bash
# Compute log-mel filterbank features for a data dir (Kaldi's steps/make_fbank.sh interface).
# The work is `emasr compute-fbank-feats` (one job per split) and `emasr merge-feats-jobs`;
# steps/lib/make_feats.sh runs them, with all that the four make_*.sh share.
set -euo pipefail

# Begin configuration section (--nj, --cmd, --compress and the rest: steps/lib/make_feats.sh).
fbank_config=conf/fbank.conf
# End configuration section.

# The kind: its name in file names and in messages, then the emasr subcommand and the option
# it takes each config file by (steps/lib/make_feats.sh says more).
feat_kind=fbank feat_desc=fbank
feat_compute=(compute-fbank-feats --config fbank_config)
. "$(dirname "$0")/lib/make_feats.sh"
