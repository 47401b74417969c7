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
num_workers=        # training workers of ma/bmuf runs, a list: "2 4 8" trains each at every N;
                    # single runs use 1 (default: per profile)
workers_per_process=1  # K: the ma/bmuf runs' workers, K to a process, trained as one batched
                    # computation (dist.workers_per_process; N / K processes; K divides every N)
num_nodes=1         # M: the ma/bmuf runs on M nodes, N / M workers on each, one job through
                    # cuda_cmd (steps/nnet/train.sh --num-nodes; slurm.pl: sbatch --nodes M)
archs="dnn lstm"
# the table's rows: a sync rule (emasr.nnet.sync.RULES: single, ma, bmuf, diloco), optionally +<averaged model> (ema: the paper's
# EMA; ema-warm: each EMA started after BMUF's warm-up; avg: cumulative average; lastk: average
# of the last k epochs), decoded from the same run
# (default: per profile; ma+avg and ma+lastk are left out to keep the decoding within its time)
strategies=
seeds=              # network seeds, e.g. "1 2 3" (default: per profile)
grid=               # settings searched on dev per rule, the best on dev frame accuracy reported
                    # (emasr tuning-grid), e.g. "ma: train.lr=0.1,0.4,0.8" (default: no grid)
grid_seed=          # search the grid on this seed only; the other seeds train the point it chose
epochs=             # network epochs (default: per profile)
block_size=         # tau: minibatches between syncs (default: per profile)
warm_start_epochs=  # k: the ma/bmuf runs start from the single run's model after epoch k and
                    # train the epochs after it (needs the row single; steps/nnet/experiment.sh)
ema_half_life_frames=  # EMA half-life in training frames, or a list "30000,90000": one EMA each,
                    # every one decoded, the report's +ema row the best on dev (default: per profile)
avg_start=          # +avg: the cumulative average starts at this fraction of the run (default 0.5)
last_k=             # +lastk: epochs averaged (default: per profile)
ma_lr_times_workers=true  # MA workers at N x the learning rate (Kaldi's rule); false: 1 x
nnet_opts=          # extra config overrides for every network, e.g. "model.dropout=0.1"
dnn_opts=           # extra config overrides of the DNN runs / the LSTM runs, after the profile's
lstm_opts=          # (e.g. "model.hidden_layers=8"; workers/run.sh: the paper's deep models)
nnet_dir=exp/nnet   # where the network runs go (the targets stay in exp/nnet/targets)
controls_decoded_at=  # worker counts whose +avg and +lastk rows are decoded (1: the single
                    # worker's); the others get their dev frame accuracy only (default: all)
nnet_train_opts=    # extra options of steps/nnet/train.sh, e.g. multi-node torchrun:
                    # "--torchrun-opts '--nnodes 2 --rdzv-backend c10d --rdzv-endpoint h1:29400'"
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
nnet_decode_opts=   # steps/nnet/decode.sh beams and --acwt (default: per profile)
gmm_scoring_opts=   # local/score.sh for the GMMs and for the networks: LM weights and insertion
nnet_scoring_opts=  # penalties (default: per profile). Each system's setting is chosen on dev.
results=RESULTS.md  # the report (plots go to plots/ beside it)
title=              # the report's title (default: "Results: <profile> profile")
report_note=        # a line added to the report's notes (e.g. the wall times of a run in pieces)
workdir=            # where data/ exp/ and the recipe links are (default: this script's directory;
                    # egs/aishell/run.sh runs these stages in its own directory)
# End configuration section.

help_message="Usage: $0 [options]
The paper's experiment on a simulated AISHELL-1 corpus, in stages (see the top of this script):
  0 simulate corpus   1 data prep      2 dict, lang, LM, lang_test   3 features and CMVN
  4 monophone         5 triphone and alignments   6 graphs and GMM decoding
  7 the networks' tree and targets
  8 network training (arch x strategy x seed)   9 network decoding (global and EMA model)
  10 report (RESULTS.md and plots/)
Options:
  --stage N --stop-stage M      run stages N..M (default $stage..$stop_stage)
  --profile tiny|small|large    corpus size and model sizes (default $profile)
  --nj N                        parallel jobs (tiny/small: 2, large: 16)
  --num-workers 'N ...'         workers of the MA and BMUF runs, each N in the list (tiny: 2,
                                small: 8, large: 8)
  --workers-per-process K       the MA and BMUF runs' workers K to a process, batched (virtual
                                workers, docs/training.md; K must divide each N; default 1)
  --num-nodes M                 the MA and BMUF runs on M nodes, N / M workers on each, one job
                                of M nodes through cuda_cmd (docs/recipe.md; default 1)
  --archs 'dnn lstm'            network architectures
  --strategies 'single single+ema ... bmuf+lastk'   the table's rows (default: per profile)
                                single = 1 worker; X+ema, X+avg, X+lastk decode the EMA, the
                                cumulative average, the last-k-epochs average of run X
  --avg-start F --last-k K      the averaging controls (default 0.5; per profile)
  --controls-decoded-at 'N ...' decode +avg and +lastk rows only at these worker counts (1: the
                                single worker); the others report dev frame accuracy only
  --ma-lr-times-workers true|false  MA at N x the learning rate (default true)
  --seeds '1 2 3'               seeds of every network run (default 1)
  --grid 'ma: train.lr=0.1,0.4; bmuf: sync.block_momentum=0.875,0.75'   settings searched on
                                dev per rule, the best on dev frame accuracy is reported
  --grid-seed S                 search the grid on seed S only; the other --seeds train the
                                point chosen on S's dev frame accuracy
  --epochs N --block-size TAU --nnet-opts 'key=value ...'
  --warm-start-epochs K         the MA and BMUF runs start from the single run's model after
                                epoch K and train the epochs after it (needs the row single)
  --ema-half-life-frames 'F[,F...]'  the EMA's half-life; a list keeps one EMA each, all decoded,
                                the +ema row the one best on dev
  --dnn-opts '...' --lstm-opts '...'  config overrides of one architecture, after the profile's
  --nnet-dir DIR                where the network runs go (default $nnet_dir)
  --nnet-train-opts '...'       extra options of steps/nnet/train.sh (e.g. --torchrun-opts)
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
  --gmm-decode-opts '--beam 11 --lattice-beam 5'  --nnet-decode-opts '...'
  --gmm-decode-sets 'dev test'  the sets the GMMs decode ('': only the graph the networks use)
  --gmm-scoring-opts '--min-lmwt 7 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0'
  --nnet-scoring-opts '--min-lmwt 1 --max-lmwt 4 --lmwt-step 0.1 ...'  local/score.sh options; the
                                report picks each system's LM weight and penalty on dev, for test
  --results FILE --title TEXT   report file (default $results) and its title
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
    : "${nj:=2}" "${num_workers:=2}" "${seeds:=1}" "${epochs:=12}" "${block_size:=4}"
    # every kind of row once, the single worker's controls left to the larger profiles (CI time)
    : "${strategies:=single single+ema ma ma+ema bmuf bmuf+ema bmuf+avg bmuf+lastk}"
    : "${ema_half_life_frames:=1500}" "${last_k:=4}" "${mono_totgauss:=300}" "${num_leaves:=200}"
    : "${tri_totgauss:=1200}" "${mono_subset:=0}" "${gmm_systems:=mono tri1}"
    mono_opts="--num-iters 20"
    targets_opts="--max-lost 0.05"   # 230 utterances: a dozen unaligned is already 5%
    # Network frames are 30 ms (3 stacked): a larger acoustic scale than the GMMs' 0.1 keeps the
    # LM and transitions from outweighing the acoustics (at 0.1 most errors were deletions).
    : "${gmm_decode_opts:=--beam 9 --lattice-beam 3}"
    : "${nnet_decode_opts:=--acwt 0.5 --beam 10 --lattice-beam 4}"
    # GMMs: LM weights up to Kaldi's 17, Kaldi's three penalties (with per-utterance CMVN the
    # tiny tri1 needed LM weight 14: cut at 12 it lost to mono)
    : "${gmm_scoring_opts:=--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0}"
    # networks (acoustic scale 0.5, best near LM weight 2): steps of 0.1, so the chosen weight's
    # neighbours are within 10% of its acoustic scale from 1.0 up
    : "${nnet_scoring_opts:=--min-lmwt 0.5 --max-lmwt 4 --lmwt-step 0.1 --word-ins-penalty 0.0,0.5}"
    # conf/nnet/dnn.yaml's stabilizers (layer norm, variance-normalized input, momentum 0.5)
    # were found here: without them the DNN diverged at lr 0.1, and at momentum 0.9 so did BMUF
    profile_dnn_opts="model.hidden_layers=2 model.hidden_dim=256 data.minibatch_frames=128"
    # the LSTM needs many small updates: at 3 epochs of 16-chunk minibatches it barely left
    # chance (dev CER 98%); 4-chunk minibatches, lr 0.1 and 12 epochs (with the gradient clipping
    # of conf/nnet/lstm.yaml) brought every strategy under the GMMs on dev (measured)
    profile_lstm_opts="model.num_layers=1 model.hidden_size=256 model.proj_size=128 train.lr=0.1 data.chunks_per_minibatch=4"
    ;;
  small)
    # the paper's 8 workers: on 2 cores they train in about the time of 2 (worker processes
    # share the cores)
    : "${nj:=2}" "${num_workers:=8}" "${seeds:=1}" "${epochs:=3}" "${block_size:=16}"
    : "${ema_half_life_frames:=90000}" "${last_k:=2}" "${mono_totgauss:=1000}" "${num_leaves:=1200}"
    : "${tri_totgauss:=10000}" "${mono_subset:=2000}"
    # tri3 (SAT) is left to ladder/run.sh: its training, fMLLR alignment and two-pass decodes
    # (about 35 min on 2 cores) do not fit the 90 minutes with the networks (docs/gmm.md)
    : "${gmm_systems:=mono tri1 tri2}"
    mono_opts=
    targets_opts=
    : "${gmm_decode_opts:=--beam 11 --lattice-beam 5}"
    # Kaldi's beam 13 with max-active 1500, about twice as fast as 7000 for 0.6 CER points on
    # the whole dev set with the BMUF DNN (docs/decoding.md)
    : "${nnet_decode_opts:=--acwt 0.5 --beam 13 --lattice-beam 5 --max-active 1500}"
    : "${gmm_scoring_opts:=--min-lmwt 1 --max-lmwt 17 --word-ins-penalty 0.0,0.5}"
    : "${nnet_scoring_opts:=--min-lmwt 0.5 --max-lmwt 4 --lmwt-step 0.1 --word-ins-penalty 0.0,0.5}"
    # sized so that six trainings fit the 90 minutes of the whole recipe on 2 cores (estimated
    # from the tiny profile's frames per second)
    profile_dnn_opts="model.hidden_layers=3 model.hidden_dim=512"
    profile_lstm_opts="model.num_layers=1 model.hidden_size=256 model.proj_size=128 train.lr=0.1 data.chunks_per_minibatch=8"
    ;;
  large)
    : "${nj:=16}" "${num_workers:=8}" "${seeds:=1}" "${epochs:=10}" "${block_size:=16}"
    : "${ema_half_life_frames:=1000000}" "${last_k:=3}" "${mono_totgauss:=2000}" "${num_leaves:=3000}"
    : "${tri_totgauss:=40000}" "${mono_subset:=10000}" "${gmm_systems:=mono tri1 tri2 tri3}"
    mono_opts=
    targets_opts=
    : "${gmm_decode_opts:=--beam 13 --lattice-beam 8}" "${nnet_decode_opts:=--beam 13 --lattice-beam 8}"
    : "${gmm_scoring_opts:=--min-lmwt 7 --max-lmwt 17 --word-ins-penalty 0.0,0.5,1.0}"
    : "${nnet_scoring_opts:=--min-lmwt 5 --max-lmwt 17 --lmwt-step 0.5 --word-ins-penalty 0.0,0.5,1.0}"
    profile_dnn_opts=    # conf/nnet/dnn.yaml as it is (6 x 1024)
    profile_lstm_opts=   # conf/nnet/lstm.yaml as it is (3 x 1024, projection 256)
    ;;
  *) die "--profile must be tiny, small or large, not '$profile'" ;;
esac
: "${lm_text:=$corpus_dir/lm_text}" "${avg_start:=0.5}"
: "${strategies:=single single+ema single+avg single+lastk ma ma+ema bmuf bmuf+ema bmuf+avg bmuf+lastk}"
# the rows' names come from the registries of sync rules and averaged models: check them now,
# not after the training
emasr report --select --strategies "$strategies" > /dev/null
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
for n in $num_workers; do   # every N on M nodes in processes of K workers, checked before any work
  [[ $num_nodes =~ ^[1-9][0-9]*$ ]] && [ $((n % num_nodes)) -eq 0 ] || \
    die "--num-nodes '$num_nodes': expected a number of nodes that divides every" \
          "--num-workers ('$num_workers')"
  [[ $workers_per_process =~ ^[1-9][0-9]*$ ]] && [ $((n / num_nodes % workers_per_process)) -eq 0 ] || \
    die "--workers-per-process '$workers_per_process': expected a number of workers that" \
          "divides every --num-workers ('$num_workers') on each of --num-nodes $num_nodes"
done
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

log "profile $profile: nj $nj, $num_workers workers, seeds '$seeds', epochs $epochs"

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

# -- stages 8-10: the experiment driver (steps/nnet/experiment.sh), shared by every corpus ---------
if stage_on 8 || stage_on 9 || stage_on 10; then
  first=$(( stage > 8 ? stage - 7 : 1 )) last=$(( stop_stage < 10 ? stop_stage - 7 : 3 ))
  notes=$nnet_dir.notes
  mkdir -p "$(dirname "$notes")"
  {
    echo "command: \`$start_command\` (profile $profile, $num_workers workers, seeds $seeds)"
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
  averaging="ema=$ema_half_life_frames avg=$avg_start lastk=$last_k"
  arch_opts=
  for arch in $archs; do
    profile_opts_var=profile_${arch}_opts opts_var=${arch}_opts
    arch_opts="$arch_opts${arch_opts:+; }$arch: ${!profile_opts_var:-} ${!opts_var:-}"
  done
  run steps/nnet/experiment.sh --stage "$first" --stop-stage "$last" --archs "$archs" \
    --strategies "$strategies" --num-workers "$num_workers" \
    --workers-per-process "$workers_per_process" --num-nodes "$num_nodes" --seeds "$seeds" \
    --grid "$grid" --grid-seed "$grid_seed" \
    --epochs "$epochs" --block-size "$block_size" --averaging "$averaging" \
    --warm-start-epochs "$warm_start_epochs" \
    --ma-lr-times-workers "$ma_lr_times_workers" --nnet-opts "$nnet_opts" \
    --arch-opts "$arch_opts" --controls-decoded-at "$controls_decoded_at" \
    --nnet-train-opts "$nnet_train_opts" --nnet-decode-opts "$nnet_decode_opts" \
    --nnet-scoring-opts "$nnet_scoring_opts" --nj "$nj" --train-cmd "$train_cmd" \
    --decode-cmd "$decode_cmd" --cuda-cmd "$cuda_cmd" --results "$results" \
    --title "${title:-Results: $profile profile}" --report-notes "$notes" \
    --report-dirs "$gmm_dirs" \
    exp/nnet/targets data/train_fbank data/dev_fbank data/test_fbank "$nnet_graph" \
    "$nnet_trans_mdl" "$nnet_dir"
fi
log "done (stages $stage..$stop_stage)"
