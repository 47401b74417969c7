#!/usr/bin/env bash
# The GMM ladder and the networks' own tree on the small profile (docs/gmm.md): in a work dir of
# its own (exp/ladder_work: its lang has another topology than the default run's, whose exp/ is
# left as it is), the corpus simulated as the default run's (same seed), GMMs on Kaldi's 3-state
# topology, mono -> tri1 (deltas) -> tri2 (LDA+MLLT) -> tri3 (SAT), each decoded on dev and test;
# the networks' tree of 1200 leaves grown from tri3's alignments at 30 ms; the small profile's DNN
# (3 x 512, one worker, seed 1) trained on those targets. Report: ladder/RESULTS.md.
#
# The baseline (--baseline true, the default): the same DNN on the default run's targets (skip
# topology, tri1's alignments and tree), trained in the default run's exp/ (stages 0-7 are run
# there first if they are not done, without GMM decoding), report ladder/baseline/RESULTS.md.
# Every piece resumes from run.sh's done markers.
set -euo pipefail

baseline=true
nnet_tree_leaves=1200   # as many as the GMM trees of the small profile

help_message="Usage: $0 [--baseline true|false] [--nnet-tree-leaves N]
The GMM ladder mono/tri1/tri2/tri3 on the 3-state topology and a DNN on a network tree of its
tri3 alignments (exp/ladder_work), against the same DNN on the default run's targets;
reports ladder/RESULTS.md and ladder/baseline/RESULTS.md."
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 0 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
cd "$(dirname "$0")/.."
network=(--archs dnn --strategies single --seeds 1)

if [ "$baseline" = true ]; then
  [ -f exp/done/stage7 ] || ./run.sh --stage 0 --stop-stage 7 --gmm-decode-sets ""
  mkdir -p ladder/baseline
  ./run.sh --stage 8 "${network[@]}" --nnet-dir exp/nnet_ladder_baseline \
    --results ladder/baseline/RESULTS.md \
    --title "Results: the small profile's DNN on the default targets (skip topology, tri1 tree)"
fi

work=exp/ladder_work
mkdir -p "$work"
for f in conf steps utils local cmd.sh; do
  [ -e "$work/$f" ] || ln -s "$PWD/$f" "$work/$f"
done
# the recipe's path.sh finds the repository from its own location: here, name it
echo ". \"$(cd ../.. && pwd)/path.sh\"" > "$work/path.sh"
mkdir -p ladder
./run.sh --workdir "$work" --gmm-systems "mono tri1 tri2 tri3" --gmm-topology kaldi \
  --nnet-tree-leaves "$nnet_tree_leaves" "${network[@]}" --results ladder/RESULTS.md \
  --title "Results: the GMM ladder (3-state topology) and a DNN on the networks' own tree"
