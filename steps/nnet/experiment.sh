#!/usr/bin/env bash
# The experiment of the paper on any corpus, given its network targets, features and graph: train
# the grid (arch x strategy x worker count x seed [x tuned settings]), decode dev and test with the
# global model and the averaged models the rows ask for, and write the report. Every corpus recipe
# (egs/aishell_sim, egs/aishell, egs/yesno) ends by calling it; the corpus recipe before it makes
# the data, lang, features, GMM ladder and targets.
#
# A training run and a decode dir each leave a done marker (<dir>/.done), so adding seeds or
# strategies later only runs what is new; an interrupted training resumes from its checkpoint. A
# decode is skipped only while its model file, graph and features are those it was decoded from
# (its inputs.sha256, utils/lib/inputs.sh): a retrained model is decoded again.
set -eEuo pipefail   # -E: the ERR trap of recipe.sh also sees failures inside functions

# Begin configuration section.
stage=1
stop_stage=3
archs="dnn lstm"
strategies=         # the table's rows: a sync rule, optionally +<averaged model> (required)
num_workers=2       # workers of the parallel runs, a list: "2 4 8" trains each at every N
workers_per_process=1  # K: the parallel runs' workers, K to a process (K divides every N)
num_nodes=1         # M: the parallel runs' nodes, N / M workers on each (train.sh --num-nodes)
seeds=1
grid=               # settings searched on dev per rule (emasr tuning-grid): every point trained,
                    # the best on dev frame accuracy reported, e.g. "ma: train.lr=0.1,0.4"
grid_seed=          # search the grid on this seed only: the other seeds train the point chosen
                    # there (its best dev frame accuracy) (default: every seed searches the grid)
epochs=
block_size=
warm_start_epochs=  # k: every parallel run starts from its one-worker run's model after epoch k
                    # (the `single` run of its arch and seed, trained first; its epoch-end
                    # checkpoint, train.sh --init-model) and trains the epochs after k: k epochs
                    # of one worker and the rest of N workers, the epochs of data of one run
averaging=          # the averaged models' values, NAME=VALUE: "ema=90000 avg=0.5 lastk=2"
                    # (ema=30000,90000: one EMA each; a name not given takes its default)
ma_lr_times_workers=true  # MA workers at N x the learning rate (Kaldi's rule)
nnet_config_dir=conf/nnet # <arch>.yaml of each architecture
nnet_opts=          # config overrides of every run
arch_opts=          # an architecture's overrides, after nnet_opts: "dnn: k=v k=v; lstm: k=v"
controls_decoded_at=  # worker counts whose +avg/+lastk rows are decoded (default: all)
nnet_train_opts=    # extra options of steps/nnet/train.sh (they may quote their own values)
nnet_decode_opts=   # steps/nnet/decode.sh beams and --acwt
nnet_scoring_opts=  # local/score.sh options (LM weights and penalties, chosen on dev)
nj=2
train_cmd=run.pl    # the launchers of cmd.sh
decode_cmd=run.pl
cuda_cmd=run.pl
results=RESULTS.md  # the report (plots/ and counts/ beside it)
title=Results
report_notes=       # a file of lines added to the report's notes (the corpus recipe's provenance)
report_dirs=        # more exp dirs for the report (the GMM baselines)
# End configuration section.

help_message="Usage: $0 [options] <targets-dir> <train-data> <dev-data> <test-data> <graph-dir> <trans-mdl> <nnet-dir>
e.g.: $0 --archs 'dnn lstm' --strategies 'single single+ema bmuf bmuf+ema' --num-workers 8 \\
        --averaging 'ema=90000' exp/nnet/targets data/train_fbank data/dev_fbank data/test_fbank \\
        exp/nnet_tree/graph exp/nnet_tree/final.mdl exp/nnet
Stages: 1 train the grid (<nnet-dir>/<arch>_<rule>[_n<N>]_s<seed>[_<tag><value>...]), 2 decode dev and test
(decode_{dev,test}[_<model>]), 3 report (--results, with plots/ and counts/ beside it).
Options:
  --stage N --stop-stage M      run stages N..M (default $stage..$stop_stage)
  --archs 'dnn lstm tdnn'       architectures (emasr.nnet.models.ARCHITECTURES)
  --strategies 'single bmuf+ema ...'  the rows: a sync rule (emasr.nnet.sync.RULES), optionally
                                +<averaged model> (emasr.nnet.averages.AVERAGED_MODELS)
  --num-workers 'N ...' --workers-per-process K --seeds '1 2 3'
  --num-nodes M                 the parallel runs on M nodes, N / M workers each (train.sh)
  --grid 'ma: train.lr=0.1,0.4; bmuf: sync.block_momentum=0.875,0.75'  settings searched on dev,
                                per rule (emasr tuning-grid: the settings and their dir tags)
  --grid-seed S                 search the grid on seed S only (one of --seeds); the other seeds
                                train the point chosen on S's dev frame accuracy (once S's grid
                                is trained)
  --epochs N --block-size TAU   the runs' epochs and tau (default: the configs')
  --warm-start-epochs K         start the parallel runs from the one-worker run's model after
                                epoch K (a row 'single', no grid of its own) and train the
                                epochs after it (steps/nnet/train.sh --init-model)
  --averaging 'ema=F avg=0.5 lastk=2'  the averaged models' values (emasr averaging-opts)
  --ma-lr-times-workers true|false  --nnet-config-dir DIR  --nnet-opts '...'
  --arch-opts 'dnn: k=v ...; lstm: k=v ...'  one architecture's overrides
  --controls-decoded-at 'N ...' --nnet-train-opts '...' --nnet-decode-opts '...'
  --nnet-scoring-opts '...' --nj N --train-cmd/--decode-cmd/--cuda-cmd CMD
  --results FILE --title TEXT --report-notes FILE --report-dirs 'exp/mono exp/tri1'"

. "$(dirname "$0")/../../utils/parse_options.sh"
if [ $# -ne 7 ]; then
  printf '%b\n' "$help_message" >&2
  exit 1
fi
targets=$1; train_data=$2; dev_data=$3; test_data=$4; graph=$5; trans_mdl=$6; nnet_dir=$7
lock_dirs "$nnet_dir"

last_stage=3
. "$(dirname "$0")/../../utils/lib/recipe.sh"   # log, run, the ERR trap, stage_on, archive_sha256
check_stage_range
[ -n "$strategies" ] || die "--strategies: expected the table's rows"
# the rows' names come from the registries: checked now, not after the training
emasr report --select --strategies "$strategies" > /dev/null
for n in $num_workers; do   # every N on M nodes in processes of K workers, checked before any work
  [[ $num_nodes =~ ^[1-9][0-9]*$ ]] && [ $((n % num_nodes)) -eq 0 ] || \
    die "--num-nodes '$num_nodes': expected a number of nodes that divides every" \
          "--num-workers ('$num_workers')"
  [[ $workers_per_process =~ ^[1-9][0-9]*$ ]] && [ $((n / num_nodes % workers_per_process)) -eq 0 ] || \
    die "--workers-per-process '$workers_per_process': expected a number of workers that" \
          "divides every --num-workers ('$num_workers') on each of --num-nodes $num_nodes"
done

base_strategies() {
  # the training runs behind the rows: "ma ma+ema bmuf+avg" -> "ma bmuf" (a run serves every
  # averaged model of its sync rule)
  local s out=""
  for s in $strategies; do
    s=${s%%+*}
    case " $out " in *" $s "*) ;; *) out="$out $s" ;; esac
  done
  echo $out
}

averaged_models() {
  # averaged_models BASE: the averaged models the rows ask of BASE's runs: "ema avg"
  local s out=""
  for s in $strategies; do
    case "$s" in "$1"+*) out="$out ${s#*+}" ;; esac
  done
  echo $out
}

grid_points() {
  # grid_points BASE: BASE's runs of --grid, one a line: "dir-suffix overrides" ("-": no grid)
  printf '%s\n' "${grid_of_rule[$1]}"
}

workers_of() {
  # workers_of BASE: the worker counts of BASE's runs (single trains one worker)
  [ "$1" = single ] && echo 1 || echo $num_workers
}

run_prefix() {
  # run_prefix ARCH BASE N: a run's dir up to its seed ("exp/nnet/dnn_ma_n8")
  local dir=$nnet_dir/${1}_$2
  [ "$2" = single ] || dir=${dir}_n$3
  echo "$dir"
}

seed_points() {
  # seed_points ARCH BASE N SEED: the grid points SEED trains, one a line: "dir-suffix overrides"
  # (every point, or with --grid-seed the one chosen on the grid seed, once that is known)
  if [ -z "$grid_seed" ] || [ "$4" = "$grid_seed" ]; then
    grid_points "$2"
  elif [ -n "${point_chosen["$1 $2 $3"]+set}" ]; then
    printf '%s\n' "${point_chosen["$1 $2 $3"]}"
  fi
}

nnet_runs() {
  # every run the options ask for, one a line: "dir arch base workers seed overrides..."
  local arch base seed n dir suffix overrides
  for arch in $archs; do
    for base in $(training_bases); do
      for n in $(workers_of "$base"); do
        for seed in $seeds; do
          while read -r suffix overrides; do
            dir=$(run_prefix "$arch" "$base" "$n")_s$seed
            [ "$suffix" = - ] || dir=$dir$suffix
            echo "$dir $arch $base $n $seed $overrides"
          done < <(seed_points "$arch" "$base" "$n" "$seed")
        done
      done
    done
  done
}

declare -A point_chosen   # "arch base N" -> the grid point chosen on --grid-seed
choose_grid_points() {
  # with --grid-seed: each run's point among the grid seed's trained runs, the best on dev frame
  # accuracy of the global model (emasr report --select); unknown while any of them is untrained.
  # A point once chosen stays (the second pass of stage 1 only looks at the unknown ones)
  local arch base n prefix suffix overrides dirs trained best
  [ -n "$grid_seed" ] || return 0
  for arch in $archs; do
    for base in $(base_strategies); do
      for n in $(workers_of "$base"); do
        if [ -n "${point_chosen["$arch $base $n"]+set}" ]; then
          continue
        elif [ "$(grid_points "$base")" = - ]; then   # nothing searched
          point_chosen["$arch $base $n"]=-
          continue
        fi
        prefix=$(run_prefix "$arch" "$base" "$n")_s$grid_seed
        dirs=()
        trained=true
        while read -r suffix overrides; do
          dirs+=("$prefix$suffix")
          [ -f "$prefix$suffix/.done" ] || trained=false
        done < <(grid_points "$base")
        $trained || continue
        best=$(emasr report --select --archs "$arch" --strategies "$base" "${dirs[@]}")
        [ -n "$best" ] || die "${dirs[*]}: emasr report --select chose none of them"
        suffix=${best#"$prefix"}
        point_chosen["$arch $base $n"]=$(grid_points "$base" | awk -v s="${suffix:--}" '$1 == s')
        log "$prefix*: the grid point chosen on dev for the other seeds: ${suffix:--}"
      done
    done
  done
}

training_bases() {
  # the sync rules of the runs, in training order: with a warm start the one-worker runs first,
  # the parallel runs starting from them
  local base
  if [ -n "$warm_start_epochs" ]; then
    echo single
    for base in $(base_strategies); do [ "$base" = single ] || echo "$base"; done
  else
    base_strategies
  fi
}

warm_start_of() {
  # warm_start_of ARCH SEED: the one-worker run's epoch-end checkpoint a parallel run starts from
  printf '%s/checkpoints/epoch%03d-block000000\n' "$(run_prefix "$1" single 1)_s$2" \
    "$warm_start_epochs"
}

nnet_dirs() {
  nnet_runs | cut -d' ' -f1
}

arch_overrides() {
  # arch_overrides ARCH: its part of --arch-opts ("dnn: k=v; lstm: k=v" -> the k=v of ARCH)
  local part
  IFS=';' read -ra parts <<< "$arch_opts"
  for part in ${parts[@]+"${parts[@]}"}; do
    part=${part#"${part%%[![:space:]]*}"}
    case "$part" in "$1:"*) echo "${part#*:}" ;; esac
  done
}

averaging_opts() {
  # averaging_opts BASE: the overrides that keep the averaged models BASE's rows ask for, each
  # with its --averaging value (emasr averaging-opts: the registry's key and default)
  local name value args=()
  for name in $(averaged_models "$1"); do
    value=$(tr ' ' '\n' <<< "$averaging" | sed -n "s/^$name=//p" | head -1)
    args+=("$name${value:+=$value}")
  done
  [ ${#args[@]} -eq 0 ] || emasr averaging-opts "${args[@]}"
}

if [ -n "$grid_seed" ] && ! [[ " $seeds " == *" $grid_seed "* ]]; then
  die "--grid-seed '$grid_seed': expected one of --seeds ('$seeds')"
fi
# each rule's grid points, read once (and the whole grid checked before any work: its values,
# its keys, its rules against the rows')
declare -A grid_of_rule
for base in $(base_strategies); do
  grid_of_rule[$base]=$(emasr tuning-grid --grid "$grid" --rules "$(base_strategies)" "$base")
done
if [ -n "$warm_start_epochs" ]; then   # the one-worker runs the parallel ones start from
  [[ $warm_start_epochs =~ ^[1-9][0-9]*$ ]] || \
    die "--warm-start-epochs '$warm_start_epochs': expected a number of epochs >= 1"
  [[ " $(base_strategies) " == *" single "* ]] || \
    die "--warm-start-epochs: expected a row 'single' in --strategies (the one-worker runs" \
          "the parallel runs start from)"
  [ "${grid_of_rule[single]}" = - ] || \
    die "--warm-start-epochs: the 'single' runs have a --grid; a warm start needs one" \
          "one-worker run per arch and seed"
fi

train_runs() {
  # train every run of runs.list not trained yet
  local dir arch base workers seed grid_opts ma_opts set_opts start nodes
  while read -r dir arch base workers seed grid_opts; do
    if [ -f "$dir/.done" ]; then
      log "$dir: trained already ($dir/.done); skipped"
      continue
    fi
    ma_opts=
    [ "$base" = ma ] && [ "$ma_lr_times_workers" = true ] && ma_opts="sync.lr_times_workers=true"
    # the grid point last: it is what the run searches (tau too: --block-size is an override)
    set_opts="train.init_seed=$seed data.seed=$seed ${block_size:+sync.block_size=$block_size}"
    set_opts="$set_opts $nnet_opts $(arch_overrides "$arch") $ma_opts"
    set_opts="$set_opts $(averaging_opts "$base") $grid_opts"
    mkdir -p "$dir"
    # decodes of an earlier model in this dir are not decodes of the one trained now
    rm -f "$dir"/decode_*/.done
    start=$(date +%s)
    nodes=$([ "$base" = single ] && echo 1 || echo "$num_nodes")
    warm=()
    if [ -n "$warm_start_epochs" ] && [ "$base" != single ]; then
      warm=(--init-model "$(warm_start_of "$arch" "$seed")")
      [ -f "${warm[1]}/state.pt" ] || die "${warm[1]}: expected the one-worker run's" \
        "checkpoint after epoch $warm_start_epochs (its epochs: --epochs)"
    fi
    run steps/nnet/train.sh --cmd "$cuda_cmd" --nnet-config "$nnet_config_dir/$arch.yaml" \
      --num-workers "$((workers / nodes))" --num-nodes "$nodes" --strategy "$base" \
      ${epochs:+--epochs "$epochs"} \
      --workers-per-process "$([ "$base" = single ] && echo 1 || echo "$workers_per_process")" \
      --set-opts "$set_opts" --resume true --trans-mdl "$trans_mdl" ${warm[@]+"${warm[@]}"} \
      ${train_extra[@]+"${train_extra[@]}"} "$targets" "$train_data" "$dev_data" "$dir" < /dev/null
    echo "$(( $(date +%s) - start )) s" > "$dir/.done"
  done < "$nnet_dir/runs.list"
}

if stage_on 1; then
  log "training: archs '$archs', runs '$(base_strategies)', seeds '$seeds'"
  eval "train_extra=($nnet_train_opts)"   # the options may quote their own values
  mkdir -p "$nnet_dir"
  choose_grid_points
  nnet_runs > "$nnet_dir/runs.list"
  train_runs
  if [ -n "$grid_seed" ]; then   # the other seeds, at the points the grid seed chose
    choose_grid_points
    nnet_runs > "$nnet_dir/runs.list"
    train_runs
  fi
else
  choose_grid_points
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
  # with a grid, only the runs the report uses (best on dev) are decoded
  candidates=()
  for dir in $(nnet_dirs); do [ -f "$dir/.done" ] && candidates+=("$dir"); done
  if [ ${#candidates[@]} -eq 0 ]; then
    die "decoding: no trained network in $nnet_dir (train first)"
  fi
  selected=$(emasr report --select --archs "$archs" --strategies "$strategies" "${candidates[@]}")
  log "decoding dev and test with $(echo $selected | wc -w) network(s)"
  for dir in $selected; do
    read -r _ _ base workers _ < <(nnet_runs | grep "^$dir ")
    models=final   # and the averaged models the rows ask for (ema.pt or ema_<frames>.pt, avg.pt ..)
    for model in $(averaged_models "$base"); do
      if [ "$model" != ema ] && [ -n "$controls_decoded_at" ] && \
         ! [[ " $controls_decoded_at " == *" $workers "* ]]; then
        continue   # a control at a worker count left to its dev frame accuracy
      fi
      kept=$(cd "$dir" && ls "$model.pt" "${model}"_*.pt 2> /dev/null | sed 's/\.pt$//' || true)
      [ -n "$kept" ] || die "expected $dir/$model.pt or ${model}_*.pt (the row $base+$model)"
      models="$models $kept"   # several EMAs (one per half-life): the report picks one on dev
    done
    for model in $models; do
      for set in dev test; do
        ddir=$dir/decode_$set
        [ "$model" = final ] || ddir=${ddir}_$model
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
          "$graph" "$data" "$ddir"
        echo "$decode_opts" > "$ddir/.done"
      done
    done
  done
fi

if stage_on 3; then
  log "report -> $results"
  reported=()
  for dir in $(nnet_dirs); do [ -f "$dir/conf.yaml" ] && reported+=("$dir"); done
  for dir in $report_dirs; do [ -d "$dir/decode_dev" ] && reported+=("$dir"); done
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
  run $train_cmd exp/report/log/report.log \
    emasr report --out "$results" --archs "$archs" --strategies "$strategies" --title "$title" \
      ${notes[@]+"${notes[@]:0:2}"} --note "machine: $machine" --note "inputs: $inputs" \
      ${notes[@]+"${notes[@]:2}"} --note "network training ${train_time} s in all" \
      ${reported[@]+"${reported[@]}"}
  log "wrote $results and $(dirname "$results")/plots/"
fi
