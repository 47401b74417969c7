"""`emasr report` on synthetic exp dirs written in the trainer's and the scoring's formats."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
from click.testing import CliRunner

from emasr.cli import main
from emasr.nnet.training.metrics import MetricsError, read_metrics
from emasr.report.scoring import ScoringError, read_decode_dir
from report_synthetic import (corrupt, make_gmm_system, make_network_run, reference_texts,
                              write_scored_decode, write_scored_settings)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def uniform(refs: dict[str, str], n: int) -> dict[str, int]:
    return {u: n for u in refs}


def alternating(refs: dict[str, str], a: int, b: int) -> dict[str, int]:
    return {u: (a if i % 2 else b) for i, u in enumerate(sorted(refs))}


def write_report(out, *args: str) -> str:
    """`emasr report --out OUT ARGS`, which must succeed: the report's text."""
    result = CliRunner().invoke(main, ["report", "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    with open(out, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("exp"))
    refs = {"dev": reference_texts(40, seed=1), "test": reference_texts(40, seed=2)}
    dev, test = refs["dev"], refs["test"]

    def errors(final: int, ema: int | None = None, final_test=None):
        out = {("dev", "final"): uniform(dev, final),
               ("test", "final"): final_test or uniform(test, final)}
        if ema is not None:
            out.update({("dev", "ema"): uniform(dev, ema), ("test", "ema"): uniform(test, ema)})
        return out

    nnet = os.path.join(root, "nnet")
    dirs = [
        make_network_run(nnet, "dnn", "single", 1, 1, False, refs, errors(2), seconds_per_epoch=20),
        # MA: the EMA clearly better than the global model
        make_network_run(nnet, "dnn", "ma", 1, 2, True, refs,
                         errors(3, 2, final_test=alternating(test, 3, 3))),
        # BMUF: global test errors that differ from MA's utterance by utterance (2 or 4 against 3):
        # the same total, so neither is better
        make_network_run(nnet, "dnn", "bmuf", 1, 2, True, refs,
                         errors(3, 1, final_test=alternating(test, 2, 4))),
        # the same BMUF with a worse learning rate: tuning on dev must pass it over
        make_network_run(nnet, "dnn", "bmuf", 1, 2, True, refs, errors(6, 5), lr=0.4, acc0=0.1),
        make_network_run(nnet, "lstm", "single", 1, 1, False, refs, errors(4)),
        # LSTM BMUF trained but never decoded
        make_network_run(nnet, "lstm", "bmuf", 1, 2, False, refs, {}),
    ]
    gmms = [make_gmm_system(root, "mono", refs, 5), make_gmm_system(root, "tri1", refs, 4)]
    out = os.path.join(root, "RESULTS.md")
    text = write_report(out, "--replications", "500", "--strategies",
                        "single ma ma+ema bmuf bmuf+ema", "--note",
                        "command: run.sh --profile tiny", *dirs, *gmms)
    return {"root": root, "dirs": dirs, "gmms": gmms, "out": out, "text": text}


def table_rows(text: str, section: str) -> dict[tuple[str, str], list[str]]:
    body = text.split(f"## {section}")[1].split("\n## ")[0]
    rows = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        header = cells[0] in ("arch", "system")
        if line.startswith("|") and len(cells) > 2 and not set(cells[0]) <= {"-"} and not header:
            rows[(cells[0], cells[1])] = cells
    return rows


def test_every_row_is_present_and_missing_rows_say_not_run(experiment):
    rows = table_rows(experiment["text"], "Networks")
    for arch in ("DNN", "LSTM"):
        for label in ("single", "MA", "MA+EMA", "BMUF", "BMUF+EMA"):
            assert (arch, label) in rows, (arch, label)
    for label in ("MA", "MA+EMA", "BMUF+EMA"):
        assert rows[("LSTM", label)][2] == "not run"
    for label in ("single", "MA", "MA+EMA", "BMUF", "BMUF+EMA"):
        assert rows[("DNN", label)][2] != "not run"
    # trained but not decoded: the row is there with its training numbers and no CER
    assert rows[("LSTM", "BMUF")][8] == "-"
    assert rows[("LSTM", "BMUF")][16] == "9"


def test_cer_columns_have_intervals_around_the_scored_cer(experiment):
    rows = table_rows(experiment["text"], "Networks")
    expected_test = {"single": 20.0, "MA": 30.0, "MA+EMA": 20.0, "BMUF": 30.0, "BMUF+EMA": 10.0}
    for label, cer in expected_test.items():
        cell = rows[("DNN", label)][8]
        match = re.fullmatch(r"([\d.]+) \[([\d.]+), ([\d.]+)\]", cell)
        assert match, cell
        value, low, high = map(float, match.groups())
        assert value == pytest.approx(cer)
        assert low <= value <= high
    # a constant error count per utterance gives a zero-width interval; a varying one does not
    low, high = re.findall(r"\[([\d.]+), ([\d.]+)\]", rows[("DNN", "BMUF")][8])[0]
    assert float(low) < 30.0 < float(high)


def test_relative_changes_training_cost_and_tuned_learning_rate(experiment):
    rows = table_rows(experiment["text"], "Networks")
    bmuf_ema = rows[("DNN", "BMUF+EMA")]
    assert bmuf_ema[13] == "-66.7%"       # 10% against BMUF's 30%
    assert bmuf_ema[14] == "-50.0%"       # against single's 20%
    assert rows[("DNN", "single")][14] == "+0.0%"
    assert bmuf_ema[4] == "0.1"           # the lr=0.4 run has the worse dev frame accuracy
    assert bmuf_ema[5] == "lr {0.1, 0.4}" and rows[("DNN", "single")][5] == "-"   # the grid
    assert bmuf_ema[6] == "48.00"         # 0.3 + 0.06 * 3 (EMA dev accuracy of the last epoch)
    assert rows[("DNN", "BMUF")][6] == "45.00"
    assert bmuf_ema[2] == "2" and rows[("DNN", "single")][2] == "1"
    assert rows[("DNN", "single")][15] == "60"      # 3 epochs of 20 s
    assert bmuf_ema[16] == "9" and bmuf_ema[17] == "36.0"   # 9 syncs x 4 MB
    assert rows[("DNN", "single")][17] == "0.0"
    assert bmuf_ema[10] == "10, 0.5" and bmuf_ema[12] == "0/0"   # dev's setting; no failed decode
    assert bmuf_ema[9] == "s1 10.00"      # each seed's test CER


def test_every_grid_point_is_listed_with_the_dev_accuracy_that_chose_it(experiment):
    text = experiment["text"]
    body = text.split("## Baselines searched on dev")[1].split("\n## ")[0]
    points = [[c.strip() for c in line.strip().strip("|").split("|")]
              for line in body.splitlines() if line.startswith("| DNN")]
    # BMUF searched its rate on dev (two runs of seed 1); single and MA searched nothing
    assert [p[1:5] for p in points] == [["BMUF", "2", "1", "lr 0.1"], ["BMUF", "2", "1", "lr 0.4"]]
    assert [p[5] for p in points] == ["45.00", "25.00"]   # 0.3 and 0.1, + 0.05 an epoch for 3
    assert [p[7] for p in points] == ["**chosen**", ""]
    # the chosen point's dev CER is its row's; the other point (6 errors an utterance, not 3)
    chosen_dev = float(table_rows(text, "Networks")[("DNN", "BMUF")][7].split()[0])
    assert float(points[0][6]) == pytest.approx(chosen_dev)
    assert float(points[1][6]) > 1.5 * chosen_dev


def test_gmm_baselines_and_same_utterance_differences(experiment):
    text = experiment["text"]
    gmm = table_rows(text, "GMM-HMM baselines")
    mono = gmm[("mono", "50.00 [50.00, 50.00]")]
    tri1 = next(cells for k, cells in gmm.items() if k[0] == "tri1")
    assert tri1[1].startswith("40.00")
    # the ladder column: tri1 (4 errors in every utterance) against mono above it (5)
    assert mono[4] == "-" and tri1[4] == "-10.00 [-10.00, -10.00] (resolved)"
    body = text.split("## Same test utterances")[1].split("\n## ")[0]
    line = next(l for l in body.splitlines() if l.startswith("| DNN | 2 | BMUF | BMUF+EMA |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[6].startswith("-20.00 [") and cells[7].startswith("-66.7% [")
    assert cells[8:] == ["1", "1/1", "-", "40", "yes", "yes"]
    # 5 in the table, 2 parity tests on dev (MA-2, BMUF-2), 1 on the ladder
    assert "This report makes 8 comparisons" in body


def test_findings_follow_the_intervals_and_the_regime(experiment):
    findings = experiment["text"].split("## What agrees and what disagrees with the paper")[1]
    findings = findings.split("\n## ")[0]
    lines = findings.splitlines()
    # BMUF-2's dev CER is 50% behind one worker's: the parity test fails, no verdict on the
    # paper, the facts stated
    regime = next(l for l in lines if l.startswith("- DNN, 2 workers, BMUF against one worker"))
    assert ("**not shown within 3% of one worker** (the interval's upper end, +50.0%, is above "
            "+3%) (dev CER 20.00 -> 30.00;") in regime and "**not the paper's regime**" in regime
    ma = next(l for l in lines if l.startswith("- DNN, 2 workers, MA against one worker"))
    assert "a parity test only (the paper's regime is BMUF's)" in ma
    ema_line = next(l for l in lines if "improves on the global BMUF" in l)
    assert "**BMUF+EMA is better here**, outside the paper's regime" in ema_line
    assert "-20.00 [-23" in ema_line and "one seed: utterances resampled" in ema_line
    assert "at the family-wise 99.38% of 8 comparisons [-7" in ema_line
    # the paper's -8.4% against an interval far below it
    assert ema_line.endswith("the interval excludes the paper's -8.4%: the effect here is "
                             "**larger than the paper's**.")
    # MA ran at one rate: no verdict on any claim that involves it
    for claim in ("improves on the global MA", "BMUF beats model averaging"):
        line = next(l for l in lines if claim in l)
        assert "**no verdict**: MA's learning rate was not tuned on dev (one rate, 0.1)" in line
    speed = next(l for l in lines if l.startswith("- DNN: BMUF with 2 workers"))
    assert "speed-up 2.00x" in speed and "**no speed-up verdict**: the runs do not record" in speed
    assert "Not run, so not checked: lstm BMUF+EMA, lstm MA, lstm MA+EMA" in findings
    assert "- command: run.sh --profile tiny" in experiment["text"]


def test_plots_are_written_and_linked(experiment):
    plot_dir = os.path.join(experiment["root"], "plots")
    for name in ("dev_frame_accuracy.png", "training_loss.png", "speedup.png"):
        path = os.path.join(plot_dir, name)
        with open(path, "rb") as f:
            assert f.read(8) == PNG_MAGIC, name
        assert f"](plots/{name})" in experiment["text"]


def test_select_prints_the_runs_tuned_on_dev(experiment):
    result = CliRunner().invoke(main, ["report", "--select", "--archs", "dnn", "--strategies",
                                       "bmuf bmuf+ema", *experiment["dirs"]])
    assert result.exit_code == 0, result.output
    assert result.output.split() == [d for d in experiment["dirs"] if "dnn_bmuf_n2_s1_lr0.1" in d]


def test_an_ema_row_uses_the_run_its_sync_rules_row_chose(tmp_path):
    # two points of a grid: the global model is better at lr 0.1, the EMA at lr 0.4; the +EMA row
    # compares the EMA of the run the BMUF row stands on, not another training
    better_global = make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, True, {}, {}, acc0=0.3)
    better_ema = make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, True, {}, {}, lr=0.4,
                                  acc0=0.2)
    epochs = epoch_records(better_ema)
    for record in epochs:
        record["dev_acc_ema"] += 0.5
    rewrite_epochs(better_ema, epochs)
    assert selected(["bmuf", "bmuf+ema"], better_global, better_ema) == [better_global] * 2


def epoch_records(exp_dir: str) -> list[dict]:
    return read_metrics(os.path.join(exp_dir, "metrics.jsonl")).epochs


def rewrite_epochs(exp_dir: str, epochs: list[dict]) -> None:
    """metrics.jsonl with its epoch records replaced by `epochs` (the block records kept)."""
    path = os.path.join(exp_dir, "metrics.jsonl")
    with open(path, encoding="utf-8") as f:
        blocks = [r for r in map(json.loads, f) if r["type"] != "epoch"]
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in blocks + epochs)


def selected(labels: list[str], *exp_dirs: str) -> list[str]:
    """The run `emasr report --select` prints for each row label (one seed, so one run each)."""
    chosen = []
    for label in labels:
        result = CliRunner().invoke(main, ["report", "--select", "--archs", "dnn",
                                           "--strategies", label, *exp_dirs])
        assert result.exit_code == 0, result.output
        chosen += result.output.split()
    return chosen


def test_the_curves_are_of_the_runs_the_table_stands_on(tmp_path):
    from emasr.report.plots import first_seed_runs, plotted_runs
    from emasr.report.rows import build_rows
    from emasr.report.systems import read_exp_dirs

    worse = make_network_run(str(tmp_path), "dnn", "ma", 1, 2, True, {}, {}, acc0=0.1)
    better = make_network_run(str(tmp_path), "dnn", "ma", 1, 2, True, {}, {}, lr=0.4, acc0=0.3)
    networks, _ = read_exp_dirs([worse, better])
    rows = build_rows(networks, ["dnn"], ["ma", "ma+ema"], 10)
    [curve] = first_seed_runs(plotted_runs(networks, rows), "dnn")
    assert curve.exp_dir == better   # not the grid's first point (the lowest rate)
    assert len(plotted_runs(networks, [])) == 2


def test_report_with_nothing_run_still_has_every_row(tmp_path):
    empty = tmp_path / "exp_empty"
    empty.mkdir()
    out = tmp_path / "R.md"
    text = write_report(out, str(empty))
    rows = table_rows(text, "Networks")
    # every registered rule alone and with each averaged model it can keep, for both archs
    from emasr.nnet.averages import AVERAGED_MODELS
    from emasr.nnet.sync import RULES

    assert len(rows) == 2 * sum(1 + sum(m.applies_to(rule) for m in AVERAGED_MODELS.values())
                                for rule in RULES)
    assert ("DNN", "DiLoCo+EMA") in rows and all(r[2] == "not run" for r in rows.values())
    assert ("DNN", "BMUF+EMA after warm-up") in rows   # kept by BMUF runs only
    assert ("DNN", "MA+EMA after warm-up") not in rows
    assert (tmp_path / "plots" / "dev_frame_accuracy.png").read_bytes()[:8] == PNG_MAGIC
    assert "Speed-up against workers: not measured" in text


def test_seeds_are_pooled_and_paired(tmp_path):
    refs = {"dev": reference_texts(10, seed=3), "test": reference_texts(10, seed=4)}
    dirs = []
    for seed, (bad, good) in ((1, (4, 2)), (2, (2, 0))):
        errors = {(s, "final"): uniform(refs[s], bad) for s in refs}
        errors.update({(s, "ema"): uniform(refs[s], good) for s in refs})
        dirs.append(make_network_run(str(tmp_path), "dnn", "bmuf", seed, 2, True, refs, errors))
    out = tmp_path / "R.md"
    rows = table_rows(write_report(out, "--archs", "dnn", "--replications", "300", *dirs),
                      "Networks")
    assert rows[("DNN", "BMUF")][3] == "2"
    assert rows[("DNN", "BMUF")][8].startswith("30.00 [")            # (40% + 20%) / 2
    assert rows[("DNN", "BMUF")][9] == "s1 40.00 / s2 20.00"
    assert rows[("DNN", "BMUF")][10] == "10, 0.5 (2 seeds)"    # both seeds chose the same setting
    assert rows[("DNN", "BMUF+EMA")][8].startswith("10.00 [")
    # the seeds disagree by 20 points: resampling them widens the interval far beyond the
    # utterance-level one (which is zero: every utterance has the same errors within a seed)
    low, high = map(float, re.findall(r"\[([\d.]+), ([\d.]+)\]", rows[("DNN", "BMUF")][8])[0])
    assert low <= 21.0 and high >= 39.0


def test_scoring_reader_matches_kaldi_layouts(tmp_path):
    refs = reference_texts(5, seed=5)
    hyps = corrupt(refs, uniform(refs, 1))
    write_scored_decode(str(tmp_path / "a"), refs, hyps, lmwt=12, wip="1.0")
    a = read_decode_dir(str(tmp_path / "a"))
    assert (a.cer, a.errors, a.total, a.lmwt, a.wip) == (10.0, 5, 50, "12", "1.0")
    assert a.utterances == {u: (1, 10) for u in refs} and a.has_utterances
    write_scored_decode(str(tmp_path / "b"), refs, hyps, form="per_utt")
    b = read_decode_dir(str(tmp_path / "b"))
    assert b.utterances == a.utterances
    # counts that do not add up to the %WER line they stand for are named, not reported
    best = tmp_path / "a" / "scoring_kaldi" / "best_cer"
    best.write_text(best.read_text().replace("[ 5 / 50,", "[ 6 / 50,"))
    with pytest.raises(ScoringError, match=r"best_cer: says 6 errors in 50 characters, but the "
                                           r"per-utterance texts of .*a give 5 in 50"):
        read_decode_dir(str(tmp_path / "a"))
    assert read_decode_dir(str(tmp_path / "missing")) is None
    (tmp_path / "c" / "scoring_kaldi").mkdir(parents=True)
    (tmp_path / "c" / "scoring_kaldi" / "best_cer").write_text("WER is 7\n")
    with pytest.raises(ScoringError, match=r"best_cer:1: expected a Kaldi"):
        read_decode_dir(str(tmp_path / "c"))


def test_metrics_reader_keeps_the_last_record_of_a_resumed_block(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"type": "block", "epoch": 1, "block": 1, "loss": 5.0}\n'
                    '{"type": "block", "epoch": 1, "block": 1, "loss": 4.0}\n'
                    '{"type": "epoch", "epoch": 1, "dev_acc": 0.5, "frames": 10, '
                    '"seconds_train": 2}\n')
    metrics = read_metrics(str(path))
    assert [b["loss"] for b in metrics.blocks] == [4.0]
    assert metrics.final["dev_acc"] == 0.5 and metrics.frames_per_second() == 5.0
    path.write_text('{"type": "epoch", "epoch": 1}\nnot json\n')
    with pytest.raises(MetricsError, match=r"metrics.jsonl:2: not a JSON object"):
        read_metrics(str(path))


def test_the_report_thins_a_long_loss_curve_and_the_reader_keeps_it_whole(tmp_path):
    from emasr.report.systems import PLOTTED_BLOCKS, read_network_run
    exp = make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, False, {}, {})
    blocks = [{"type": "block", "epoch": 1, "block": b, "loss": float(b)} for b in range(1, 1001)]
    path = os.path.join(exp, "metrics.jsonl")
    epochs = epoch_records(exp)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in blocks + epochs)
    assert len(read_metrics(path).blocks) == 1000   # the trainer's and the tests' reader: all
    losses = [b["loss"] for b in read_network_run(exp).metrics.blocks]
    assert len(losses) == PLOTTED_BLOCKS and (losses[0], losses[-1]) == (1.0, 1000.0)
    assert all(3 <= b - a <= 4 for a, b in zip(losses, losses[1:]))   # evenly spaced: 999 / 299


@pytest.mark.parametrize("hardware, expected", [
    (None, "**no speed-up verdict**: the runs do not record their hardware"),
    ({"device": "cpu", "gpus_per_node": 0, "cpu_cores": 2, "processes_per_node": 2},
     "**no speed-up verdict**: the 2 workers shared 2 CPU core(s) in 2 process(es)"),
    ({"device": "cuda", "gpus_per_node": 2, "cpu_cores": 16, "processes_per_node": 2},
     "90% of linear, each worker on its own GPU: the paper reports a near-linear speed-up: "
     "**agrees**"),
])
def test_a_speed_up_is_judged_only_where_each_worker_had_its_own_gpu(tmp_path, hardware,
                                                                    expected):
    from emasr.report.findings import speed_lines
    from emasr.report.rows import build_rows
    from emasr.report.systems import read_exp_dirs

    dirs = [make_network_run(str(tmp_path), "dnn", "single", 1, 1, False, {}, {},
                             seconds_per_epoch=90, hardware=hardware),
            make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, False, {}, {},
                             seconds_per_epoch=50, hardware=hardware)]
    networks, _ = read_exp_dirs(dirs)
    [line] = speed_lines(build_rows(networks, ["dnn"], ["single", "bmuf"], 10))
    assert "speed-up 1.80x, one run each" in line and expected in line, line
    # a second seed of BMUF: the times are means, and the line says over how many runs
    dirs.append(make_network_run(str(tmp_path), "dnn", "bmuf", 2, 2, False, {}, {},
                                 seconds_per_epoch=70, hardware=hardware))
    networks, _ = read_exp_dirs(dirs)
    [line] = speed_lines(build_rows(networks, ["dnn"], ["single", "bmuf"], 10))
    assert "speed-up 1.50x, the mean of 2 and 1 runs" in line, line


def comparison_of(cers_a: dict[int, list[int]], cers_b: dict[int, list[int]], chars: int = 10):
    """A Comparison of two systems from per-seed lists of per-utterance errors."""
    import numpy as np

    from emasr.report.intervals import SetCounts, System, difference
    from emasr.report.rows import Comparison

    def system(errors):
        utts = tuple(f"u{i:03d}" for i in range(len(next(iter(errors.values())))))
        return System(tuple(errors), None, SetCounts(
            utts, utts, np.full(len(utts), chars), tuple(np.array([e]) for e in errors.values())))

    def seed_cers(errors):
        return {s: 100.0 * sum(e) / (chars * len(e)) for s, e in errors.items()}
    points, relative = difference(system(cers_a), system(cers_b), 2000)
    seeds_a, seeds_b = seed_cers(cers_a), seed_cers(cers_b)
    return Comparison("dnn", "single", "bmuf+ema", 8, np.mean(list(seeds_a.values())),
                      np.mean(list(seeds_b.values())), points, relative,
                      {s: seeds_b[s] - seeds_a[s] for s in seeds_a if s in seeds_b}, family=10,
                      seed_cers_a=seeds_a)


def test_a_claim_is_judged_by_the_interval_of_the_difference_in_the_papers_regime_only():
    from emasr.report.findings import ordering, verdict

    same = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1] * 6
    better = {s: [max(0, e - 1) for e in same] for s in (1, 2, 3)}
    # B one error better on most utterances in all 3 seeds: resolved, and the per-seed numbers shown
    c = comparison_of({s: same for s in (1, 2, 3)}, better)
    assert c.resolved and ordering(c, "better") == "better"
    text = verdict(c, "better", in_regime=True)
    assert text.startswith("**agrees**: BMUF+EMA is better (")
    assert "utterances and 3 seeds resampled" in text and "3/3 seeds with BMUF+EMA better" in text
    assert "at the family-wise 99.50% of 10 comparisons" in text
    assert "the ordering holds at the family-wise 99.50%" in text
    assert verdict(c, "better", in_regime=False).startswith(
        "**BMUF+EMA is better here**, outside the paper's regime, so not a verdict on it")
    # seeds that disagree: the interval includes zero, no ordering is claimed
    mixed = comparison_of({s: same for s in (1, 2, 3)},
                          {1: better[1], 2: [e + 1 for e in same], 3: same})
    assert not mixed.resolved and mixed.signs() == "1/3"
    assert verdict(mixed, "better", True).startswith("**no verdict**: not resolved")
    # "matches or beats": 2% worse everywhere is within the 3% margin; 20% worse is not
    slightly = comparison_of({1: [50] * 60}, {1: [51] * 60}, chars=100)
    assert ordering(slightly, "no_worse") == "better" and ordering(slightly, "better") == "worse"
    assert verdict(slightly, "no_worse", True).startswith(
        "**agrees**: BMUF+EMA matches single within 3% or beats it")
    far = comparison_of({1: [50] * 60}, {1: [60] * 60}, chars=100)
    assert verdict(far, "no_worse", True).startswith("**disagrees**: BMUF+EMA is more than 3%")


def test_an_ordering_that_one_seed_contradicts_is_not_claimed_though_its_interval_excludes_zero():
    from emasr.report.findings import ordering, verdict

    same = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1] * 6
    better = [max(0, e - 1) for e in same]
    seeds = range(1, 9)
    # seeds 1-7 better on most utterances, seed 8 one error worse in all: the interval of the
    # mean of 8 seeds excludes zero, but a training run says otherwise
    c = comparison_of({s: same for s in seeds},
                      {**{s: better for s in range(1, 8)}, 8: [same[0] + 1] + same[1:]})
    assert c.interval.high < 0 and c.signs() == "7/8"
    assert not c.resolved and not c.resolved_family_wise and ordering(c, "better") == "unresolved"
    assert verdict(c, "better", True).startswith(
        "**no verdict**: not resolved: the interval excludes zero, but only 7/8 seeds have "
        "BMUF+EMA better")
    # "matches within 3%": 7 seeds equal, the eighth 3.6% worse; the interval's upper end is
    # inside the margin, the eighth seed is not
    margin = comparison_of({s: [500] * 60 for s in seeds},
                           {**{s: [500] * 60 for s in range(1, 8)}, 8: [518] * 60}, chars=1000)
    assert margin.relative.interval(0.95).high <= 3.0 and max(margin.seed_relative()) > 3.0
    assert ordering(margin, "no_worse") == "unresolved"


def test_the_setting_chosen_on_dev_is_the_one_applied_to_test(tmp_path):
    from report_synthetic import write_scored_settings

    refs = {"dev": reference_texts(10, seed=6), "test": reference_texts(10, seed=7)}
    exp = make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, False, refs, {})
    # dev is best at LM weight 2.1 with penalty 0.5; test alone would pick 3 with 0.0
    errors = {"dev": {("1.9", "0.5"): 3, ("2.1", "0.5"): 1, ("3", "0.0"): 2},
              "test": {("1.9", "0.5"): 4, ("2.1", "0.5"): 2, ("3", "0.0"): 1}}
    for set_name, by_setting in errors.items():
        write_scored_settings(os.path.join(exp, f"decode_{set_name}"), refs[set_name],
                              {k: corrupt(refs[set_name], uniform(refs[set_name], n))
                               for k, n in by_setting.items()})
    out = tmp_path / "R.md"
    text = write_report(out, "--archs", "dnn", "--strategies", "bmuf", "--replications", "100",
                        exp)
    row = table_rows(text, "Networks")[("DNN", "BMUF")]
    assert row[7].startswith("10.00 [")      # dev at its best: 1 error in 10 characters
    assert row[8].startswith("20.00 [")      # test at dev's setting (2.1, 0.5), not its own best
    assert row[10] == "2.1, 0.5" and row[11] == "10.00"   # Kaldi's best-on-test, beside it
    # 2.1 between 1.9 and 3: the acoustic scale 1/3 is 30% away, so the report asks for a
    # finer grid
    protocol = text.split("## Scoring protocol")[1].split("\n## ")[0]
    assert "chosen on dev, 2.1, has neighbours 1.9 and 3" in protocol


def speaker_refs(speakers: int, per_speaker: int, seed: int) -> tuple[dict, dict]:
    """Reference texts of `speakers` speakers (utterance ids prefixed by the speaker's) and
    their utt2spk."""
    texts = reference_texts(speakers * per_speaker, seed=seed)
    refs = {f"S{i // per_speaker:04d}W{i:04d}": t for i, t in enumerate(texts.values())}
    return refs, {u: u[:5] for u in refs}


def write_two_weights(exp: str, refs: dict, utt2spk: dict, test_second: bool) -> None:
    """Decodes at LM weights 10 and 11 that tie on dev (each better on half the speakers) and
    differ on test (11 worse on 40% of the utterances); `test_second`: score test at 11 too."""
    dev, test = refs["dev"], refs["test"]
    half = {u: int(u[1:5]) % 2 for u in dev}
    write_scored_settings(os.path.join(exp, "decode_dev"), dev, {
        ("10", "0.5"): corrupt(dev, {u: 1 + half[u] for u in dev}),
        ("11", "0.5"): corrupt(dev, {u: 2 - half[u] for u in dev})}, utt2spk=utt2spk["dev"])
    worse = {u: 1 + (i % 5 < 2) for i, u in enumerate(sorted(test))}
    by_setting = {("10", "0.5"): corrupt(test, uniform(test, 1))}
    if test_second:
        by_setting[("11", "0.5")] = corrupt(test, worse)
    write_scored_settings(os.path.join(exp, "decode_test"), test, by_setting,
                          utt2spk=utt2spk["test"])


def test_the_report_chooses_the_lm_weight_again_on_every_dev_draw(tmp_path):
    refs, utt2spk = {}, {}
    for set_name, seed in (("dev", 12), ("test", 13)):
        refs[set_name], utt2spk[set_name] = speaker_refs(10, 4, seed)
    widths, texts = {}, {}
    for test_second in (True, False):
        exp = make_network_run(str(tmp_path / str(test_second)), "dnn", "single", 1, 1, False,
                               refs, {})
        write_two_weights(exp, refs, utt2spk, test_second)
        out = tmp_path / str(test_second) / "R.md"
        texts[test_second] = write_report(out, "--archs", "dnn", "--strategies", "single",
                                          "--replications", "2000", exp)
        cell = table_rows(texts[test_second], "Networks")[("DNN", "single")][8]
        assert cell.startswith("10.00 [")     # test at dev's choice, 10 (ties go to the first)
        low, high = map(float, re.findall(r"\[([\d.]+), ([\d.]+)\]", cell)[0])
        widths[test_second] = high - low
    # both weights scored on test: each dev draw of the 10 speakers chooses again, and test
    # moves with it; one weight on test: the choice is held fixed
    assert widths[True] > 2 * widths[False]
    assert "scoring setting (LM weight, insertion penalty) chosen again on each replicate's dev" \
        in texts[True]
    assert "speakers resampled as clusters" in texts[True]
    assert "held at the one dev chose" in texts[False]
    # the counts keep every setting and each utterance's speaker: the rebuild is the same report
    counts = tmp_path / "True" / "counts"
    import gzip
    with gzip.open(counts / "utterances.tsv.gz", "rt") as f:
        lines = f.read().splitlines()
    assert lines[0].split("\t") == ["system", "set", "model", "seed", "utt", "speaker", "chars",
                                    "errors"]
    first_test = next(l.split("\t") for l in lines if "\ttest\t" in l)
    assert first_test[5] == "S0000" and first_test[7] == "1,2"
    rebuilt = tmp_path / "True" / "REBUILT.md"
    assert write_report(rebuilt, "--from-counts") == texts[True]


def test_parity_is_a_non_inferiority_test_on_dev():
    from emasr.report.counts import read_counts
    from emasr.report.findings import parity_tests, regime_lines
    from emasr.report.intervals import SetCounts, System
    from emasr.nnet.training.metrics import TrainingMetrics
    from emasr.report.rows import CerSummary, Row
    from emasr.report.systems import NetworkRun

    rng = np.random.default_rng(0)
    utts = tuple(f"u{i:04d}" for i in range(2000))
    chars = np.full(len(utts), 20)

    base = [rng.binomial(chars, 0.1) for _ in range(3)]   # three seeds, 10% CER

    def row(label: str, workers: int, extra: np.ndarray) -> Row:
        errors = [(b + extra)[None, :] for b in base]
        seeds = {s: 100.0 * e.sum() / chars.sum() for s, e in zip((1, 2, 3), errors)}
        counts = SetCounts(utts, utts, chars, tuple(errors))
        summary = CerSummary(float(np.mean(list(seeds.values()))), 0, 0, seeds=seeds)
        run = NetworkRun(f"exp/{label}", "dnn", label, 1, 0.1, workers, [], False,
                         TrainingMetrics(f"exp/{label}/metrics.jsonl"))
        return Row("dnn", label, [run], workers, cer={"dev": summary},
                   system=System((1, 2, 3), counts, None))

    # BMUF-8 1% behind one worker on every seed (one more error on 2% of the utterances), with
    # tight intervals: within 3% by the test
    one_more = (np.arange(len(utts)) % 50 == 0).astype(int)
    close = [row("single", 1, 0 * one_more), row("bmuf", 8, one_more)]
    [test] = parity_tests(close, 2000)
    assert test.passed and test.comparison.relative.interval().high <= 3.0
    assert "**the paper's regime**" in regime_lines([test])[0]
    # the committed 8-layer DNN verdict (three seeds): BMUF-8's point estimate is +0.2% on dev,
    # but the interval reaches far past +3%: not shown, so not the paper's regime
    committed = os.path.join(os.path.dirname(__file__), "..", "egs", "aishell_sim", "parity",
                             "dnn8_16", "counts")
    networks, _, options = read_counts(committed)
    from emasr.report.rows import build_rows
    rows = build_rows(networks, ["dnn"], ["single", "bmuf"], 2000)
    [bmuf] = [p for p in parity_tests(rows, 2000) if p.label == "bmuf"]
    interval = bmuf.comparison.relative.interval()
    assert abs(bmuf.comparison.relative.estimate) < 1.0 and interval.high > 3.0
    assert not bmuf.passed and "**not the paper's regime**" in regime_lines([bmuf])[0]


def test_averaged_model_rows_and_worker_counts(tmp_path):
    refs = {"dev": reference_texts(10, seed=8), "test": reference_texts(10, seed=9)}
    dirs = []
    for workers, (final, ema) in ((2, (3, 2)), (8, (4, 3))):
        dirs.append(make_network_run(str(tmp_path / f"n{workers}"), "dnn", "bmuf", 1, workers,
                                     True, refs, {(s, m): uniform(refs[s], n) for s in refs
                                                  for m, n in (("final", final), ("ema", ema))},
                                     lr_times_workers=workers == 8))
    dirs.append(make_network_run(str(tmp_path), "dnn", "single", 1, 1, True, refs,
                                 {(s, m): uniform(refs[s], n) for s in refs
                                  for m, n in (("final", 3), ("ema", 1))}))
    out = tmp_path / "R.md"
    text = write_report(out, "--archs", "dnn", "--strategies", "single single+ema bmuf bmuf+ema",
                        "--replications", "100", *dirs)
    table = text.split("## Networks")[1].split("\n## ")[0]
    bmuf = [l for l in table.splitlines() if l.startswith("| DNN | BMUF |")]
    assert [l.split("|")[3].strip() for l in bmuf] == ["2", "8"]   # one row per worker count
    assert [l.split("|")[5].strip() for l in bmuf] == ["0.1", "0.1 (x8)"]   # each worker at 8x
    # the single worker's EMA gains more (30% -> 10%: -66.7%) than BMUF's at 8 workers (40% ->
    # 30%: -25.0%), on every resample (every utterance has the same errors)
    assert ("DNN, 8 workers: the EMA's relative gain for BMUF minus its gain for one worker = "
            "+41.7 [+41.7, +41.7] points (95%, one seed: utterances resampled, not training runs; "
            "0/1 seeds with the larger gain in parallel training; 11 comparisons in this report): "
            "**larger for one worker**: the EMA's gain is not specific to parallel training" in text)
    assert (tmp_path / "plots" / "cer_vs_workers.png").read_bytes()[:8] == PNG_MAGIC
    # one worker alone (its EMA compared in the table): none of the paper's claims is checkable
    (tmp_path / "alone").mkdir()
    alone = write_report(tmp_path / "alone" / "R.md", "--archs", "dnn", "--strategies",
                         "single single+ema", "--replications", "10", dirs[-1])
    assert "| DNN | 1 | single | single+EMA |" in alone
    assert "- No claim of the paper to check: each compares a row of parallel training" in alone


def test_a_report_rebuilt_from_its_counts_alone_is_the_same_report(tmp_path):
    import shutil

    refs = {"dev": reference_texts(12, seed=10), "test": reference_texts(12, seed=11)}
    dirs = []
    for seed in (1, 2):
        for strategy, workers, errors in (("single", 1, (2, 1)), ("bmuf", 2, (3, 2))):
            dirs.append(make_network_run(
                str(tmp_path / "exp"), "dnn", strategy, seed, workers, True, refs,
                {(s, m): alternating(refs[s], n + seed - 1, n) for s in refs
                 for m, n in (("final", errors[0]), ("ema", errors[1]))}))
    # a grid point of two settings, worse on dev (not decoded): the grid reads back in one order
    dirs.append(make_network_run(str(tmp_path / "exp"), "dnn", "bmuf", 1, 2, True, refs, {},
                                 acc0=0.1, settings=("sync.block_size=16",
                                                     "sync.block_momentum=0.75")))
    gmm = make_gmm_system(str(tmp_path / "exp"), "tri1", refs, 3)
    out = tmp_path / "RESULTS.md"
    text = write_report(out, "--archs", "dnn", "--strategies", "single single+ema bmuf bmuf+ema",
                        "--replications", "300", "--title", "A title", "--note", "command: x",
                        *dirs, gmm)
    assert sorted(os.listdir(tmp_path / "counts")) == ["systems.json", "utterances.tsv.gz"]
    shutil.rmtree(tmp_path / "exp")   # nothing but the counts is left
    rebuilt = tmp_path / "REBUILT.md"
    assert write_report(rebuilt, "--from-counts") == text
    assert "| DNN | BMUF+EMA | 2 | 2 |" in text
    assert "| block_momentum {0.5, 0.75}; block_size {4, 16} |" in text
    assert "| DNN | BMUF | 2 | 1 | block_momentum 0.75, block_size 16 | 25.00 | - |  |" in text
    result = CliRunner().invoke(main, ["report", "--from-counts", "--out", str(rebuilt), gmm])
    assert result.exit_code != 0 and "give no EXP_DIRS" in result.output


def test_counts_that_lack_a_seed_or_utterances_the_systems_list_are_refused(tmp_path):
    import gzip

    refs = {"dev": reference_texts(6, seed=10), "test": reference_texts(6, seed=11)}
    dirs = [make_network_run(str(tmp_path / "exp"), "dnn", "single", seed, 1, False, refs,
                             {(s, "final"): alternating(refs[s], seed, 2) for s in refs})
            for seed in (1, 2, 3)]
    write_report(tmp_path / "RESULTS.md", "--archs", "dnn", "--strategies", "single",
                 "--replications", "20", *dirs)
    counts = tmp_path / "counts" / "utterances.tsv.gz"
    with gzip.open(counts, "rt") as f:
        header, *lines = f.readlines()
    with gzip.open(counts, "wt") as f:   # seed 1's lines only
        f.writelines([header, *(line for line in lines if line.split("\t")[3] == "1")])
    rebuilt = tmp_path / "REBUILT.md"
    result = CliRunner().invoke(main, ["report", "--from-counts", "--out", str(rebuilt)],
                                catch_exceptions=False)
    assert result.exit_code == 1 and not rebuilt.exists()
    assert result.output.startswith(f"Error: {counts}: {os.path.relpath(dirs[1], tmp_path)} dev "
                                    "final: no per-utterance counts in utterances.tsv.gz, though "
                                    "systems.json records them at 1 scoring setting(s)"), \
        result.output
    # every seed, but two utterances of one system's dev missing: its sums are not its %WER's
    with gzip.open(counts, "wt") as f:
        f.writelines([header, *lines[2:]])
    result = CliRunner().invoke(main, ["report", "--from-counts", "--out", str(rebuilt)],
                                catch_exceptions=False)
    assert result.exit_code == 1 and not rebuilt.exists()
    assert "utterances add up to" in result.output and "expected every utterance of the decode" \
        in result.output, result.output


def test_the_counts_files_name_their_errors(tmp_path):
    import gzip

    from emasr.report.counts import read_counts, write_counts

    write_counts(str(tmp_path / "counts"), [], [], {"title": "t", "notes": []})
    assert read_counts(str(tmp_path / "counts"))[2] == {"title": "t", "notes": []}
    with gzip.open(tmp_path / "counts" / "utterances.tsv.gz", "wt") as f:
        f.write("system\tset\tmodel\tseed\tutt\tspeaker\tchars\terrors\n"
                "exp/a\tdev\tfinal\t1\tu1\ts1\t3\t1,x\n")
    with pytest.raises(ScoringError, match=r"utterances.tsv.gz:2: expected 8 tab-separated"):
        read_counts(str(tmp_path / "counts"))
    # a truncated gzip file names itself (it gave "Aborted!" once)
    whole = (tmp_path / "counts" / "utterances.tsv.gz").read_bytes()
    (tmp_path / "counts" / "utterances.tsv.gz").write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ScoringError, match=r"utterances.tsv.gz: not a whole gzip file"):
        read_counts(str(tmp_path / "counts"))
    (tmp_path / "counts" / "systems.json").write_text('{"version": 2,')
    with pytest.raises(ScoringError, match=r"systems.json:1: not JSON"):
        read_counts(str(tmp_path / "counts"))
    with pytest.raises(ScoringError, match=r"expected file .*missing/systems.json to exist"):
        read_counts(str(tmp_path / "missing"))


def test_the_loss_plot_stays_readable_when_a_run_diverges(tmp_path):
    import json

    from emasr.report.plots import training_loss_figure
    from emasr.report.systems import read_exp_dirs

    dirs = [make_network_run(str(tmp_path), "dnn", s, 1, n, False, {}, {}) for s, n in
            (("single", 1), ("ma", 8))]
    metrics = os.path.join(dirs[1], "metrics.jsonl")
    with open(metrics, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    records[4]["loss"] = 14000.0            # MA-8's loss spikes
    with open(metrics, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    networks, _ = read_exp_dirs(dirs)
    fig = training_loss_figure(networks, ["dnn"])
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    # the single run's losses (0.3 to 1.5) span a visible share of the axis next to the spike
    assert np.log10(1.5 / 0.3) / np.log10(high / low) > 0.1


@pytest.mark.parametrize("curves", [3, 15])
def test_a_long_legend_goes_below_the_panel_and_a_short_one_stays_on_it(curves):
    from emasr.report.plots import LEGEND_INSIDE, finish_axes, pyplot

    fig, ax = pyplot().subplots()
    for k in range(curves):   # curves that reach the top right, where a legend would sit
        ax.plot([1, 16], [5, 40 - k * 0.1], label=f"run {k}")
    finish_axes(ax)
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    below = legend.y1 <= ax.get_window_extent().y0
    assert below == (curves > LEGEND_INSIDE)
    pyplot().close(fig)


def test_the_ema_row_is_the_half_life_chosen_on_dev_and_the_others_are_listed(tmp_path):
    refs = {"dev": reference_texts(10, seed=12), "test": reference_texts(10, seed=13)}
    errors = {("dev", "final"): 3, ("test", "final"): 3,
              ("dev", "ema_1000"): 2, ("test", "ema_1000"): 4,     # worse on test, better on dev
              ("dev", "ema_3000"): 1, ("test", "ema_3000"): 5}
    exp = make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, False, refs,
                           {k: uniform(refs[k[0]], n) for k, n in errors.items()},
                           settings=("average.ema_half_life_frames=[1000, 3000]",))
    out = tmp_path / "R.md"
    text = write_report(out, "--archs", "dnn", "--strategies", "bmuf bmuf+ema",
                        "--replications", "100", exp)
    # dev chose ema_3000 (10% against 20%): the row reports its test CER, 50%, not the best 40%
    assert table_rows(text, "Networks")[("DNN", "BMUF+EMA")][8].startswith("50.00 [")
    section = text.split("## Averaged models chosen on dev")[1].split("\n## ")[0]
    sweep = [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
             if line.startswith("| DNN")]
    assert [cells[4] for cells in sweep] == ["ema_1000", "ema_3000"]
    assert [cells[9:] for cells in sweep] == [["20.00", "40.00", ""],
                                              ["10.00", "50.00", "**chosen**"]]


def test_runs_whose_models_are_from_their_best_dev_epoch_are_tuned_and_shown_by_it(tmp_path):
    # two grid points under train.final_epoch best_dev_acc: the lr 0.4 run ends below the lr 0.1
    # run but peaked above it at epoch 2 (its EMA at epoch 1); its model files are from those
    # epochs, so dev chooses it, and the table shows the peak's accuracy and epoch
    best = ("train.final_epoch=best_dev_acc",)
    steady, peaked = (make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, True, {}, {}, lr=lr,
                                       settings=best) for lr in (0.1, 0.4))
    epochs = epoch_records(peaked)
    epochs[1]["dev_acc"] += 0.5
    epochs[2]["dev_acc"] -= 0.2
    epochs[0]["dev_acc_ema"] += 0.5
    rewrite_epochs(peaked, epochs)
    assert selected(["bmuf", "bmuf+ema"], steady, peaked) == [peaked] * 2
    out = tmp_path / "R.md"
    text = write_report(out, "--archs", "dnn", "--strategies", "bmuf bmuf+ema",
                        "--replications", "10", steady, peaked)
    rows = table_rows(text, "Networks")
    assert rows[("DNN", "BMUF")][6] == "90.00 (epoch 2)"
    assert rows[("DNN", "BMUF+EMA")][6] == "86.00 (epoch 1)"
    assert "(train.final_epoch best_dev_acc)" in text


def test_the_ema_after_bmufs_warm_up_is_compared_with_the_one_from_the_first_sync(tmp_path):
    refs = {"dev": reference_texts(12, seed=14), "test": reference_texts(12, seed=15)}
    # every seed: dev chooses the half-life 1000 for both starts; at it the EMA started after the
    # warm-up makes 0 or 2 errors an utterance on test (10%), the one from the first sync 3 (30%);
    # at 3000 the two are the same decodes (the warm-up's weight faded)
    errors = {("dev", "final"): 3, ("test", "final"): 3, ("dev", "ema_1000"): 2,
              ("test", "ema_1000"): 3, ("dev", "ema-warm_1000"): 2, ("dev", "ema_3000"): 3,
              ("test", "ema_3000"): 3, ("dev", "ema-warm_3000"): 3, ("test", "ema-warm_3000"): 3}
    per_utt = {k: uniform(refs[k[0]], n) for k, n in errors.items()}
    per_utt[("test", "ema-warm_1000")] = alternating(refs["test"], 0, 2)
    settings = ("sync.warmup_blocks=2", "average.ema_half_life_frames=[1000, 3000]",
                "average.ema_after_warmup=true")
    exps = [make_network_run(str(tmp_path), "dnn", "bmuf", seed, 8, False, refs, per_utt,
                             settings=settings) for seed in (1, 2, 3)]
    out = tmp_path / "R.md"
    text = write_report(out, "--archs", "dnn", "--strategies", "bmuf bmuf+ema bmuf+ema-warm",
                        "--replications", "200", *exps)
    assert table_rows(text, "Networks")[("DNN", "BMUF+EMA after warm-up")][8].startswith("10.00 [")
    section = text.split("## Same test utterances")[1].split("\n## ")[0]
    compared = {(cells[2], cells[3]): cells for cells in
                ([c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()
                 if line.startswith("| DNN"))}
    assert compared[("BMUF+EMA", "BMUF+EMA after warm-up")][-2] == "yes"
    assert compared[("BMUF+ema_3000", "BMUF+ema-warm_3000")][6].startswith("+0.00 [+0.00, +0.00]")
    lines = [ln for ln in text.splitlines() if "warm-up against" in ln or "at the half-life" in ln]
    assert len(lines) == 3
    assert "**better after the warm-up**" in lines[0] and "3/3 seeds" in lines[0]
    assert "1000 frames: **better after the warm-up**" in lines[1]
    assert "3000 frames: **no difference**" in lines[2]
    # a row no run can have is refused before any work (the recipe checks its rows first)
    refused = CliRunner().invoke(main, ["report", "--select", "--strategies", "ma ma+ema-warm"])
    assert refused.exit_code != 0 and "'ma+ema-warm'" in refused.output and \
        "bmuf runs only" in refused.output


def test_a_committed_report_is_its_own_rebuild_from_counts(tmp_path):
    # the committed report is what `emasr report --from-counts` makes of its committed counts,
    # word for word (no line added by hand beside them)
    import shutil

    from conftest import REPO

    committed = REPO / "egs/aishell_sim/parity/eta075"
    shutil.copytree(committed / "counts", tmp_path / "counts")
    rebuilt = write_report(tmp_path / "RESULTS.md", "--from-counts")
    assert rebuilt == (committed / "RESULTS.md").read_text(encoding="utf-8")


def test_earlier_counts_stand_for_the_runs_whose_exp_dirs_are_gone(tmp_path):
    # a campaign in pieces on a fresh checkout: seed 1's piece committed its counts, its exp dirs
    # are gone, seed 2's piece reports both: the report of all four exp dirs, plus one note
    import shutil

    refs = {"dev": reference_texts(12, seed=20), "test": reference_texts(12, seed=21)}
    dirs = {seed: [make_network_run(str(tmp_path / "exp"), "dnn", strategy, seed, workers, True,
                                    refs, {(s, m): alternating(refs[s], n + seed, n) for s in refs
                                           for m, n in (("final", 2), ("ema", 1))})
                   for strategy, workers in (("single", 1), ("bmuf", 2))] for seed in (1, 2)}
    options = ["--archs", "dnn", "--strategies", "single bmuf bmuf+ema", "--replications", "200",
               "--note", "inputs: targets aaa, features bbb"]
    out = tmp_path / "RESULTS.md"
    whole = write_report(out, *options, *dirs[1], *dirs[2])
    write_report(out, *options, *dirs[1])           # seed 1's piece: its counts are committed
    shutil.copytree(tmp_path / "counts", tmp_path / "seed1")
    for exp_dir in dirs[1]:
        shutil.rmtree(exp_dir)
    text = write_report(out, *options, "--earlier-counts", str(tmp_path / "counts"), *dirs[2])
    note = (f"- earlier runs: 2 network run(s) and 0 GMM system(s) whose exp dirs are not here, "
            f"as recorded in {tmp_path / 'counts'} (their records and per-utterance counts)\n")
    assert note in text and text.replace(note, "") == whole
    # the counts written hold all four runs: the report rebuilds from them alone
    assert write_report(tmp_path / "REBUILT.md", "--from-counts") == text
    # an exp dir read now stands for its record: nothing is counted twice
    assert write_report(out, *options, "--earlier-counts", str(tmp_path / "counts"),
                        *dirs[2]) == text
    # runs trained on other network targets or features are not pooled with them
    result = CliRunner().invoke(main, ["report", "--out", str(out), *options[:-1],
                                       "inputs: targets ccc, features bbb", "--earlier-counts",
                                       str(tmp_path / "seed1"), *dirs[2]])
    assert result.exit_code == 1 and result.output.startswith(
        f"Error: {tmp_path / 'seed1' / 'systems.json'}: its runs were trained on other inputs "
        "than the runs read now (targets aaa, features bbb; now targets ccc, features bbb)"), \
        result.output
    result = CliRunner().invoke(main, ["report", "--from-counts", "--earlier-counts",
                                       str(tmp_path / "seed1"), "--out", str(out)])
    assert result.exit_code == 2 and "give no EXP_DIRS or --earlier-counts" in result.output
