#!/usr/bin/env bash
# The paper's experiment end to end on a simulated AISHELL-1 corpus (Tian et al. 2017: BMUF and the
# EMA of the synchronized model): corpus -> data -> lang and LM -> features -> the GMM ladder on
# Kaldi's 3-state topology (mono -> tri1 -> tri2 LDA+MLLT [-> tri3 SAT]) -> GMM baselines -> the
# networks' own tree at 30 ms and their targets -> DNN and LSTM under each strategy, worker count
# and seed -> decoding of the global model and its averages (the EMA and its controls) ->
# RESULTS.md with the dev-tuned table, the intervals and the plots.
#
# Stages 0-7 leave a done marker in exp/done/ when they finish (written last) and are skipped when
# it exists; a training run (stage 8) or decode dir (stage 9) has its own marker (<dir>/.done), so
# adding seeds or strategies later only runs what is new. An interrupted training run resumes from
# its last checkpoint. Delete a marker to redo its stage. Any failed step stops the recipe and the
# message above the failure names the log to read.
set -eEuo pipefail   # -E: the ERR trap below also sees failures inside functions

# Begin configuration section.
stage=0
stop_stage=10
profile=small       # tiny (CI, minutes) | small (the default run, 2 cores) | large (GPU cluster)
corpus_dir=corpus   # the AISHELL-1 tree (data_aishell/, resource_aishell/); stage 0 simulates it
simulate=true       # false: the corpus exists already and stage 0 only checks it
corpus_seed=1       # seed of the simulation
cmvn_per_utt=       # true: CMVN (and all else keyed by speaker) per utterance, through
                    # pseudo-speakers of one utterance (utils/data/modify_speaker_info.sh).
                    # Default: true when simulating (the simulator draws noise, band limit,
                    # colouring and level per utterance, so a speaker's mean is no channel's
                    # mean), false for a real corpus (one AISHELL-1 speaker, one session).
lm_text=            # unsegmented LM text, file or dir of *.txt (default: <corpus-dir>/lm_text)
nj=                 # parallel jobs for features, GMMs and decoding (default: per profile)
# The experiment (stages 8-10) is a spec, conf/experiment/<profile>.yaml (`emasr experiment`);
# each option below, when given, overrides its key (`--set key=value`; the key in brackets)
spec=               # the experiment spec (default: conf/experiment/<profile>.yaml)
spec_opts=          # more of its keys, "key=value ...", e.g. "epoch_choice=best_dev_acc"
num_workers=        # [workers] the parallel rules' worker counts, a list: "2 4 8"
workers_per_process=  # [workers_per_process] K: workers trained as one batched computation
num_nodes=          # [nodes] M: the parallel runs on M nodes (steps/nnet/train.sh --num-nodes)
archs=              # [archs] the spec's architectures to train, e.g. "dnn"
strategies=         # [rows] the table's rows: a sync rule (emasr.nnet.sync.RULES), optionally
                    # +<averaged model> (emasr.nnet.averages.AVERAGED_MODELS), one run per rule
seeds=              # [seeds] network seeds, e.g. "1 2 3"
grid=               # [grid] settings searched on dev per rule, e.g. "ma: train.lr=0.1,0.4,0.8"
grid_seed=          # [grid_seed] search the grid on this seed only
epochs=             # [epochs] network epochs
block_size=         # [block_size] tau: minibatches between syncs
warm_start_epochs=  # [warm_start_epochs] k: the parallel runs start from the one-worker run
                    # after epoch k
ema_half_life_frames=  # [averages.ema] EMA half-life in frames, or a list "30000,90000"
avg_start=          # [averages.avg] +avg: the cumulative average's start (fraction of the run)
last_k=             # [averages.lastk] +lastk: epochs averaged
ma_lr_times_workers=true  # false: [rule_overrides.ma] MA workers at 1 x the learning rate
nnet_opts=          # [overrides] config overrides of every network, e.g. "model.dropout=0.1"
dnn_opts=           # [archs.dnn.overrides] more overrides of the DNN runs / the LSTM runs
lstm_opts=          # [archs.lstm.overrides] (e.g. "model.hidden_layers=8")
controls_decoded_at=  # [decode.controls_at] worker counts whose control rows are decoded
nnet_train_opts=    # [train_opts] extra options of steps/nnet/train.sh, e.g. multi-node
                    # torchrun: "--torchrun-opts '--nnodes 2 --rdzv-endpoint h1:29400'"
nnet_dir=exp/nnet   # where the network runs go (the targets stay in exp/nnet/targets)
gmm_systems=        # the GMM ladder, a prefix of "mono tri1 tri2 tri3" (tri1: deltas, tri2:
                    # LDA+MLLT, tri3: SAT with per-speaker fMLLR), each trained on the one before;
                    # the last one's alignments make the network targets (default: per profile)
fmllr_opts=         # tri3's fMLLR, given to train_sat.sh, align_fmllr.sh and decode_fmllr.sh.
                    # Default with --cmvn-per-utt (one-utterance pseudo-speakers of 130-500
                    # frames): "--fmllr-update-type diag --fmllr-min-count 100", which beat tri2;
                    # Kaldi's (a full transform for speakers of more than 500 frames) kept every
                    # transform the identity there (docs/gmm.md). Otherwise Kaldi's.
gmm_topology=kaldi  # the GMMs' HMMs: kaldi (3 states, 10 ms, Kaldi's; the networks get a tree of
                    # their own) | skip (a phone can pass in one frame: the GMM tree and HCLG can
                    # serve the networks at 30 ms, with --nnet-tree-leaves 0)
nnet_tree_leaves=   # N: the networks' own tree of N leaves (steps/nnet/build_tree.sh at 1/3 of the
                    # rate, data/lang_test_nnet); 0: they share the last GMM's tree and HCLG
                    # (skip topology only). Default: --num-leaves with kaldi, 0 with skip
mono_subset=        # the monophones train on this many shortest utterances, 0: all (Kaldi's
                    # "2kshort" subsets; default: per profile)
mono_totgauss=      # GMM sizes (default: per profile)
num_leaves=
tri_totgauss=
gmm_decode_opts=    # steps/decode.sh beams (default: per profile; Kaldi's 13/8 on large)
gmm_decode_sets="dev test"  # the sets the GMMs decode ("": only the graphs the networks need)
gmm_scoring_opts=   # local/score.sh for the GMMs: LM weights and insertion penalties (default:
                    # per profile). Each system's setting is chosen on dev.
nnet_decode_opts=   # [decode.opts] steps/nnet/decode.sh beams and --acwt
nnet_scoring_opts=  # [decode.scoring_opts] local/score.sh for the networks
results=RESULTS.md  # [results] the report (plots/ and counts/ beside it)
title=              # [title] the report's title
report_note=        # a line added to the report's notes (e.g. the wall times of a run in pieces)
workdir=            # where data/ exp/ and the recipe links are (default: this script's directory;
                    # egs/aishell/run.sh runs these stages in its own directory)
# End configuration section.

help_message="Usage: $0 [options]
The paper's experiment on a simulated AISHELL-1 corpus, in stages (see the top of this script):
  0 simulate corpus   1 data prep      2 dict, lang, LM, lang_test   3 features and CMVN
  4 monophone         5 triphone and alignments   6 graphs and GMM decoding
  7 the networks' tree and targets
  8 network training (the spec's runs)   9 network decoding (global and averaged models)
  10 report (RESULTS.md and plots/)
Options:
  --stage N --stop-stage M      run stages N..M (default $stage..$stop_stage)
  --profile tiny|small|large    corpus size and model sizes (default $profile)
  --nj N                        parallel jobs (tiny/small: 2, large: 16)
  --spec FILE                   the experiment of stages 8-10 (default
                                conf/experiment/<profile>.yaml; emasr experiment --help)
  --spec-opts 'key=value ...'   any of its keys, e.g. 'epoch_choice=best_dev_acc seeds=[1,2]'
  The spec's keys as options (given: they override the spec's):
  --num-workers 'N ...' [workers]  --workers-per-process K  --num-nodes M [nodes]
  --archs 'dnn' --strategies 'single single+ema ... bmuf+lastk' [rows]  --seeds '1 2 3'
  --grid 'ma: train.lr=0.1,0.4; bmuf: sync.block_momentum=0.875,0.75'  --grid-seed S
  --epochs N --block-size TAU --warm-start-epochs K
  --ema-half-life-frames 'F[,F...]' --avg-start F --last-k K [averages.ema/avg/lastk]
  --ma-lr-times-workers false [rule_overrides.ma]  --nnet-opts '...' [overrides]
  --dnn-opts '...' --lstm-opts '...' [archs.<arch>.overrides, appended]
  --controls-decoded-at 'N ...' [decode.controls_at]  --nnet-train-opts '...' [train_opts]
  --nnet-decode-opts '...' --nnet-scoring-opts '...' [decode.opts, decode.scoring_opts]
  --results FILE --title TEXT   the report (default $results) and its title
  --nnet-dir DIR                where the network runs go (default $nnet_dir)
  --corpus-dir DIR --simulate true|false --lm-text FILE   use an existing corpus
  --cmvn-per-utt true|false     CMVN per utterance instead of per speaker (default: = --simulate)
  --mono-subset N --mono-totgauss N --num-leaves N --tri-totgauss N   GMM sizes (every
                                triphone system has --num-leaves and --tri-totgauss)
  --gmm-systems 'mono tri1 tri2 tri3'  the GMM ladder (default per profile: tiny 'mono tri1',
                                small 'mono tri1 tri2', large all four); the last one's
                                alignments make the network targets
  --fmllr-opts '--fmllr-update-type full --fmllr-min-count 500'   tri3's fMLLR (default
                                with --cmvn-per-utt: diag, 100 frames; otherwise Kaldi's: full, 500)
  --gmm-topology kaldi|skip     the GMMs' HMM topology (default $gmm_topology; skip: one frame
                                per phone possible, as the networks' topology)
  --nnet-tree-leaves N          the networks' own tree of N leaves at 30 ms (default: as many as
                                --num-leaves; 0: they share the last GMM's tree, skip only)
  --gmm-decode-opts '--beam 11 --lattice-beam 5'
  --gmm-decode-sets 'dev test'  the sets the GMMs decode ('': only the graph the networks use)
  --gmm-scoring-opts '--min-lmwt 7 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0'
  --report-note TEXT            a line added to the report's notes
  --workdir DIR                 run in DIR (needs conf/ steps/ utils/ local/ cmd.sh path.sh there)
Jobs run through cmd.sh (run.pl here; queue.pl or slurm.pl on a cluster)."

. "$(dirname "$0")/utils/lib/log.sh"
start_command=$(shell_quoted "$0" "$@")   # the report's provenance: the command, ready to paste
defaults="$corpus_dir|$lm_text|$results"
. "$(dirname "$0")/utils/parse_options.sh"
if [ $# -ne 0 ]; then
  printf '%b\n' "$help_message" >&2
  exit 1
fi
# Paths given on the command line are relative to where the recipe was started; the recipe itself
# runs in its own directory (conf/, steps/, data/, exp/ are relative to it).
absolute() { case "$1" in /*|"") echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
IFS='|' read -r default_corpus default_lm default_results <<< "$defaults"
[ "$corpus_dir" = "$default_corpus" ] || corpus_dir=$(absolute "$corpus_dir")
[ "$lm_text" = "$default_lm" ] || lm_text=$(absolute "$lm_text")
[ "$results" = "$default_results" ] || results=$(absolute "$results")
cd "${workdir:-$(dirname "$0")}"
. ./cmd.sh
. ./path.sh

last_stage=10
. utils/lib/recipe.sh   # log, run, the ERR trap, stage_on, the stage done markers
check_stage_range

# -- profile defaults (an option given on the command line wins) ---------------------------------
case "$profile" in
  tiny)
    : "${nj:=2}" "${mono_totgauss:=300}" "${num_leaves:=200}"
    : "${tri_totgauss:=1200}" "${mono_subset:=0}" "${gmm_systems:=mono tri1}"
    mono_opts="--num-iters 20"
    targets_opts="--max-lost 0.05"   # 230 utterances: a dozen unaligned is already 5%
    : "${gmm_decode_opts:=--beam 9 --lattice-beam 3}"
    # GMMs: LM weights up to Kaldi's 17, Kaldi's three penalties (with per-utterance CMVN the
    # tiny tri1 needed LM weight 14: cut at 12 it lost to mono)
    : "${gmm_scoring_opts:=--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0}"
    ;;
  small)
    : "${nj:=2}" "${mono_totgauss:=1000}" "${num_leaves:=1200}"
    : "${tri_totgauss:=10000}" "${mono_subset:=2000}"
    # tri3 (SAT) is left to ladder/run.sh: its training, fMLLR alignment and two-pass decodes
    # (about 35 min on 2 cores) do not fit the 90 minutes with the networks (docs/gmm.md)
    : "${gmm_systems:=mono tri1 tri2}"
    mono_opts=
    targets_opts=
    : "${gmm_decode_opts:=--beam 11 --lattice-beam 5}"
    : "${gmm_scoring_opts:=--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5}"
    ;;
  large)
    : "${nj:=16}" "${mono_totgauss:=2000}" "${num_leaves:=3000}"
    : "${tri_totgauss:=40000}" "${mono_subset:=10000}" "${gmm_systems:=mono tri1 tri2 tri3}"
    mono_opts=
    targets_opts=
    : "${gmm_decode_opts:=--beam 13 --lattice-beam 8}"
    : "${gmm_scoring_opts:=--min-lmwt 7 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0}"
    ;;
  *) die "--profile must be tiny, small or large, not '$profile'" ;;
esac
: "${lm_text:=$corpus_dir/lm_text}" "${spec:=conf/experiment/$profile.yaml}"
: "${cmvn_per_utt:=$simulate}"
case " $gmm_systems " in *" tri3 "*)
  # one-utterance pseudo-speakers are too short for Kaldi's full transforms (docs/gmm.md)
  if [ "$cmvn_per_utt" = true ]; then
    : "${fmllr_opts:=--fmllr-update-type diag --fmllr-min-count 100}"
  fi ;;
esac
sets="train dev test"
gmm_lang=data/lang_test
case " $gmm_systems " in
  " mono tri1 "|" mono tri1 tri2 "|" mono tri1 tri2 tri3 ") ;;
  *) die "--gmm-systems '$gmm_systems': expected 'mono tri1', 'mono tri1 tri2' or" \
         "'mono tri1 tri2 tri3'" ;;
esac
case "$gmm_topology" in
  kaldi) : "${nnet_tree_leaves:=$num_leaves}" ;;
  skip) : "${nnet_tree_leaves:=0}" ;;
  *) die "--gmm-topology '$gmm_topology': expected kaldi or skip" ;;
esac
[[ $nnet_tree_leaves =~ ^[0-9]+$ ]] || \
  die "--nnet-tree-leaves '$nnet_tree_leaves': expected a number of leaves (0: none)"
if [ "$gmm_topology" = kaldi ] && [ "$nnet_tree_leaves" -le 0 ]; then
  die "--gmm-topology kaldi: a 3-state phone lasts at least 3 frames, longer than half the" \
      "phones at the networks' 30 ms: give them their own tree (--nnet-tree-leaves N)"
fi
nnet_gmm=${gmm_systems##* }    # the GMM whose alignments make the network targets
if [ "$nnet_tree_leaves" -gt 0 ]; then
  nnet_tree=exp/nnet_tree      # the networks' own tree, pdfs and HCLG
  nnet_graph=$nnet_tree/graph
  nnet_trans_mdl=$nnet_tree/final.mdl
else                           # the networks share the GMM's tree, pdfs and HCLG
  nnet_graph=exp/$nnet_gmm/graph
  nnet_trans_mdl=exp/$nnet_gmm/final.mdl
fi

# -- stage bookkeeping ---------------------------------------------------------------------------
stage_settings() {
  # stage_settings N: the options that shape stage N's outputs (recorded in its done marker)
  case "$1" in
    0) key_values profile corpus_dir simulate corpus_seed ;;
    1) key_values profile cmvn_per_utt ;;
    2) key_values profile lm_text gmm_topology ;;
    4) key_values profile mono_subset mono_totgauss mono_opts ;;
    5) key_values profile num_leaves tri_totgauss gmm_systems fmllr_opts ;;
    6) key_values profile gmm_decode_opts gmm_scoring_opts gmm_decode_sets gmm_systems \
         nnet_tree_leaves fmllr_opts ;;
    7) key_values profile targets_opts gmm_systems nnet_tree_leaves ;;
    *) key_values profile ;;
  esac
}

stage_times() {
  # "0: 12 s, 1: 3 s, ... (stages 0-7 total N s)" from the done markers
  local f n total=0 out=""
  for n in 0 1 2 3 4 5 6 7; do
    f=exp/done/stage$n
    if [ -f "$f" ]; then
      out="$out${out:+, }$n: $(head -1 "$f" | cut -d' ' -f1) s"
      total=$((total + $(head -1 "$f" | cut -d' ' -f1)))
    fi
  done
  echo "${out:-none} (stages 0-7 total $total s)"
}

log "profile $profile: nj $nj, the experiment $spec"

if stage_on 0 && begin_stage 0 "corpus in $corpus_dir"; then
  if [ "$simulate" = true ]; then
    mkdir -p exp/simulate/log
    run $train_cmd exp/simulate/log/simulate.log \
      python local/simulate_corpus.py --profile "$profile" --out "$corpus_dir" --nj "$nj" \
        --seed "$corpus_seed"
  fi
  for f in data_aishell/transcript/aishell_transcript_v0.8.txt resource_aishell/lexicon.txt; do
    [ -f "$corpus_dir/$f" ] || die "expected file $corpus_dir/$f to exist"
  done
  for x in $sets; do
    [ -d "$corpus_dir/data_aishell/wav/$x" ] || \
      die "expected directory $corpus_dir/data_aishell/wav/$x to exist"
  done
  [ -e "$lm_text" ] || die "expected the LM text $lm_text to exist (--lm-text)"
  end_stage 0
fi

if stage_on 1 && begin_stage 1 "data prep: data/{train,dev,test}"; then
  run local/aishell_data_prep.sh "$corpus_dir/data_aishell/wav" "$corpus_dir/data_aishell/transcript"
  if [ "$cmvn_per_utt" = true ]; then
    # Measured on the small profile with per-speaker CMVN: the band-limited 31% of the training
    # utterances sat 2-3 standard deviations off in MFCC means after their speaker's CMVN, their
    # tri1 alignments had a median phone-boundary error of 458 ms (18 ms for the rest), and every
    # system deleted most of their words in test (docs/recipe.md).
    for x in $sets; do
      rm -rf "data/$x.uttspk"
      run utils/data/modify_speaker_info.sh --utts-per-spk-max 1 "data/$x" "data/$x.uttspk"
      rm -rf "data/$x" && mv "data/$x.uttspk" "data/$x"
    done
  fi
  end_stage 1
fi

if stage_on 2 && begin_stage 2 "dict, LM, lang, lang_test"; then
  run local/aishell_prepare_dict.sh --text data/train/text "$corpus_dir/resource_aishell"
  # the LM adds its new words (with pypinyin pronunciations) to the dict: prepare_lang comes after
  run local/train_lms.sh "$lm_text" data/local/dict data/dev/text data/local/lm
  run utils/prepare_lang.sh --topology "$gmm_topology" data/local/dict "<UNK>" data/local/lang \
    data/lang
  run utils/format_lm.sh data/lang data/local/lm/3gram.arpa.gz data/local/dict/lexicon.txt \
    "$gmm_lang"
  end_stage 2
fi

if stage_on 3 && begin_stage 3 "features: MFCC+pitch (GMMs) and fbank (networks), CMVN"; then
  for x in $sets; do
    run utils/copy_data_dir.sh "data/$x" "data/${x}_fbank"
    run steps/make_mfcc_pitch.sh --cmd "$train_cmd" --nj "$nj" "data/$x" "exp/make_mfcc/$x" mfcc
    run steps/compute_cmvn_stats.sh "data/$x" "exp/make_mfcc/$x" mfcc
    run utils/fix_data_dir.sh "data/$x"
    run steps/make_fbank.sh --cmd "$train_cmd" --nj "$nj" "data/${x}_fbank" "exp/make_fbank/$x" fbank
    run steps/compute_cmvn_stats.sh "data/${x}_fbank" "exp/make_fbank/$x" fbank
    run utils/fix_data_dir.sh "data/${x}_fbank"
  done
  end_stage 3
fi

if stage_on 4 && begin_stage 4 "monophone GMM"; then
  mono_data=data/train
  if [ "$mono_subset" -gt 0 ]; then
    mono_data=data/train_${mono_subset}short
    run utils/subset_data_dir.sh --shortest data/train "$mono_subset" "$mono_data"
  fi
  # shellcheck disable=SC2086
  run steps/train_mono.sh --cmd "$train_cmd" --nj "$nj" --totgauss "$mono_totgauss" $mono_opts \
    "$mono_data" data/lang exp/mono
  end_stage 4
fi

if stage_on 5 && begin_stage 5 "triphone GMMs ($gmm_systems); alignments of train and dev"; then
  run steps/align_si.sh --cmd "$train_cmd" --nj "$nj" data/train data/lang exp/mono exp/mono_ali
  run steps/train_deltas.sh --cmd "$train_cmd" --nj "$nj" --num-leaves "$num_leaves" \
    --totgauss "$tri_totgauss" data/train data/lang exp/mono_ali exp/tri1
  # tri2 (LDA+MLLT) and tri3 (SAT) each on the alignments of the system before it
  case " $gmm_systems " in *" tri2 "*)
    run steps/align_si.sh --cmd "$train_cmd" --nj "$nj" data/train data/lang exp/tri1 exp/tri1_ali
    run steps/train_lda_mllt.sh --cmd "$train_cmd" --num-leaves "$num_leaves" \
      --totgauss "$tri_totgauss" data/train data/lang exp/tri1_ali exp/tri2 ;;
  esac
  case " $gmm_systems " in *" tri3 "*)
    run steps/align_si.sh --cmd "$train_cmd" --nj "$nj" data/train data/lang exp/tri2 exp/tri2_ali
    # shellcheck disable=SC2086
    run steps/train_sat.sh --cmd "$train_cmd" --num-leaves "$num_leaves" $fmllr_opts \
      --totgauss "$tri_totgauss" data/train data/lang exp/tri2_ali exp/tri3 ;;
  esac
  align=steps/align_si.sh
  [ "$nnet_gmm" = tri3 ] && align="steps/align_fmllr.sh $fmllr_opts"   # its speakers' transforms first
  # dev is aligned too: the networks' dev frame accuracy needs dev targets
  run utils/combine_data.sh data/train_dev data/train data/dev
  run $align --cmd "$train_cmd" --nj "$nj" data/train_dev data/lang "exp/$nnet_gmm" \
    "exp/${nnet_gmm}_ali_train_dev"
  if [ "$nnet_tree_leaves" -gt 0 ] && [ ! -f "exp/${nnet_gmm}_ali/ali.1.gz" ]; then
    # the network tree grows on the training utterances only (dev stays held out)
    run $align --cmd "$train_cmd" --nj "$nj" data/train data/lang "exp/$nnet_gmm" \
      "exp/${nnet_gmm}_ali"
  fi
  end_stage 5
fi

if stage_on 6 && begin_stage 6 "graphs and GMM decoding of '$gmm_decode_sets'"; then
  for sys in $gmm_systems; do
    # the last system's graph is also the networks' when they share its tree
    [ -n "$gmm_decode_sets" ] || { [ "$sys" = "$nnet_gmm" ] && [ -z "${nnet_tree:-}" ]; } ||
      continue
    run utils/mkgraph.sh "$gmm_lang" "exp/$sys" "exp/$sys/graph"
    decode=steps/decode.sh
    [ "$sys" = tri3 ] && decode="steps/decode_fmllr.sh $fmllr_opts"   # SI, then fMLLR
    for x in $gmm_decode_sets; do
      # shellcheck disable=SC2086
      run $decode --cmd "$decode_cmd" --nj "$nj" $gmm_decode_opts \
        --scoring-opts "$gmm_scoring_opts" "exp/$sys/graph" "data/$x" "exp/$sys/decode_$x"
    done
  done
  end_stage 6
fi

if stage_on 7 && begin_stage 7 "network targets from the $nnet_gmm alignments"; then
  run utils/combine_data.sh data/train_dev_fbank data/train_fbank data/dev_fbank
  nnet_ali=exp/${nnet_gmm}_ali_train_dev
  if [ -n "${nnet_tree:-}" ]; then
    # Kaldi chain's way: the networks' lang dir (one-frame topology) and tree, grown from the GMM
    # alignments converted to it at 1/3 of the frame rate; train and dev converted to that tree
    run utils/prepare_lang_nnet.sh "$gmm_lang" data/lang_test_nnet
    # at a third of the frames a split gains a third of the likelihood: --tree-thresh 100 asks
    # of a split what the GMM trees' 300 asks at 10 ms
    run steps/nnet/build_tree.sh --cmd "$train_cmd" --frame-subsampling-factor 3 \
      --tree-thresh 100 "$nnet_tree_leaves" data/train data/lang_test_nnet "exp/${nnet_gmm}_ali" \
      "$nnet_tree"
    run steps/nnet/convert_ali.sh --cmd "$train_cmd" --frame-subsampling-factor 3 "$nnet_ali" \
      "$nnet_tree" "${nnet_tree}_ali_train_dev"
    run utils/mkgraph.sh data/lang_test_nnet "$nnet_tree" "$nnet_graph"
    nnet_ali=${nnet_tree}_ali_train_dev
  fi
  # dev is aligned for the networks' dev frame accuracy; the priors count training only
  # shellcheck disable=SC2086
  run steps/nnet/make_targets.sh --cmd "$train_cmd" --frame-subsampling-factor 3 $targets_opts \
    --priors-from data/train_fbank "$nnet_ali" data/train_dev_fbank exp/nnet/targets
  end_stage 7
fi

# -- stages 8-10: the experiment (its spec; steps/nnet/experiment.sh, shared by every corpus) -----
spec_sets() {
  # the experiment options given on the command line, as `--set key=value` of the spec
  local arch opts
  sets=()
  set_key() { [ -z "$2" ] || sets+=(--set "$1=$2"); }
  for arch in dnn lstm; do   # (before --archs: an architecture left out takes its options along)
    opts=${arch}_opts
    set_key "archs.$arch.overrides+" "${!opts}"
  done
  set_key archs "$archs"
  set_key rows "$strategies"
  set_key workers "$num_workers"
  set_key workers_per_process "$workers_per_process"
  set_key nodes "$num_nodes"
  set_key seeds "$seeds"
  set_key grid "$grid"
  set_key grid_seed "$grid_seed"
  set_key epochs "$epochs"
  set_key block_size "$block_size"
  set_key warm_start_epochs "$warm_start_epochs"
  set_key averages.ema "$ema_half_life_frames"
  set_key averages.avg "$avg_start"
  set_key averages.lastk "$last_k"
  set_key overrides+ "$nnet_opts"
  [ "$ma_lr_times_workers" = true ] || sets+=(--set "rule_overrides.ma=[]")
  set_key train_opts "$nnet_train_opts"
  set_key decode.opts "$nnet_decode_opts"
  set_key decode.scoring_opts "$nnet_scoring_opts"
  set_key decode.controls_at "$controls_decoded_at"
  set_key results "$results"
  set_key title "$title"
  for opts in $spec_opts; do sets+=(--set "$opts"); done
}

if stage_on 8 || stage_on 9 || stage_on 10; then
  first=$(( stage > 8 ? stage - 7 : 1 )) last=$(( stop_stage < 10 ? stop_stage - 7 : 3 ))
  spec_sets
  mkdir -p "$(dirname "$nnet_dir")"
  # the spec as this run resolved it (its options over $spec); experiment.sh keeps its copy in
  # the network dir, <nnet-dir>/experiment.yaml
  run emasr experiment show --out "$nnet_dir.spec.yaml" ${sets[@]+"${sets[@]}"} "$spec"
  shown() { emasr experiment show --key "$1" "$nnet_dir.spec.yaml"; }
  notes=$nnet_dir.notes
  {
    echo "command: \`$start_command\` (profile $profile, $(shown workers) workers, seeds" \
      "$(shown seeds))"
    if [ "$simulate" = true ]; then
      echo "corpus: simulated by local/simulate_corpus.py (seed $corpus_seed): it stands in for" \
        "AISHELL-1 to exercise the pipeline, not for real acoustics, and these models are not" \
        "models of real speech (local/real_speech_cer.sh decodes real recordings with them)"
    fi
    echo "stage wall times: $(stage_times)"
    if [ "$stage" -lt 8 ]; then   # (an invocation of stages 8-10 alone has only its setup here)
      echo "wall time of this run.sh invocation (stages $stage-$stop_stage, setup included) up to" \
        "the experiment: $SECONDS s"
    fi
    [ -z "$report_note" ] || echo "$report_note"
  } > "$notes"
  gmm_dirs=
  for sys in $gmm_systems; do gmm_dirs="$gmm_dirs exp/$sys"; done
  run steps/nnet/experiment.sh --stage "$first" --stop-stage "$last" --nj "$nj" \
    --train-cmd "$train_cmd" --decode-cmd "$decode_cmd" --cuda-cmd "$cuda_cmd" \
    --report-notes "$notes" --report-dirs "$gmm_dirs" "$nnet_dir.spec.yaml" \
    exp/nnet/targets data/train_fbank data/dev_fbank data/test_fbank "$nnet_graph" \
    "$nnet_trans_mdl" "$nnet_dir"
fi
log "done (stages $stage..$stop_stage)"
