#!/usr/bin/env bash
# The paper's models at 2-core scale: the small profile's corpus, GMMs and network targets; an
# 8-hidden-layer DNN (8 x 512) and a 3-layer unidirectional LSTMP (3 x 256, projection 128), each
# trained single, MA and BMUF at 2, 4 and 8 workers (3 epochs, the annealed default schedule),
# with the EMA and its two controls kept beside every run; dev-tuned CER in workers/<arch>/RESULTS.md
# (one report per arch, so that a half run on a fresh checkout leaves the other half's report alone).
#
# Cut to fit one session of 2 cores (under 2.5 hours): one seed by default; the controls (+avg,
# +lastk) are decoded for the single worker and at 8 workers only (at 2 and 4 workers their dev
# frame accuracy is reported); the GMMs are not decoded (egs/aishell_sim/RESULTS.md has them).
# Every piece is resumable (run.sh's done markers): `--archs dnn`, then `--archs lstm`, runs the
# two halves one after the other, each followed by its arch's report.
# With the default run's exp/ already there, stages 0-7 are reused as they are; with --workdir,
# another run's (e.g. the ladder's exp/ladder_work, whose networks train on tri3's alignments:
# --workdir exp/ladder_work --run-opts "--gmm-systems 'mono tri1 tri2 tri3' --nnet-tree-leaves 1200",
# the options its stages 0-7 ran with, which their done markers check).
set -euo pipefail

archs="dnn lstm"
seeds=1
workdir=     # the run whose stages 0-7 to use (default: the recipe dir's, the default run)
run_opts=    # options for every run.sh call, e.g. the GMM systems that work dir was made with
# BMUF at 4 and 8 workers holds the 8-layer DNN at its random start (7% dev frame accuracy, the
# block momentum 1 - 1/N on an untrained model: bench/bmuf_warmup.sh, docs/recipe.md); its first
# 12 syncs as MA (fairseq's warm-up) take it off. The rule reads it in BMUF runs only.
dnn_opts="model.hidden_layers=8 model.hidden_dim=512 sync.warmup_blocks=12"
lstm_opts="model.num_layers=3 model.hidden_size=256 model.proj_size=128"

help_message="Usage: $0 [--archs 'dnn lstm'] [--seeds '1 2 3'] [--workdir DIR] [--run-opts '...']
       [--dnn-opts '$dnn_opts'] [--lstm-opts '$lstm_opts']
Trains and decodes the paper's models in <workdir>/exp/nnet_paper, reports workers/<arch>/RESULTS.md."
. "$(dirname "$0")/../utils/parse_options.sh"
[ $# -eq 0 ] || { printf '%s\n' "$help_message" >&2; exit 1; }
cd "$(dirname "$0")/.."
eval "run=(./run.sh ${workdir:+--workdir \"$workdir\"} $run_opts)"   # the options may quote values
work=${workdir:-.}

start=$(date +%s)
if [ ! -f "$work/exp/done/stage7" ]; then
  "${run[@]}" --stage 0 --stop-stage 7 --gmm-decode-sets ""
fi
common=(--nnet-dir exp/nnet_paper --num-workers "2 4 8" --controls-decoded-at "1 8"
        --dnn-opts "$dnn_opts" --lstm-opts "$lstm_opts")
"${run[@]}" --stage 8 --stop-stage 9 "${common[@]}" --archs "$archs" --seeds "$seeds"
pieces=$work/exp/nnet_paper/pieces.log
echo "$(( $(date +%s) - start )) s: archs '$archs', seeds '$seeds'${workdir:+, work dir $workdir}, finished $(date -u '+%Y-%m-%dT%H:%M:%SZ')" \
  >> "$pieces"
declare -A title=([dnn]="the 8-layer DNN (8 x 512)" [lstm]="the 3-layer LSTMP (3 x 256, projection 128)")
for arch in $archs; do
  mkdir -p "workers/$arch"
  "${run[@]}" --stage 10 "${common[@]}" --archs "$arch" --seeds "$seeds" \
    --results "workers/$arch/RESULTS.md" --title "Results: the paper's models at 2-core scale, ${title[$arch]}" \
    --report-note "pieces (workers/run.sh, wall time each, stages 0-7 included where they ran): $(paste -sd';' "$pieces")"
done
