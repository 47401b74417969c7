#!/usr/bin/env bash
# The flat start (docs/gmm.md): the ladder's alignments keep the phone-boundary conventions its
# monophones settle on from a flat start (the oracle shows a GMM can place 95% of the boundaries
# within 20 ms when its labels start right). Does one of Kaldi's usual monophone settings start
# EM closer to the synthesizer's boundaries? In the ladder's work dir (exp/ladder_work; its
# stages 0-4, run here when missing, are those of ladder/run.sh), each variant differs from the
# ladder's monophones (the 2000 shortest utterances, 1000 Gaussians, no silence boost, Kaldi's
# alignment scales) in one thing:
#   mono2k          the ladder's exp/mono itself, aligning train (as exp/mono_ali)
#   mono2k_loop1    the same model aligning with --self-loop-scale 1.0 (durations at full weight)
#   mono2k_loop1w   the same with --retry-beam 200, which aligns the utterances 40 leaves out
#   mono2k_boost    trained and aligning with --boost-silence 1.25 (Kaldi's wsj and librispeech)
#   monoall         trained on all training utterances (Kaldi's aishell s5)
#   monoall_boost   both
# Writes ladder/flat_start/RESULTS.md; every piece resumes (exp/flat/*.done).
set -euo pipefail

help_message="Usage: $0
Monophone flat-start variants in exp/ladder_work (the ladder's stages 0-4 first, when missing) and
the boundary error of their training alignments; report ladder/flat_start/RESULTS.md."
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 0 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
cd "$(dirname "$0")/.."
results=$PWD/ladder/flat_start/RESULTS.md
w=exp/ladder_work
mkdir -p ladder/flat_start
start=$(date +%s)
. ladder/workdir.sh   # workdir DIR, piece NAME COMMAND...
workdir "$w"
# the ladder's corpus, lang, features and monophones (ladder/run.sh's settings for stages 0-4)
./run.sh --workdir "$w" --gmm-topology kaldi --stop-stage 4

cd "$w"
. ./path.sh
. ./cmd.sh
pieces=exp/flat   # piece's done files
mkdir -p $pieces
align() {  # align MODEL_DIR ALI_DIR [align_si.sh options]: the training utterances
  local src=$1 dst=$2
  shift 2
  steps/align_si.sh --cmd "$train_cmd" --nj 2 "$@" data/train data/lang "$src" "$dst"
}
mono() {  # mono NAME DATA [train_mono.sh options]: train, then align train the same way
  local name=$1 data=$2
  shift 2
  steps/train_mono.sh --cmd "$train_cmd" --nj 2 --totgauss 1000 "$@" data/"$data" data/lang \
    "exp/flat/$name"
  align "exp/flat/$name" "exp/flat/${name}_ali" "$@"   # the options both steps take
}

piece mono2k align exp/mono exp/flat/mono2k_ali
loop1="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 1.0"
piece mono2k_loop1 align exp/mono exp/flat/mono2k_loop1_ali --scale-opts "$loop1"
piece mono2k_loop1w align exp/mono exp/flat/mono2k_loop1w_ali --scale-opts "$loop1" --retry-beam 200
piece mono2k_boost mono mono2k_boost train_2000short --boost-silence 1.25
piece monoall mono monoall train
piece monoall_boost mono monoall_boost train --boost-silence 1.25
variants="mono2k mono2k_loop1 mono2k_loop1w mono2k_boost monoall monoall_boost"

{
  echo "# The flat start: monophone settings and the boundary error of their alignments"
  echo
  echo "- command: \`egs/aishell_sim/ladder/flat_start.sh\` (in exp/ladder_work, whose stages 0-4" \
       "are those of \`ladder/run.sh\`), at $(git rev-parse --short HEAD)"
  echo "- machine: $(nproc) CPU cores; pieces (exp/flat/*.done, training and aligning):" \
       "$(for v in $variants; do printf '%s %s; ' "$v" "$(cat "exp/flat/$v.done")"; done)"
  echo "- the training alignments of each (exp/flat/<variant>_ali) against the synthesizer's"
  echo "  timings (\`emasr ali-boundary-error\`, data/lang/phones.txt corpus/timings/train.jsonl):"
  echo "  first on the utterances the variant aligned (\`--phone-offsets --by-phone 6\`), then on those"
  echo "  every variant aligned (\`--common-with\` each of them: settings that fail on more utterances"
  echo "  leave the hard ones out of their own measure); one-frame phones from \`emasr ali-info\`; the"
  echo "  variants are described at the top of ladder/flat_start.sh"
  common=()
  for v in $variants; do common+=(--common-with "exp/flat/${v}_ali"); done
  for v in $variants; do
    echo
    echo "## $v"
    echo '```'
    emasr ali-boundary-error --phone-offsets --by-phone 6 "exp/flat/${v}_ali" \
      data/lang/phones.txt corpus/timings/train.jsonl
    emasr ali-info "exp/flat/${v}_ali" --phones data/lang/phones.txt | grep "one-frame"
    echo "on the utterances every variant aligned:"
    emasr ali-boundary-error --phone-offsets "${common[@]}" "exp/flat/${v}_ali" \
      data/lang/phones.txt corpus/timings/train.jsonl
    echo '```'
  done
  echo
  echo "wall time of this invocation: $(( $(date +%s) - start )) s"
} > "$results.tmp"
mv "$results.tmp" "$results"
log "wrote $results"
