#!/usr/bin/env bash
# Kaldi's first recipe (egs/yesno/s5) on the real yesno recordings, end to end: data prep from
# the waves, dict and lang for YES/NO with SIL, Kaldi's unigram grammar, MFCC, a monophone GMM,
# its graph, decoding and WER; then a small DNN trained on the monophone alignments (3 frames
# stacked, so at 30 ms) and decoded through the same graph.
#
#   egs/yesno/run.sh /path/to/waves_yesno      (http://openslr.org/resources/1/waves_yesno.tar.gz)
#
# The corpus is read in place (wav.scp holds absolute paths). Each stage leaves a done marker in
# exp/done/ when it finishes (written last) and is skipped when it exists; delete a marker, or
# pass --stage N, to redo a stage. Any failed step stops the recipe and names the log to read.
set -eEuo pipefail   # -E: the ERR trap below also sees failures inside functions

# Begin configuration section.
stage=0
stop_stage=7
nj=1                # one speaker ("global"): Kaldi's yesno runs every step as one job
mono_totgauss=400   # Kaldi's yesno value
mono_iters=12       # Kaldi's 40: 1.72% WER here (4 insertions), 12: 0.86% in a third of the time
gmm_decode_opts=    # steps/decode.sh options (default: Kaldi's beams)
scoring_opts="--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0"
nnet_epochs=6
# a tiny DNN: 2 x 128, 13 MFCCs x 3 stacked x 5 spliced inputs, 11 monophone pdfs out
nnet_opts="model.hidden_layers=2 model.hidden_dim=128 data.minibatch_frames=64 train.lr=0.1"
nnet_decode_opts="--acwt 0.3 --beam 13 --lattice-beam 6"
# End configuration section.

help_message="Usage: $0 [options] <waves_yesno-dir>
Kaldi's yesno recipe in stages:
  0 data prep (data/train_yesno, data/test_yesno)   1 dict, lang, grammar (data/lang_test_tg)
  2 MFCC and CMVN   3 monophone GMM   4 graph, GMM decoding of test_yesno (and of
  train_yesno, the dev set), WER
  5 alignments and network targets   6 DNN training   7 DNN decoding, WER, RESULTS.md
  (6-7: steps/nnet/experiment.sh, the experiment driver every corpus recipe shares)
Options:
  --stage N --stop-stage M      run stages N..M (default $stage..$stop_stage)
  --mono-totgauss N --mono-iters N   Gaussians and iterations of the monophone GMM (default $mono_totgauss, $mono_iters)
  --gmm-decode-opts '...'       extra options of steps/decode.sh
  --scoring-opts '...'          LM weights and penalties (default '$scoring_opts')
  --nnet-epochs N --nnet-opts 'key=value ...'   the DNN (conf/nnet/dnn.yaml overridden)
  --nnet-decode-opts '...'      steps/nnet/decode.sh options (default '$nnet_decode_opts')"

. "$(dirname "$0")/utils/parse_options.sh"
if [ $# -ne 1 ]; then
  printf '%b\n' "$help_message" >&2
  exit 1
fi
case "$1" in /*) waves=$1 ;; *) waves=$PWD/$1 ;; esac   # before the cd below
[ -d "$waves" ] || die "expected directory $waves (Kaldi's waves_yesno) to exist"
cd "$(dirname "$0")"
. ./cmd.sh
. ./path.sh

last_stage=7
. utils/lib/recipe.sh   # log, run, the ERR trap, stage_on, the stage done markers
check_stage_range

stage_settings() {
  # stage_settings N: the options that shape stage N's outputs (recorded in its done marker)
  case "$1" in
    0) key_values waves ;;
    3) key_values mono_totgauss mono_iters ;;
    4) key_values gmm_decode_opts scoring_opts ;;
    6) key_values nnet_epochs nnet_opts ;;
    7) key_values nnet_decode_opts scoring_opts ;;
  esac
}

best_wer() {
  # best_wer DECODE_DIR [wer|cer]: the scoring's best %WER line (scoring_kaldi/best_wer, or
  # best_cer); call it as its own command (wer=$(best_wer DIR)), so that a decode without a score
  # stops the recipe
  local best=$1/scoring_kaldi/best_${2:-wer}
  [ -f "$best" ] || die "expected file $best to exist: decode and score $1 first"
  cat "$best"
}

at_dev_choice() {
  # at_dev_choice DEV_DECODE TEST_DECODE wer|cer: test's %WER line at the LM weight and penalty
  # chosen on dev, as RESULTS.md reports it (Kaldi's best_wer is the best on test itself)
  local chosen
  chosen=$(best_wer "$1" "$3")
  chosen=${chosen##*/}   # cer_LMWT_WIP
  [ -f "$2/$chosen" ] || die "expected file $2/$chosen to exist: score $2 at the setting dev chose"
  echo "$(grep -m 1 '^%WER' "$2/$chosen") $2/$chosen"
}

report_wers() {
  # the console's summary: RESULTS.md's numbers (test CER at the setting chosen on dev), then
  # Kaldi's yesno number (test WER at its own best LM weight)
  local name dir score
  for name in "monophone GMM:exp/mono0a" "DNN:exp/nnet/dnn_single_s1"; do
    dir=${name#*:}
    score=$(at_dev_choice "$dir/decode_dev" "$dir/decode_test" cer)
    log "${name%%:*}, test CER at the LM weight and penalty chosen on dev (RESULTS.md's): $score"
    score=$(best_wer "$dir/decode_test")
    log "${name%%:*}, test WER at its best LM weight on test (Kaldi's yesno figure): $score"
  done
}


if stage_on 0 && begin_stage 0 "data prep from $waves"; then
  run local/prepare_data.sh "$waves"
  end_stage 0
fi

if stage_on 1 && begin_stage 1 "dict, lang, grammar"; then
  run local/prepare_dict.sh
  # the skip topology: the GMM's tree, pdfs and HCLG serve the DNN at 30 ms too (a Kaldi 3-state
  # word of yes/no phones would need its own network tree, as egs/aishell_sim builds)
  run utils/prepare_lang.sh --position-dependent-phones false --topology skip data/local/dict \
    "<SIL>" data/local/lang data/lang
  run local/prepare_lm.sh
  end_stage 1
fi

if stage_on 2 && begin_stage 2 "MFCC and CMVN"; then
  for x in train_yesno test_yesno; do
    run steps/make_mfcc.sh --nj "$nj" --cmd "$train_cmd" "data/$x" "exp/make_mfcc/$x" mfcc
    run steps/compute_cmvn_stats.sh "data/$x" "exp/make_mfcc/$x" mfcc
    run utils/fix_data_dir.sh "data/$x"
  done
  end_stage 2
fi

if stage_on 3 && begin_stage 3 "monophone GMM"; then
  # the Gaussians grow to --totgauss until 2 iterations before the end (Kaldi: iteration 30 of 40)
  run steps/train_mono.sh --nj "$nj" --cmd "$train_cmd" --totgauss "$mono_totgauss" \
    --num-iters "$mono_iters" --max-iter-inc $((mono_iters - 2)) data/train_yesno data/lang exp/mono0a
  end_stage 3
fi

if stage_on 4 && begin_stage 4 "graph and GMM decoding"; then
  run utils/mkgraph.sh data/lang_test_tg exp/mono0a exp/mono0a/graph_tgpr
  # test, and the training set as the dev set the report chooses the LM weight on (yesno has
  # none; the DNN's is the same), scored in characters too as the report reads them
  for x in test:test_yesno dev:train_yesno; do
    # shellcheck disable=SC2086
    run steps/decode.sh --nj "$nj" --cmd "$decode_cmd" $gmm_decode_opts \
      --scoring-opts "$scoring_opts --cer true" exp/mono0a/graph_tgpr "data/${x#*:}" \
      "exp/mono0a/decode_${x%%:*}"
  done
  wer=$(best_wer exp/mono0a/decode_test)
  log "monophone GMM: $wer"
  end_stage 4
fi

if stage_on 5 && begin_stage 5 "alignments and network targets"; then
  run steps/align_si.sh --nj "$nj" --cmd "$train_cmd" data/train_yesno data/lang exp/mono0a \
    exp/mono0a_ali
  # The topology lets every state exit to the end, so the alignments never visit SIL's last
  # state: its pdf has no count, and gets Kaldi nnet1's unseen-pdf prior (it never wins a frame)
  run steps/nnet/make_targets.sh --cmd "$train_cmd" --frame-subsampling-factor 3 \
    exp/mono0a_ali data/train_yesno exp/dnn/targets
  end_stage 5
fi

# stages 6-7: the experiment driver every corpus recipe shares (steps/nnet/experiment.sh): one
# worker's DNN trained, decoded and reported. yesno has no dev set: the training set stands in for
# it (the frame accuracy that steers the learning rate, and the LM weight chosen for test).
experiment() {
  # conf/experiment.yaml with this recipe's network options, stored beside the runs
  run emasr experiment show --out exp/nnet.spec.yaml --set "epochs=$nnet_epochs" \
    --set "archs.dnn.overrides=$nnet_opts" --set "decode.opts=$nnet_decode_opts" \
    --set "decode.scoring_opts=$scoring_opts --cer true" conf/experiment.yaml
  run steps/nnet/experiment.sh --stage "$1" --stop-stage "$2" --nj "$nj" \
    --train-cmd "$train_cmd" --decode-cmd "$decode_cmd" --cuda-cmd "$cuda_cmd" \
    --report-dirs exp/mono0a exp/nnet.spec.yaml exp/dnn/targets data/train_yesno \
    data/train_yesno data/test_yesno exp/mono0a/graph_tgpr exp/mono0a_ali/final.mdl exp/nnet
}

if stage_on 6 && begin_stage 6 "DNN training (the experiment driver)"; then
  experiment 1 1
  end_stage 6
fi

if stage_on 7 && begin_stage 7 "DNN decoding and RESULTS.md (the experiment driver)"; then
  experiment 2 3
  end_stage 7
fi

[ "$stop_stage" -lt 7 ] || report_wers
log "done (stages $stage..$stop_stage) in $SECONDS s"
