"""The whole default recipe on the tiny profile, in a temporary copy: every stage runs and
RESULTS.md has every row of the paper's table with numbers, the GMM baselines and the plots.
One run serves several checks (it is the slowest test): the GMM chain's tree, model and
alignments, and the network targets made from this toolkit's own alignments."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import run_script
from emasr.ali.alignments import iter_alignment_file
from emasr.ali.targets import load_targets
from emasr.gmm.model_io import read_model, read_tree
from recipe_helpers import recipe_copy

LABELS = ("single", "MA", "MA+EMA", "BMUF", "BMUF+EMA")
CER_WITH_INTERVAL = re.compile(r"^\d+\.\d\d \[-?\d+\.\d\d, \d+\.\d\d\]")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tiny_recipe_end_to_end(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny"])
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    for stage in range(8):
        assert (recipe / "exp" / "done" / f"stage{stage}").is_file()
    check_gmm_chain(recipe)
    check_targets_from_own_alignments(recipe)
    text = (recipe / "RESULTS.md").read_text(encoding="utf-8")
    rows = {tuple(c.strip() for c in line.strip("|").split("|")[:2]):
            [c.strip() for c in line.strip("|").split("|")]
            for line in text.split("## Networks")[1].split("\n## ")[0].splitlines()
            if line.startswith("| DNN") or line.startswith("| LSTM")}
    for arch in ("DNN", "LSTM"):
        for label in LABELS:
            cells = rows[(arch, label)]
            assert cells[2] != "not run", (arch, label)
            assert CER_WITH_INTERVAL.match(cells[6]) and CER_WITH_INTERVAL.match(cells[7]), cells
    gmm = text.split("## GMM-HMM baselines")[1].split("\n## ")[0]
    for system in ("mono", "tri1"):
        line = next(l for l in gmm.splitlines() if l.startswith(f"| {system} |"))
        assert len(CER_WITH_INTERVAL.findall(line.split("|")[2].strip())) == 1, line
    for plot in ("dev_frame_accuracy.png", "training_loss.png", "speedup.png"):
        assert (recipe / "plots" / plot).stat().st_size > 1000
    # a second run finds every marker and redoes nothing but the report
    again = run_script([str(recipe / "run.sh"), "--profile", "tiny"])
    assert again.returncode == 0
    assert again.stdout.count("done already") == 8
    assert "trained already" in again.stdout and "decoded already" in again.stdout
    assert "running: steps/" not in again.stdout


def check_gmm_chain(recipe: Path) -> None:
    """mono -> align -> tri -> align left a real triphone tree, model and alignments."""
    num_utts = len((recipe / "data/train_dev/text").read_text().splitlines())
    aligned = {u: a for p in (recipe / "exp/tri1_ali_train_dev").glob("ali.*.gz")
               for u, a in iter_alignment_file(p)}
    assert len(aligned) >= 0.9 * num_utts
    tree = read_tree(recipe / "exp/tri1/tree")
    assert tree.context_width == 3 and tree.num_pdfs > 50
    model = read_model(recipe / "exp/tri1/final.mdl")
    assert model.am_gmm.num_pdfs == tree.num_pdfs
    tid2pdf = np.asarray(model.transition_model.id2pdf_id)
    assert max(a.max() for a in aligned.values()) <= model.transition_model.num_transition_ids
    seen = {int(p) for a in aligned.values() for p in tid2pdf[a]}
    assert len(seen) > 0.5 * tree.num_pdfs
    # The training log-likelihood per frame rises over the triphone passes.
    logs = sorted((recipe / "exp/tri1/log").glob("update.*.log"),
                  key=lambda p: int(p.name.split(".")[1]))
    likes = [float(re.search(r"avg like per frame = ([-\d.]+)", p.read_text()).group(1))
             for p in (logs[0], logs[-1])]
    assert likes[1] > likes[0]


def check_targets_from_own_alignments(recipe: Path) -> None:
    """The network targets come from the tri1 alignments, at the stacked frame rate."""
    targets = load_targets(recipe / "exp/nnet/targets")
    model = read_model(recipe / "exp/tri1/final.mdl")
    assert targets.num_pdfs == model.am_gmm.num_pdfs
    frames = {line.split()[0]: int(line.split()[1]) for line in
              (recipe / "data/train_dev_fbank/utt2num_frames").read_text().splitlines()}
    keys = list(targets.reader.keys())
    assert len(keys) >= 0.9 * len(frames)
    k = targets.subsampling_factor
    for utt in keys[:10]:
        labels = targets.reader[utt]
        assert labels.dtype == np.int32 and labels.max() < targets.num_pdfs
        assert len(labels) == -(-frames[utt] // k)
