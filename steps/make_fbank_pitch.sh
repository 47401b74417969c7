#!/usr/bin/env bash
# Compute fbank + Kaldi pitch features (Kaldi's steps/make_fbank_pitch.sh interface), e.g. for
# networks on tonal languages.
# The work is `emasr compute-fbank-pitch-feats` (one job per split) and `emasr merge-feats-jobs`;
# steps/lib/make_feats.sh runs them, with all that the four make_*.sh share.
set -euo pipefail

# Begin configuration section (--nj, --cmd, --compress and the rest: steps/lib/make_feats.sh).
fbank_config=conf/fbank.conf
pitch_config=conf/pitch.conf
# End configuration section.

# The kind: its name in file names and in messages, then the emasr subcommand and the option
# it takes each config file by (steps/lib/make_feats.sh says more).
feat_kind=fbank_pitch feat_desc="fbank + pitch"
feat_compute=(compute-fbank-pitch-feats --fbank-config fbank_config --pitch-config pitch_config)
. "$(dirname "$0")/lib/make_feats.sh"
