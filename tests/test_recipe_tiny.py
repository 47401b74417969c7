"""The whole default recipe on the tiny profile, in a temporary copy: every stage runs and
RESULTS.md has every row of the paper's table with numbers, the GMM baselines and the plots.
One run serves several checks (it is the slowest test): the GMM chain's tree, model and
alignments, the network targets made from this toolkit's own alignments, and the reference for a
second run that is killed three times and rerun to the same results."""
from __future__ import annotations

import gzip
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, run_script
from emasr.kaldi.alignments import iter_alignment_file
from emasr.ali.targets import load_targets
from emasr.kaldi.model_io import read_model, read_tree
from emasr.lang.topo import make_topo
from recipe_helpers import recipe_copy, reuse_stages

LABELS = ("single", "single+EMA", "MA", "MA+EMA", "BMUF", "BMUF+EMA", "BMUF+avg", "BMUF+lastk")
CER_WITH_INTERVAL = re.compile(r"^\d+\.\d\d \[-?\d+\.\d\d, \d+\.\d\d\]")


def network_rows(results: str) -> dict[tuple[str, str], list[str]]:
    """RESULTS.md's network table: (arch, strategy) -> cells."""
    table = results.split("## Networks")[1].split("\n## ")[0]
    return {tuple(c.strip() for c in line.strip("|").split("|")[:2]):
            [c.strip() for c in line.strip("|").split("|")]
            for line in table.splitlines() if line.startswith(("| DNN", "| LSTM"))}


def gmm_cells(results: str, system: str) -> list[str]:
    """A GMM baseline's row of RESULTS.md: [system, dev CER [CI], test CER [CI]]."""
    table = results.split("## GMM-HMM baselines")[1].split("\n## ")[0]
    line = next(l for l in table.splitlines() if l.startswith(f"| {system} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def gmm_cer(results: str, system: str, column: int) -> float:
    """A GMM baseline's CER (column 1: dev, 2: test) from RESULTS.md."""
    return float(gmm_cells(results, system)[column].split()[0])


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tiny_recipe_end_to_end(tiny_run):
    recipe, result = tiny_run
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    for stage in range(8):
        assert (recipe / "exp" / "done" / f"stage{stage}").is_file()
    # the GMMs' lang has Kaldi's 3-state topology; the networks' lang the one-frame one
    phones = recipe / "data/lang/phones"
    ids = [[int(p) for p in (phones / f"{kind}.csl").read_text().split(":")]
           for kind in ("nonsilence", "silence")]
    assert (recipe / "data/lang/topo").read_text() == make_topo(*ids, topology="kaldi")
    assert (recipe / "data/lang_test_nnet/topo").read_text() == make_topo(*ids, topology="skip")
    check_gmm_chain(recipe)
    check_targets_from_own_alignments(recipe)
    assert re.search(r"running: steps/nnet/build_tree.sh .* exp/tri1_ali exp/nnet_tree\n",
                     result.stdout)
    text = (recipe / "RESULTS.md").read_text(encoding="utf-8")
    rows = network_rows(text)
    for system in ("mono", "tri1"):
        cells = gmm_cells(text, system)
        assert len(CER_WITH_INTERVAL.findall(cells[1])) == 1, cells
    # the triphones improve on the monophones (dev CER), and every network on the monophones
    # (test CER; the 30 dev utterances pick each system's LM weight)
    assert gmm_cer(text, "tri1", 1) < gmm_cer(text, "mono", 1)
    for arch in ("DNN", "LSTM"):
        for label in LABELS:
            cells = rows[(arch, label)]
            assert cells[2] != "not run", (arch, label)
            assert CER_WITH_INTERVAL.match(cells[7]) and CER_WITH_INTERVAL.match(cells[8]), cells
            assert float(cells[8].split()[0]) < gmm_cer(text, "mono", 2), cells
    for plot in ("dev_frame_accuracy.png", "training_loss.png", "speedup.png"):
        assert (recipe / "plots" / plot).stat().st_size > 1000
    # the report's per-utterance counts rebuild it without the exp dirs: every scoring setting
    # (the intervals choose the LM weight again on each replicate's dev) and each utterance's
    # real speaker (the recipe's pseudo-speakers of per-utterance CMVN mapped back)
    with gzip.open(recipe / "counts" / "utterances.tsv.gz", "rt") as f:
        lines = [line.rstrip("\n").split("\t") for line in f]
    assert lines[0] == ["system", "set", "model", "seed", "utt", "speaker", "chars", "errors"]
    assert all(len(line[7].split(",")) > 10 for line in lines[1:])   # LM weights x penalties
    assert {line[5] for line in lines[1:] if line[1] == "test"} == {"S0764", "S0765"}
    assert "scoring setting (LM weight, insertion penalty) chosen again on each replicate's" in text
    assert "BMUF against one worker on dev: **" in text                  # the parity test
    regime = (recipe / "exp/nnet/dnn_bmuf_n2_s1/regime.json").read_text()
    assert '"workers": 2' in regime and '"frames_per_sync": 1024' in regime
    # a second run finds every marker and redoes nothing but the report
    again = run_script([str(recipe / "run.sh"), "--profile", "tiny"])
    assert again.returncode == 0
    assert again.stdout.count("done already") == 8
    assert "trained already" in again.stdout and "decoded already" in again.stdout
    redone = [l for l in again.stdout.splitlines() if "running: steps/" in l]
    assert all("running: steps/nnet/experiment.sh" in l for l in redone), redone


@pytest.mark.slow
def test_real_speech_cer_decodes_recordings_with_a_trained_network(tiny_run):
    # two of the corpus's own test recordings stand in for real ones here
    recipe, result = tiny_run
    assert result.returncode == 0
    transcript = recipe / "corpus/data_aishell/transcript/aishell_transcript_v0.8.txt"
    wavs = sorted((recipe / "corpus/data_aishell/wav/test").glob("*/*.wav"))[:2]
    words = dict(line.split(maxsplit=1) for line in transcript.read_text(encoding="utf-8")
                 .splitlines())
    wav_dir = recipe / "real_wavs"
    wav_dir.mkdir()
    lines = []
    for wav in wavs:
        (wav_dir / wav.name).symlink_to(wav)
        lines.append(f"{wav.stem} {words[wav.stem].replace(' ', '')}\n")
    (wav_dir / "text").write_text("".join(lines), encoding="utf-8")
    run = run_script(["local/real_speech_cer.sh", str(wav_dir), str(wav_dir / "text"),
                      "exp/nnet/dnn_single_s1"], cwd=recipe)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    chars = sum(len(line.split()[1]) for line in lines)
    assert re.search(rf"on data/real: %WER [\d.]+ \[ \d+ / {chars},", run.stdout), run.stdout[-2000:]
    assert (recipe / "exp/nnet/dnn_single_s1/decode_real_final/lat.1.gz").is_file()
    missing = run_script(["local/real_speech_cer.sh", str(recipe), str(wav_dir / "text"),
                          "exp/nnet/dnn_single_s1"], cwd=recipe)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    assert not list((recipe / "data").glob(".real.*"))   # its temporary data dir is gone


def comparable(results: str, arch: str) -> list[str]:
    """RESULTS.md less what differs between any two runs (the command, the machine, wall times),
    restricted to one architecture's rows and lines (and the GMM baselines)."""
    keep, section = [], ""
    other = "LSTM" if arch == "DNN" else "DNN"
    for line in results.splitlines():
        if line.startswith("## "):
            section = line
        if line.startswith(("- command", "- stage wall times", "- wall time", "- machine",
                            "- network training", f"- {other}", f"| {other} ", "![")):
            continue
        if line.startswith(f"- {arch}: BMUF with"):   # the speed-up line: wall times
            continue
        if line.startswith(f"| {arch} ") and section == "## Networks":
            cells = line.split("|")
            cells[16] = " time "   # the train time (s) column
            line = "|".join(cells)
        keep.append(line)
    return drop_empty_sections(keep)


def drop_empty_sections(lines: list[str]) -> list[str]:
    """The non-blank lines less the "## " headers left without lines (the other architecture's
    grid warnings make a "## Scoring protocol" section that a one-architecture run lacks)."""
    lines = [line for line in lines if line.strip()]
    return [line for at, line in enumerate(lines)
            if not (line.startswith("## ") and (at + 1 == len(lines)
                                               or lines[at + 1].startswith("## ")))]


def kill_when(recipe: Path, args: list[str], ready, what: str, delay: float,
              timeout: float = 900) -> None:
    """Start run.sh and, `delay` seconds after ready() is true (mid-stage), kill it as a crash or
    an OOM killer would: SIGKILL to its whole process group, which nothing can handle. The jobs
    run.pl started (sessions of their own) are stopped by their supervisors; nothing of the run
    may be left running afterwards."""
    with open(recipe / f"killed_{what.replace(' ', '_')}.log", "w") as out:
        proc = subprocess.Popen(args, cwd=recipe, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"run.sh ended before it could be killed {what}"
        assert time.monotonic() < deadline, f"never reached the point to kill it {what}"
        time.sleep(0.1)
    time.sleep(delay)
    assert proc.poll() is None, f"run.sh ended before it could be killed {what}"
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=120) == -signal.SIGKILL
    deadline = time.monotonic() + 120
    while processes_in(recipe):
        assert time.monotonic() < deadline, \
            f"processes of the run survived the kill {what}: {processes_in(recipe)}"
        time.sleep(0.5)


def processes_in(directory: Path) -> list[str]:
    """Command lines of the processes whose working directory is in `directory`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd").startswith(str(directory)):
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_tiny_recipe_killed_three_times_reruns_to_the_same_results(tiny_run, tmp_path):
    reference, result = tiny_run
    assert result.returncode == 0
    recipe = recipe_copy(tmp_path, "aishell_sim")
    # stages 0-7 as the reference made them (an interrupted shell stage reruns whole; the Ctrl-C
    # tests of tests/test_recipe.py and tests/test_reliability_inputs.py interrupt those)
    reuse_stages(reference, recipe, 7, ("make_mfcc", "make_fbank", "mono", "mono_ali", "tri1",
                                        "tri1_ali", "tri1_ali_train_dev", "nnet_tree",
                                        "nnet_tree_ali_train_dev", "nnet/targets"))
    # the DNN half of the recipe, killed in the middle of the first and of the second network
    # training (stage 8: each resumes from its checkpoint) and in the decoding (stage 9), each
    # time at a seeded random moment after the point is reached
    delays = random.Random(46).uniform
    args = [str(recipe / "run.sh"), "--profile", "tiny", "--archs", "dnn"]
    exp = recipe / "exp"
    kill_when(recipe, args, lambda: any(exp.glob("nnet/dnn_single_s1/checkpoints/*")),
              "in the first training", delays(0, 1))
    assert not (exp / "nnet" / "dnn_single_s1" / ".done").exists()
    kill_when(recipe, args, lambda: any(exp.glob("nnet/dnn_ma_n2_s1/checkpoints/*")),
              "in the second training", delays(0, 1))
    assert (exp / "nnet" / "dnn_single_s1" / ".done").exists()
    assert not (exp / "nnet" / "dnn_ma_n2_s1" / ".done").exists()
    kill_when(recipe, args, lambda: any(exp.glob("nnet/dnn_ma_n2_s1/decode_*/lat.*.gz")),
              "in stage 9", delays(0, 1))
    final = run_script(args)
    assert final.returncode == 0, (final.stdout + final.stderr)[-5000:]
    # the rerun picked up where it was killed: stages 0-7 were not redone
    assert final.stdout.count("done already") == 8
    got = (recipe / "RESULTS.md").read_text(encoding="utf-8")
    # the reference's report rebuilt from its counts for the DNN alone: the same rows and the
    # same number of comparisons as this DNN-only run's
    rebuilt = run_script([str(REPO / ".venv" / "bin" / "emasr"), "report", "--from-counts",
                          "--archs", "dnn", "--out", "RESULTS_dnn.md",
                          "--plot-dir", str(tmp_path / "plots")], cwd=reference)
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    want = (reference / "RESULTS_dnn.md").read_text(encoding="utf-8")
    assert comparable(got, "DNN") == comparable(want, "DNN")


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
    """The network targets come from the tri1 alignments converted to the networks' own tree,
    at the stacked frame rate; that tree's HCLG is the one the networks decode with."""
    targets = load_targets(recipe / "exp/nnet/targets")
    model = read_model(recipe / "exp/nnet_tree/final.mdl")
    assert targets.num_pdfs == model.am_gmm.num_pdfs == read_tree(recipe / "exp/nnet_tree/tree").num_pdfs
    frames = {line.split()[0]: int(line.split()[1]) for line in
              (recipe / "data/train_dev_fbank/utt2num_frames").read_text().splitlines()}
    keys = list(targets.reader.keys())
    assert len(keys) >= 0.9 * len(frames)
    k = targets.subsampling_factor
    for utt in keys[:10]:
        labels = targets.reader[utt]
        assert labels.dtype == np.int32 and labels.max() < targets.num_pdfs
        assert len(labels) == -(-frames[utt] // k)
