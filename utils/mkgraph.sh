#!/usr/bin/env bash
# Build the decoding graph HCLG.fst (Kaldi's utils/mkgraph.sh): L_disambig o G determinized and
# minimized, the tree's phonetic context composed in, H from the tree and transition model,
# determinized, disambiguation symbols and epsilons removed, minimized, self-loops added.
# LG/CLG are cached in <lang>/tmp (or <graph-dir>/tmp for a read-only lang dir) and reused while
# L_disambig.fst, G.fst and phones/disambig.int are unchanged. The logic is `emasr mkgraph`.
set -euo pipefail

# Begin configuration section.
self_loop_scale=0.1   # Kaldi's default; 1.0 for chain models
transition_scale=1.0
# End configuration section.

help_message="Usage: $0 [options] <lang-dir> <model-dir> <graph-dir>
e.g.: $0 data/lang_test exp/tri1 exp/tri1/graph
<model-dir> holds final.mdl and tree (Kaldi's files or ours).
Options:
  --self-loop-scale <s>    # scale on self-loop probabilities (default $self_loop_scale)
  --transition-scale <t>   # scale on the other transition probabilities (default $transition_scale)
Writes <graph-dir>/{HCLG.fst,words.txt,phones.txt,phones/,num_pdfs,disambig_tid.int,ilabels}."

. "$(dirname "$0")/parse_options.sh"

if [ $# -ne 3 ]; then
  printf '%s\n' "$help_message" >&2; exit 1
fi
lang=$1; model_dir=$2; dir=$3
lock_dirs "$dir"

for f in "$lang/L_disambig.fst" "$lang/G.fst" "$lang/words.txt" "$lang/phones.txt" \
         "$lang/phones/disambig.int" "$model_dir/final.mdl" "$model_dir/tree"; do
  [ -f "$f" ] || die "expected file $f to exist"
done
mkdir -p "$dir/log"
emasr --log-file "$dir/log/mkgraph.log" mkgraph --self-loop-scale "$self_loop_scale" \
  --transition-scale "$transition_scale" "$lang" "$model_dir" "$dir"
