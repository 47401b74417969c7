#!/usr/bin/env bash
# Compute MFCC + Kaldi pitch features, the GMMs' input (Kaldi's steps/make_mfcc_pitch.sh interface).
# The work is `emasr compute-mfcc-pitch-feats` (one job per split) and `emasr merge-feats-jobs`;
# steps/lib/make_feats.sh runs them, with all that the four make_*.sh share.
set -euo pipefail

# Begin configuration section (--nj, --cmd, --compress and the rest: steps/lib/make_feats.sh).
mfcc_config=conf/mfcc.conf
pitch_config=conf/pitch.conf
# End configuration section.

# The kind: its name in file names and in messages, then the emasr subcommand and the option
# it takes each config file by (steps/lib/make_feats.sh says more).
feat_kind=mfcc_pitch feat_desc="MFCC + pitch"
feat_compute=(compute-mfcc-pitch-feats --mfcc-config mfcc_config --pitch-config pitch_config)
usage_example="exp/make_mfcc/train mfcc"  # as Kaldi's aishell recipe names them
. "$(dirname "$0")/lib/make_feats.sh"
