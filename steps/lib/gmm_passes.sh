#!/usr/bin/env bash
# The training passes of a triphone GMM system on transformed features, Kaldi's loop in
# train_lda_mllt.sh and train_sat.sh: pass x realigns on $realign_iters, lets the caller's hook
# re-estimate its feature transform (MLLT, fMLLR), then accumulates statistics and re-estimates
# the model, mixing up to $numgauss Gaussians. Sourced by those two steps; the caller sets cmd,
# dir, lang, sdata, nj, stage, num_iters, realign_iters, max_iter_inc, power, max_failed,
# totgauss, num_leaves and the arrays feat_opts and align_opts.

init_numgauss() {
  # The number of Gaussians starts at the number of leaves (Kaldi's numgauss=$numleaves) and
  # grows by incgauss per pass up to max_iter_inc.
  if [ -f "$dir/1.mdl" ]; then
    numgauss=$(emasr gmm-info "$dir/1.mdl" | awk '/number of pdfs/ {print $NF}')
  else
    numgauss=$num_leaves
  fi
  incgauss=$(( (totgauss - numgauss) / max_iter_inc ))
}

# gmm_training_passes HOOK: passes 1 .. num_iters-1 from $dir/1.mdl and $dir/ali.JOB.gz to
# $dir/$num_iters.mdl. "HOOK x" runs on every pass, after the realignment and before the
# statistics (also on passes below --stage, so that it can set feat_opts to the transform that
# pass used); pass_note, which the caller or the hook may set, is shown in each pass's summary.
gmm_training_passes() {
  local hook=$1 x=1 like line
  while [ "$x" -lt "$num_iters" ]; do
    if [ "$stage" -le "$x" ] && [[ " $realign_iters " == *" $x "* ]]; then
      log "pass $x: aligning data"
      $cmd JOB=1:"$nj" "$dir/log/align.$x.JOB.log" \
        emasr gmm-align "${feat_opts[@]}" "${align_opts[@]}" \
          "$dir/$x.mdl" "$dir/tree" "$lang" "$sdata/JOB" "$dir/ali.JOB.gz"
    fi
    "$hook" "$x"
    if [ "$stage" -le "$x" ]; then
      $cmd JOB=1:"$nj" "$dir/log/acc.$x.JOB.log" \
        emasr gmm-acc-stats-ali "${feat_opts[@]}" --max-skipped "$max_failed" \
          "$dir/$x.mdl" "$sdata/JOB" "$dir/ali.JOB.gz" "$dir/$x.JOB.acc"
      $cmd "$dir/log/update.$x.log" \
        emasr gmm-est --seed "$x" --write-occs "$dir/$((x + 1)).occs" --mix-up "$numgauss" \
          --power "$power" "$dir/$x.mdl" "$dir/$((x + 1)).mdl" \
          $(seq -f "$dir/$x.%g.acc" 1 "$nj")
      rm -f "$dir/$x.mdl" "$dir/$x".*.acc "$dir/$x.occs"
      like=$(grep -ho "avg like per frame = [-0-9.e+]*" "$dir/log/update.$x.log" |
             tail -n 1 || true)
      line="pass $x done: ${like:-no likelihood in $dir/log/update.$x.log}"
      line+="$(logdet_note "$x")${pass_note:+ ($pass_note)}"
      log "$line"
    fi
    if [ "$x" -le "$max_iter_inc" ]; then
      numgauss=$((numgauss + incgauss))
    fi
    x=$((x + 1))
  done
}

logdet_note() {
  # With per-speaker transforms (SAT), ", + logdet D = L": the likelihood of the unadapted
  # features, comparable across fMLLR re-estimations (Kaldi's train_sat.sh summary).
  { grep -h "Overall average logdet is\|overall log-likelihood per frame is" \
      "$dir/log/acc.$1".*.log || true; } |
    awk '/logdet/ { d += $(NF-3) * $(NF-1); n += $(NF-1) }
         /log-likelihood/ { l += $(NF-3) * $(NF-1); m += $(NF-1) }
         END { if (n > 0 && m > 0) printf ", + logdet %.5f = %.5f", d / n, l / m + d / n }'
}

# link_final NAME..: $dir/final.NAME -> $num_iters.NAME for each NAME (mdl, occs, alimdl).
link_final() {
  local name
  for name in "$@"; do
    rm -f "$dir/final.$name"
    ln -s "$num_iters.$name" "$dir/final.$name"
  done
}
