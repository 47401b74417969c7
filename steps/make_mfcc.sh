#!/usr/bin/env bash
# Compute plain MFCC features for a data dir (Kaldi's steps/make_mfcc.sh interface), the first
# step of most Kaldi recipes (yesno, WSJ); options come from a Kaldi-syntax conf/mfcc.conf.
# The work is `emasr compute-mfcc-feats` (one job per split) and `emasr merge-feats-jobs`;
# steps/lib/make_feats.sh runs them, with all that the four make_*.sh share.
set -euo pipefail

# Begin configuration section (--nj, --cmd, --compress and the rest: steps/lib/make_feats.sh).
mfcc_config=conf/mfcc.conf
# End configuration section.

# The kind: its name in file names and in messages, then the emasr subcommand and the option
# it takes each config file by (steps/lib/make_feats.sh says more).
feat_kind=mfcc feat_desc=MFCC
feat_compute=(compute-mfcc-feats --config mfcc_config)
. "$(dirname "$0")/lib/make_feats.sh"
