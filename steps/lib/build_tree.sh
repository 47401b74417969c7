#!/usr/bin/env bash
# Sourced by the steps that grow a decision tree (train_deltas.sh, train_lda_mllt.sh,
# train_sat.sh, nnet/build_tree.sh): from the summed tree statistics $dir/treeacc, questions by
# clustering the phone sets, the tree, and a model initialized from it. The caller sets cmd, dir,
# lang, num_leaves, tree_thresh, tree_min_count and cluster_thresh; tree_stats and
# convert_alignments also use nj, sdata, alidir, max_failed and the array feat_opts.

tree_stats() {
  # $dir/treeacc from the alignments of $alidir (only its model's transitions are used: the
  # features, feat_opts, are the new system's)
  log "accumulating tree stats"
  $cmd JOB=1:"$nj" "$dir/log/acc_tree.JOB.log" \
    emasr acc-tree-stats "${feat_opts[@]}" --max-skipped "$max_failed" \
      --ci-phones "$lang/phones/context_indep.csl" \
      "$alidir/final.mdl" "$sdata/JOB" "$alidir/ali.JOB.gz" "$dir/JOB.treeacc"
  $cmd "$dir/log/sum_tree_acc.log" \
    emasr sum-tree-stats "$dir/treeacc" $(seq -f "$dir/%g.treeacc" 1 "$nj")
  rm -f "$dir"/*.treeacc
}

convert_alignments() {
  log "converting alignments from $alidir to use current tree"
  $cmd JOB=1:"$nj" "$dir/log/convert.JOB.log" \
    emasr convert-ali "$alidir/final.mdl" "$dir/1.mdl" "$dir/tree" \
      "$alidir/ali.JOB.gz" "$dir/ali.JOB.gz"
}

questions_and_tree() {
  local extra=()
  [ -s "$lang/phones/extra_questions.int" ] && \
    extra=(--extra-questions "$lang/phones/extra_questions.int")
  log "getting questions for tree-building, via clustering"
  $cmd "$dir/log/questions.log" \
    emasr cluster-phones ${extra[@]+"${extra[@]}"} \
      "$lang/phones/sets.int" "$dir/questions.int" "$dir/treeacc"
  log "building the tree"
  $cmd "$dir/log/build_tree.log" \
    emasr build-tree --max-leaves "$num_leaves" --thresh "$tree_thresh" \
      --min-count "$tree_min_count" --cluster-thresh "$cluster_thresh" \
      "$lang/phones/roots.int" "$dir/questions.int" "$lang/topo" "$dir/tree" "$dir/treeacc"
}

init_tree_model() {
  # $dir/1.mdl (one Gaussian per pdf from the tree statistics) and $dir/1.occs
  $cmd "$dir/log/init_model.log" \
    emasr gmm-init-model --write-occs "$dir/1.occs" "$dir/tree" "$lang/topo" "$dir/1.mdl" \
      "$dir/treeacc"
}
