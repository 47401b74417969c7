# The settings of egs/aishell_sim/run.sh (which sources this file), once its options are parsed:
# the profile's defaults (conf/profile/<profile>.sh) for what the command line left empty, then
# what follows from them: the GMM ladder checked (docs/gmm.md), tri3's fMLLR, the networks' tree.

recipe_settings() {
  [ -f "conf/profile/$profile.sh" ] || die "--profile must be tiny, small or large, not '$profile'"
  # shellcheck disable=SC1090
  . "conf/profile/$profile.sh"
  : "${lm_text:=$corpus_dir/lm_text}" "${spec:=conf/experiment/$profile.yaml}"
  : "${cmvn_per_utt:=$simulate}"   # the simulator draws each utterance's channel (docs/recipe.md)
  gmm_ladder_checked
  nnet_tree_checked
  nnet_inputs
  sets="train dev test"
  gmm_lang=data/lang_test
}

gmm_ladder_checked() {
  # the ladder is a prefix of mono -> tri1 -> tri2 -> tri3: each system trains on the one before
  case " $gmm_systems " in
    " mono tri1 "|" mono tri1 tri2 "|" mono tri1 tri2 tri3 ") ;;
    *) die "--gmm-systems '$gmm_systems': expected 'mono tri1', 'mono tri1 tri2' or" \
           "'mono tri1 tri2 tri3'" ;;
  esac
  case " $gmm_systems " in *" tri3 "*)
    # one-utterance pseudo-speakers are too short for Kaldi's full transforms (docs/gmm.md)
    if [ "$cmvn_per_utt" = true ]; then
      : "${fmllr_opts:=--fmllr-update-type diag --fmllr-min-count 100}"
    fi ;;
  esac
}

nnet_tree_checked() {
  # the networks' own tree (Kaldi chain's way) unless they can share the last GMM's: a 3-state
  # phone cannot pass in one frame at 30 ms, so the kaldi topology needs a tree of their own
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
}

nnet_inputs() {
  # what the networks train and decode with: the GMM whose alignments make their targets, its
  # aligner (tri3 needs its speakers' transforms first), their tree, graph and transition model
  nnet_gmm=${gmm_systems##* }
  nnet_align=steps/align_si.sh
  [ "$nnet_gmm" = tri3 ] && nnet_align="steps/align_fmllr.sh $fmllr_opts"
  if [ "$nnet_tree_leaves" -gt 0 ]; then
    nnet_tree=exp/nnet_tree      # their own tree, pdfs and HCLG
    nnet_graph=$nnet_tree/graph
    nnet_trans_mdl=$nnet_tree/final.mdl
  else                           # the GMM's tree, pdfs and HCLG
    nnet_tree=
    nnet_graph=exp/$nnet_gmm/graph
    nnet_trans_mdl=exp/$nnet_gmm/final.mdl
  fi
}

has_gmm() {
  # has_gmm SYSTEM: true when the ladder reaches SYSTEM
  case " $gmm_systems " in *" $1 "*) return 0 ;; esac
  return 1
}
