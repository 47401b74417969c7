# Sourced by the ladder's scripts (from the recipe dir, egs/aishell_sim).
workdir() {
  # workdir DIR: a work dir for run.sh --workdir, its shared parts linked to the recipe's
  mkdir -p "$1"
  for f in conf steps utils local cmd.sh; do
    [ -e "$1/$f" ] || ln -s "$PWD/$f" "$1/$f"
  done
  # the recipe's path.sh finds the repository from its own location: here, name it
  echo ". \"$(cd ../.. && pwd)/path.sh\"" > "$1/path.sh"
}

dev_chosen_hyp() {
  # dev_chosen_hyp DIR SET: DIR/decode_SET's hypotheses at the LM weight and penalty chosen on
  # DIR/decode_dev (its best_cer names cer_<lmwt>_<penalty>)
  local best lmwt penalty
  best=$(awk '{print $NF}' "$1/decode_dev/scoring_kaldi/best_cer")
  best=${best##*/cer_}
  lmwt=${best%_*} penalty=${best#*_}
  echo "$1/decode_$2/scoring_kaldi/penalty_$penalty/$lmwt.txt"
}

piece() {
  # piece NAME COMMAND...: run COMMAND once; $pieces/NAME.done records its seconds, and a later
  # call with the same NAME skips it
  local name=$1 t0
  shift
  [ -f "$pieces/$name.done" ] && { log "$name done already"; return; }
  t0=$(date +%s)
  "$@"
  echo "$(( $(date +%s) - t0 )) s" > "$pieces/$name.done"
}
