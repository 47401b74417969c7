# egs/aishell_sim/run.sh's experiment options as `--set key=value` of its spec (sourced by it). The
# experiment is the spec (conf/experiment/<profile>.yaml, docs/experiment.md); these options are
# only short names for its keys, and --spec-opts reaches any key.

# option variable -> the spec key it sets when given. The architectures' overrides come before
# `archs`: an architecture that --archs leaves out takes its options along.
spec_option_keys=(
  dnn_opts:archs.dnn.overrides+ lstm_opts:archs.lstm.overrides+ archs:archs strategies:rows
  num_workers:workers workers_per_process:workers_per_process num_nodes:nodes seeds:seeds
  grid:grid grid_seed:grid_seed epochs:epochs block_size:block_size
  warm_start_epochs:warm_start_epochs ema_half_life_frames:averages.ema avg_start:averages.avg
  last_k:averages.lastk nnet_opts:overrides+ nnet_train_opts:train_opts
  nnet_decode_opts:decode.opts nnet_scoring_opts:decode.scoring_opts
  controls_decoded_at:decode.controls_at results:results title:title
)

spec_sets() {
  # spec_set_args=(--set key=value ...): the experiment options given, then --spec-opts' items.
  # --spec-opts is shell words, one key=value each, quoted as on a command line, so a value
  # may hold spaces: "seeds='1 2 3' title='A title' grid='ma: train.lr=0.1,0.4; bmuf: ...'"
  local pair var items item
  spec_set_args=()
  for pair in "${spec_option_keys[@]}"; do
    var=${pair%%:*}
    [ -z "${!var}" ] || spec_set_args+=(--set "${pair#*:}=${!var}")
  done
  [ "$ma_lr_times_workers" = true ] || spec_set_args+=(--set "rule_overrides.ma=[]")
  eval "items=($spec_opts)" || die "--spec-opts \"$spec_opts\": expected shell words"
  for item in ${items[@]+"${items[@]}"}; do
    [[ $item == *=* ]] || die "--spec-opts: '$item' is not key=value"
    spec_set_args+=(--set "$item")
  done
}
