#!/usr/bin/env bash
# The GMM ladder and the networks' own tree on the small profile (docs/gmm.md): in a work dir of
# its own (exp/ladder_work, the default run's exp/ left as it is), the corpus simulated as the
# default run's (same seed), GMMs on Kaldi's 3-state topology, mono -> tri1 (deltas) -> tri2
# (LDA+MLLT) -> tri3 (SAT, with run.sh's default for pseudo-speakers: a diagonal fMLLR transform
# per utterance, from 100 frames), each decoded on dev and test; the networks' tree of 1200
# leaves grown from tri3's alignments at 30 ms; the small profile's DNN (3 x 512, one worker,
# seed 1) trained on those targets. Report: ladder/RESULTS.md.
#
# The baseline (--baseline true, the default): the same DNN on the targets of the skip topology
# (a phone can pass in one frame; mono -> tri1, whose tree and HCLG the network shares), in
# exp/ladder_skip_work, without GMM decoding; report ladder/baseline/RESULTS.md.
# Every piece resumes from run.sh's done markers.
set -euo pipefail

baseline=true
nnet_tree_leaves=1200   # as many as the GMM trees of the small profile
report_note=            # a line for ladder/RESULTS.md's notes (e.g. what shared the cores)

help_message="Usage: $0 [--baseline true|false] [--nnet-tree-leaves N] [--report-note TEXT]
The GMM ladder mono/tri1/tri2/tri3 on the 3-state topology and a DNN on a network tree of its
tri3 alignments (exp/ladder_work), against the same DNN on the skip topology's targets
(exp/ladder_skip_work); reports ladder/RESULTS.md and ladder/baseline/RESULTS.md."
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 0 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
cd "$(dirname "$0")/.."
network=(--archs dnn --strategies single --seeds 1)

. ladder/workdir.sh   # workdir DIR

if [ "$baseline" = true ]; then
  workdir exp/ladder_skip_work
  mkdir -p ladder/baseline
  ./run.sh --workdir exp/ladder_skip_work --gmm-systems "mono tri1" --gmm-topology skip \
    --gmm-decode-sets "" "${network[@]}" --results ladder/baseline/RESULTS.md \
    --title "Results: the small profile's DNN on the skip topology's targets (tri1 tree)"
fi

workdir exp/ladder_work
mkdir -p ladder
./run.sh --workdir exp/ladder_work --gmm-systems "mono tri1 tri2 tri3" --gmm-topology kaldi \
  --nnet-tree-leaves "$nnet_tree_leaves" "${network[@]}" --results ladder/RESULTS.md \
  ${report_note:+--report-note "$report_note"} \
  --title "Results: the GMM ladder (3-state topology) and a DNN on the networks' own tree"
