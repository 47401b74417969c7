"""The GMM chain on the tiny simulated corpus: mono -> align -> tri -> align (the shell steps).
The corpus, lang and features come from the recipe's stages 0-3 (run in a temporary copy of
egs/aishell_sim). Decoding and CER are the recipe's stage 6 (tests/test_recipe_tiny.py)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import run_script
from emasr.ali.alignments import iter_alignment_file
from emasr.gmm.model_io import read_model, read_tree
from test_recipe import recipe_copy


def run_ok(args, cwd):
    result = run_script([str(a) for a in args], cwd=cwd)
    assert result.returncode == 0, \
        f"{args[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow  # a few minutes on an idle 2-core machine: synthesis, features, training
def test_tiny_mono_align_tri_align(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    run_ok([recipe / "run.sh", "--profile", "tiny", "--stage", 0, "--stop-stage", 3], recipe)
    steps = recipe / "steps"
    run_ok([steps / "train_mono.sh", "--nj", 2, "--totgauss", 300, "--num-iters", 20,
            "data/train", "data/lang", "exp/mono"], recipe)
    run_ok([steps / "align_si.sh", "--nj", 2, "data/train", "data/lang", "exp/mono",
            "exp/mono_ali"], recipe)
    run_ok([steps / "train_deltas.sh", "--num-leaves", 200, "--totgauss", 1200,
            "--num-iters", 12, "--max-iter-inc", 8, "--realign-iters", "5 10", "data/train",
            "data/lang", "exp/mono_ali", "exp/tri1"], recipe)
    run_ok([steps / "align_si.sh", "--nj", 2, "data/train", "data/lang", "exp/tri1",
            "exp/tri1_ali"], recipe)
    num_utts = len((recipe / "data/train/text").read_text().splitlines())
    aligned = {u: a for p in (recipe / "exp/tri1_ali").glob("ali.*.gz")
               for u, a in iter_alignment_file(p)}
    assert len(aligned) >= 0.9 * num_utts
    tree = read_tree(recipe / "exp/tri1/tree")
    assert tree.context_width == 3 and tree.num_pdfs > 100
    model = read_model(recipe / "exp/tri1/final.mdl")
    assert model.am_gmm.num_pdfs == tree.num_pdfs and model.am_gmm.num_gauss > 600
    tid2pdf = np.asarray(model.transition_model.id2pdf_id)
    assert max(a.max() for a in aligned.values()) <= model.transition_model.num_transition_ids
    seen = {int(p) for a in aligned.values() for p in tid2pdf[a]}
    assert len(seen) > 0.5 * tree.num_pdfs
    # The training log-likelihood per frame rises over the passes.
    likes = [float(re.search(r"avg like per frame = ([-\d.]+)",
                             (recipe / f"exp/tri1/log/update.{x}.log").read_text()).group(1))
             for x in (1, 11)]
    assert likes[1] > likes[0]
