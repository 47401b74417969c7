#!/usr/bin/env bash
# Sourced by the steps that grow a decision tree (train_deltas.sh, train_lda_mllt.sh,
# nnet/build_tree.sh): from the summed tree statistics $dir/treeacc, questions by clustering the
# phone sets, the tree, and a model initialized from it. The caller sets cmd, dir, lang,
# num_leaves, tree_thresh, tree_min_count and cluster_thresh.

questions_and_tree() {
  local extra=()
  [ -s "$lang/phones/extra_questions.int" ] && \
    extra=(--extra-questions "$lang/phones/extra_questions.int")
  echo "$0: getting questions for tree-building, via clustering"
  $cmd "$dir/log/questions.log" \
    emasr cluster-phones ${extra[@]+"${extra[@]}"} \
      "$lang/phones/sets.int" "$dir/questions.int" "$dir/treeacc"
  echo "$0: building the tree"
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
