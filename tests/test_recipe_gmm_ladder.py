"""The recipe's GMM ladder past tri1 and the networks' own tree on the tiny profile, stages 5-7 on
the default run's data and monophones (tests/test_recipe_tiny.py checks the topologies): mono ->
tri1 (deltas) -> tri2 (LDA+MLLT), dev decoded by each, and the network targets from tri2's
alignments converted to a network tree at 30 ms with its own HCLG.

tri3 (SAT) is left out for CI time (it doubles this test): tests/test_sat.py runs its steps
(train_sat.sh, align_fmllr.sh, decode_fmllr.sh) on yesno, and egs/aishell_sim/ladder/run.sh runs the
recipe's tri3 stages on the small profile."""
from __future__ import annotations

import re

import pytest

from conftest import run_script
from emasr.ali.targets import load_targets
from emasr.kaldi.model_io import read_model, read_tree
from emasr.kaldi.matrix_io import read_matrix
from recipe_helpers import recipe_copy, reuse_stages

LADDER = ("mono", "tri1", "tri2")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tiny_gmm_ladder_and_network_tree(tiny_run, tmp_path):
    reference, first = tiny_run
    assert first.returncode == 0
    recipe = recipe_copy(tmp_path, "aishell_sim")
    reuse_stages(reference, recipe, 4, ("make_mfcc", "make_fbank", "mono"))
    ladder = ["--profile", "tiny", "--stop-stage", "7", "--gmm-decode-sets", "dev",
              "--nnet-tree-leaves", "100"]
    result = run_script([str(recipe / "run.sh"), "--gmm-systems", " ".join(LADDER), *ladder])
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    assert result.stdout.count("done already") == 5   # stages 0-4 of the default run
    exp = recipe / "exp"
    cer = {}
    for system in LADDER:
        line = (exp / system / "decode_dev" / "scoring_kaldi" / "best_cer").read_text()
        cer[system] = float(re.search(r"%WER ([\d.]+) \[", line).group(1))
    # every triphone system improves on the monophones (dev CER, best on dev)
    assert all(cer[system] < cer["mono"] for system in LADDER[1:]), cer
    # tri2 reads its features through final.mat, and so do its alignments' consumers
    lda = read_matrix(exp / "tri2/final.mat")
    assert lda.shape[0] == 40 and read_model(exp / "tri2/final.mdl").am_gmm.dim == 40
    assert read_matrix(exp / "tri2_ali_train_dev/final.mat").shape == lda.shape
    assert re.search(r"running: steps/nnet/build_tree.sh .* exp/tri2_ali exp/nnet_tree\n",
                     result.stdout)
    # the targets are the network tree's, at a third of the frame rate, and its HCLG is built
    tree = read_tree(exp / "nnet_tree/tree")
    targets = load_targets(exp / "nnet/targets")
    assert targets.num_pdfs == tree.num_pdfs == read_model(exp / "nnet_tree/final.mdl").am_gmm.num_pdfs
    assert tree.num_pdfs <= 100
    assert (exp / "nnet/targets/frame_subsampling_factor").read_text().strip() == "3"
    assert (exp / "nnet_tree/graph/HCLG.fst").stat().st_size > 0
    # a run with another ladder stops at the stage whose settings changed, naming the key
    other = run_script([str(recipe / "run.sh"), "--gmm-systems", "mono tri1", *ladder])
    assert other.returncode != 0 and "gmm_systems" in other.stdout + other.stderr
