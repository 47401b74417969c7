#!/usr/bin/env bash
# The experiment of a spec (conf/experiment/*.yaml, emasr.experiment.spec) on any corpus, given its
# network targets, features and graph: train the runs its plan lists (arch x sync rule x worker
# count x seed [x grid point], `emasr experiment plan`), decode dev and test with the global model
# and the averaged models the rows ask for (`emasr experiment decodes`), and write the report
# (`emasr experiment report`). Every corpus recipe (egs/aishell_sim, egs/aishell, egs/yesno) ends
# by calling it; the corpus recipe before it makes the data, lang, features, GMMs and targets.
# What an experiment is lives in the spec alone: this step only wires the plan to the steps.
#
# A training run and a decode dir each leave a done marker (<dir>/.done), so adding seeds or
# rows later only runs what is new; an interrupted training resumes from its checkpoint; a run the
# spec's earlier_counts record is not trained again (its committed record and counts stand in
# the report), unless a run still to train starts from its checkpoint (a warm start): that one
# trains again, and the recorded runs must have started from the same parameters. A decode is
# skipped only while its model file, graph and features are those it was decoded from (its
# inputs.sha256, utils/lib/inputs.sh): a retrained model is decoded again.
set -eEuo pipefail   # -E: the ERR trap of recipe.sh also sees failures inside functions

# Begin configuration section.
stage=1
stop_stage=3
nj=2
train_cmd=run.pl    # the launchers of cmd.sh
decode_cmd=run.pl
cuda_cmd=run.pl
report_notes=       # a file of lines added to the report's notes (the corpus recipe's provenance)
report_dirs=        # more exp dirs for the report (the GMM baselines)
# End configuration section.

help_message="Usage: $0 [options] <spec> <targets-dir> <train-data> <dev-data> <test-data> <graph-dir> <trans-mdl> <nnet-dir>
e.g.: $0 conf/experiment/small.yaml exp/nnet/targets data/train_fbank data/dev_fbank \\
        data/test_fbank exp/nnet_tree/graph exp/nnet_tree/final.mdl exp/nnet
The spec says what is trained, decoded and reported (emasr experiment --help); its resolved copy
goes to <nnet-dir>/experiment.yaml. Stages: 1 train the plan's runs
(<nnet-dir>/<arch>_<rule>[_n<N>]_s<seed>[_<tag><value>...]), 2 decode dev and test
(decode_{dev,test}[_<model>]), 3 report (the spec's results, with plots/ and counts/ beside it).
Options:
  --stage N --stop-stage M      run stages N..M (default $stage..$stop_stage)
  --nj N                        decoding jobs (default $nj)
  --train-cmd/--decode-cmd/--cuda-cmd CMD   the launchers (cmd.sh)
  --report-notes FILE           lines added to the report's notes
  --report-dirs 'exp/mono exp/tri1'   the GMM baselines of the report"

. "$(dirname "$0")/../../utils/parse_options.sh"
if [ $# -ne 8 ]; then
  printf '%b\n' "$help_message" >&2
  exit 1
fi
spec=$1; targets=$2; train_data=$3; dev_data=$4; test_data=$5; graph=$6; trans_mdl=$7
nnet_dir=$8
lock_dirs "$nnet_dir"

last_stage=3
. "$(dirname "$0")/../../utils/lib/recipe.sh"   # log, run, the ERR trap, stage_on, archive_sha256
check_stage_range
[ -f "$spec" ] || die "expected file $spec to exist (the experiment spec)"
emasr experiment validate "$spec" > /dev/null   # its names and numbers, before any work
mkdir -p "$nnet_dir"
# the spec as this experiment runs it, beside its runs, under the lock: the copy every stage reads
emasr experiment show --out "$nnet_dir/experiment.yaml" "$spec"
spec=$nnet_dir/experiment.yaml

train_runs() {
  # train every run of runs.list not trained yet
  local dir state opts init start args warm
  while IFS=$'\t' read -r dir state opts init; do
    case $state in
      done) log "$dir: trained already ($dir/.done); skipped"; continue ;;
      recorded) log "$dir: trained by an earlier piece (the spec's earlier_counts); skipped"
                continue ;;
    esac
    eval "args=($opts)"   # train.sh's options, shell-quoted (the spec's train_opts may quote)
    warm=()
    if [ -n "$init" ]; then
      warm=(--init-model "$init")
      [ -f "$init/state.pt" ] || die "$init: expected the one-worker run's checkpoint of the" \
        "warm start (the spec's warm_start_epochs, within its epochs)"
      # the plan again, now that the checkpoint is here: it refuses it where the earlier counts'
      # runs started from other parameters (a one-worker run trained again, not the same)
      emasr experiment plan --nnet-dir "$nnet_dir" "$spec" > /dev/null
    fi
    mkdir -p "$dir"
    # decodes of an earlier model in this dir are not decodes of the one trained now
    rm -f "$dir"/decode_*/.done
    start=$(date +%s)
    run steps/nnet/train.sh --cmd "$cuda_cmd" "${args[@]}" --resume true \
      --trans-mdl "$trans_mdl" ${warm[@]+"${warm[@]}"} \
      "$targets" "$train_data" "$dev_data" "$dir" < /dev/null
    echo "$(( $(date +%s) - start )) s" > "$dir/.done"
  done < "$nnet_dir/runs.list"
}

if stage_on 1; then
  log "training the runs of $spec (emasr experiment plan)"
  emasr experiment plan --lines --nnet-dir "$nnet_dir" "$spec" > "$nnet_dir/runs.list"
  train_runs
  # a grid searched on one seed (grid_seed): the other seeds' runs are planned once its grid is
  # trained, at the point it chose on dev
  emasr experiment plan --lines --nnet-dir "$nnet_dir" "$spec" > "$nnet_dir/runs.next"
  if ! cmp -s <(cut -f1 "$nnet_dir/runs.list") <(cut -f1 "$nnet_dir/runs.next"); then
    mv "$nnet_dir/runs.next" "$nnet_dir/runs.list"
    train_runs
  fi
  rm -f "$nnet_dir/runs.next"
fi

decoded_already() {
  # decoded_already DECODE_DIR OPTIONS: its done marker holds these decode options and every
  # input it was decoded from (its inputs.sha256: the model file, graph, features, reference)
  # still has the digest recorded; otherwise the reason is logged and it is decoded again
  [ -f "$1/.done" ] || return 1
  if [ "$(cat "$1/.done")" != "$2" ]; then
    log "$1: decoded with other options ($(cat "$1/.done")); decoding again"
    return 1
  fi
  if ! inputs_unchanged "$1"; then
    log "$1: not decoded from the inputs it has now ($changed); decoding again"
    return 1
  fi
}

if stage_on 2; then
  # the trained runs the report uses (with a grid, the best on dev) and the models their rows ask
  # for, one a line: "dir model" (final, or an averaged model's file: ema, ema_90000, avg ...)
  emasr experiment decodes --nnet-dir "$nnet_dir" "$spec" > "$nnet_dir/decodes.list"
  [ -s "$nnet_dir/decodes.list" ] || die "decoding: no trained network in $nnet_dir (train first)"
  log "decoding dev and test with $(cut -d' ' -f1 "$nnet_dir/decodes.list" | sort -u | wc -l)" \
    "network(s)"
  nnet_decode_opts=$(emasr experiment show --key decode.opts "$spec")
  nnet_scoring_opts=$(emasr experiment show --key decode.scoring_opts "$spec")
  while read -r dir model; do
    for set in dev test; do
      ddir=$dir/decode_$set
      [ "$model" = final ] || ddir=${ddir}_$model   # final.pt decodes to decode_<set>
      data=$dev_data
      [ "$set" = test ] && data=$test_data
      decode_opts="$nnet_decode_opts --scoring-opts '$nnet_scoring_opts' $graph $data"
      if decoded_already "$ddir" "$decode_opts"; then
        log "$ddir: decoded already, from the same model, graph and features; skipped"
        continue
      fi
      rm -f "$ddir/.done"
      # shellcheck disable=SC2086
      run steps/nnet/decode.sh --cmd "$decode_cmd" --nj "$nj" --model "$model" \
        --trans-mdl "$trans_mdl" $nnet_decode_opts --scoring-opts "$nnet_scoring_opts" \
        "$graph" "$data" "$ddir" < /dev/null
      echo "$decode_opts" > "$ddir/.done"
    done
  done < "$nnet_dir/decodes.list"
fi

if stage_on 3; then
  results=$(emasr experiment show --key results "$spec")
  log "report -> $results"
  train_time=0
  for f in "$nnet_dir"/*/.done; do
    [ -f "$f" ] && train_time=$((train_time + $(cut -d' ' -f1 "$f")))
  done
  machine="$(getconf _NPROCESSORS_ONLN) CPU cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
  if command -v nvidia-smi > /dev/null 2>&1; then
    machine="$machine, GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader | paste -sd, -)"
  fi
  machine="$machine; $(python -c 'import numpy, torch
print(f"torch {torch.__version__} (CPU capability {torch.backends.cpu.get_cpu_capability()}),",
      f"numpy {numpy.__version__}")')"
  # a different CPU or library can change the GMMs' alignments or the features, and rows are
  # comparable only between runs on the same inputs: the digests make a difference visible
  inputs="sha256 of the network targets ($targets/pdf.scp's archives)"
  inputs+=" $(archive_sha256 "$targets/pdf.scp"), of the training features"
  inputs+=" ($train_data/feats.scp's archives) $(archive_sha256 "$train_data/feats.scp")"
  notes=()
  if [ -n "$report_notes" ]; then
    while IFS= read -r line; do [ -z "$line" ] || notes+=(--note "$line"); done < "$report_notes"
  fi
  mkdir -p exp/report/log
  # shellcheck disable=SC2086
  run $train_cmd exp/report/log/report.log \
    emasr experiment report --nnet-dir "$nnet_dir" ${notes[@]+"${notes[@]:0:2}"} \
      --note "machine: $machine" --note "inputs: $inputs" ${notes[@]+"${notes[@]:2}"} \
      --note "network training ${train_time} s in all (the runs trained in $nnet_dir)" \
      "$spec" $report_dirs
  log "wrote $results and $(dirname "$results")/plots/"
fi
