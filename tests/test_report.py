"""`emasr report` on synthetic exp dirs written in the trainer's and the scoring's formats."""
from __future__ import annotations

import os
import re

import pytest
from click.testing import CliRunner

from emasr.cli import main
from emasr.report.metrics import MetricsError, read_metrics
from emasr.report.scoring import ScoringError, read_decode_dir
from report_synthetic import (corrupt, make_gmm_system, make_network_run, reference_texts,
                              write_scored_decode)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def uniform(refs: dict[str, str], n: int) -> dict[str, int]:
    return {u: n for u in refs}


def alternating(refs: dict[str, str], a: int, b: int) -> dict[str, int]:
    return {u: (a if i % 2 else b) for i, u in enumerate(sorted(refs))}


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
    result = CliRunner().invoke(main, ["report", "--out", out, "--replications", "500",
                                       "--strategies", "single ma ma+ema bmuf bmuf+ema",
                                       "--note", "command: run.sh --profile tiny", *dirs, *gmms])
    assert result.exit_code == 0, result.output
    with open(out, encoding="utf-8") as f:
        text = f.read()
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
    assert rows[("LSTM", "BMUF")][7] == "-"
    assert rows[("LSTM", "BMUF")][14] == "9"


def test_cer_columns_have_intervals_around_the_scored_cer(experiment):
    rows = table_rows(experiment["text"], "Networks")
    expected_test = {"single": 20.0, "MA": 30.0, "MA+EMA": 20.0, "BMUF": 30.0, "BMUF+EMA": 10.0}
    for label, cer in expected_test.items():
        cell = rows[("DNN", label)][7]
        match = re.fullmatch(r"([\d.]+) \[([\d.]+), ([\d.]+)\]", cell)
        assert match, cell
        value, low, high = map(float, match.groups())
        assert value == pytest.approx(cer)
        assert low <= value <= high
    # a constant error count per utterance gives a zero-width interval; a varying one does not
    low, high = re.findall(r"\[([\d.]+), ([\d.]+)\]", rows[("DNN", "BMUF")][7])[0]
    assert float(low) < 30.0 < float(high)


def test_relative_changes_training_cost_and_tuned_learning_rate(experiment):
    rows = table_rows(experiment["text"], "Networks")
    bmuf_ema = rows[("DNN", "BMUF+EMA")]
    assert bmuf_ema[11] == "-66.7%"       # 10% against BMUF's 30%
    assert bmuf_ema[12] == "-50.0%"       # against single's 20%
    assert rows[("DNN", "single")][12] == "+0.0%"
    assert bmuf_ema[4] == "0.1"           # the lr=0.4 run has the worse dev frame accuracy
    assert bmuf_ema[5] == "48.00"         # 0.3 + 0.06 * 3 (EMA dev accuracy of the last epoch)
    assert rows[("DNN", "BMUF")][5] == "45.00"
    assert bmuf_ema[2] == "2" and rows[("DNN", "single")][2] == "1"
    assert rows[("DNN", "single")][13] == "60"      # 3 epochs of 20 s
    assert bmuf_ema[14] == "9" and bmuf_ema[15] == "36.0"   # 9 syncs x 4 MB
    assert rows[("DNN", "single")][15] == "0.0"
    assert bmuf_ema[8] == "10, 0.5" and bmuf_ema[10] == "0/0"   # dev's setting; no failed decode


def test_gmm_baselines_and_same_utterance_probabilities(experiment):
    text = experiment["text"]
    gmm = table_rows(text, "GMM-HMM baselines")
    mono = gmm[("mono", "50.00 [50.00, 50.00]")]
    tri1 = next(cells for k, cells in gmm.items() if k[0] == "tri1")
    assert tri1[1].startswith("40.00")
    # the ladder column: tri1 (4 errors in every utterance) against mono above it (5)
    assert mono[4] == "-" and tri1[4] == "1.000"
    body = text.split("## Same test utterances")[1].split("\n## ")[0]
    line = next(l for l in body.splitlines() if l.startswith("| DNN | 2 | BMUF | BMUF+EMA |"))
    p_b, p_a = map(float, [c.strip() for c in line.strip("|").split("|")][7:9])
    assert p_b == pytest.approx(1.0) and p_a == pytest.approx(0.0)


def test_findings_say_agree_and_not_resolved(experiment):
    findings = experiment["text"].split("## What agrees and what disagrees with the paper")[1]
    findings = findings.split("\n## ")[0]
    ema_line = next(l for l in findings.splitlines() if "improves on the global BMUF" in l)
    assert "**agrees**" in ema_line
    ma_bmuf = next(l for l in findings.splitlines() if "BMUF beats model averaging" in l)
    assert "**not resolved**" in ma_bmuf and "smaller than the 95% intervals" in ma_bmuf
    speed = next(l for l in findings.splitlines() if "DNN: the paper trains in parallel" in l)
    assert "speed-up 2.00x" in speed and "**agrees**" in speed
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
    assert result.output.split() == [d for d in experiment["dirs"] if "dnn_bmuf_s1_lr0.1" in d]


def test_report_with_nothing_run_still_has_every_row(tmp_path):
    empty = tmp_path / "exp_empty"
    empty.mkdir()
    out = tmp_path / "R.md"
    result = CliRunner().invoke(main, ["report", "--out", str(out), str(empty)])
    assert result.exit_code == 0, result.output
    rows = table_rows(out.read_text(), "Networks")
    assert len(rows) == 20 and all(r[2] == "not run" for r in rows.values())   # 10 labels x 2 archs
    assert (tmp_path / "plots" / "dev_frame_accuracy.png").read_bytes()[:8] == PNG_MAGIC
    assert "Speed-up against workers: not measured" in out.read_text()


def test_seeds_are_pooled_and_paired(tmp_path):
    refs = {"dev": reference_texts(10, seed=3), "test": reference_texts(10, seed=4)}
    dirs = []
    for seed, (bad, good) in ((1, (4, 2)), (2, (2, 0))):
        errors = {(s, "final"): uniform(refs[s], bad) for s in refs}
        errors.update({(s, "ema"): uniform(refs[s], good) for s in refs})
        dirs.append(make_network_run(str(tmp_path), "dnn", "bmuf", seed, 2, True, refs, errors))
    out = tmp_path / "R.md"
    result = CliRunner().invoke(main, ["report", "--out", str(out), "--archs", "dnn",
                                       "--replications", "300", *dirs])
    assert result.exit_code == 0, result.output
    rows = table_rows(out.read_text(), "Networks")
    assert rows[("DNN", "BMUF")][3] == "2"
    assert rows[("DNN", "BMUF")][7].startswith("30.00 [")            # (40% + 20%) / 2
    assert rows[("DNN", "BMUF")][7].endswith("(sd 14.14)")
    assert rows[("DNN", "BMUF")][8] == "10, 0.5 (2 seeds)"    # both seeds chose the same setting
    assert rows[("DNN", "BMUF+EMA")][7].startswith("10.00 [")


def test_scoring_reader_matches_kaldi_layouts(tmp_path):
    refs = reference_texts(5, seed=5)
    hyps = corrupt(refs, uniform(refs, 1))
    write_scored_decode(str(tmp_path / "a"), refs, hyps, lmwt=12, wip="1.0")
    a = read_decode_dir(str(tmp_path / "a"))
    assert (a.cer, a.errors, a.total, a.lmwt, a.wip) == (10.0, 5, 50, "12", "1.0")
    assert a.refs == {u: list(t) for u, t in refs.items()} and a.has_utterances
    write_scored_decode(str(tmp_path / "b"), refs, hyps, form="per_utt")
    b = read_decode_dir(str(tmp_path / "b"))
    assert b.hyps == a.hyps
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


def test_a_speed_up_beyond_the_worker_count_is_flagged_not_comparable(tmp_path):
    from emasr.report.findings import speed_lines
    from emasr.report.rows import build_rows
    from emasr.report.systems import read_exp_dirs

    dirs = [make_network_run(str(tmp_path), "dnn", "single", 1, 1, False, {}, {},
                             seconds_per_epoch=100),
            make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, False, {}, {},
                             seconds_per_epoch=10)]
    networks, _ = read_exp_dirs(dirs)
    [line] = speed_lines(build_rows(networks, ["dnn"], ["single", "bmuf"], 10))
    assert "speed-up 10.00x" in line and "**not comparable**" in line


def test_a_decisive_paired_test_with_overlapping_intervals_needs_agreeing_seeds():
    from emasr.report.findings import verdict
    from emasr.report.rows import Comparison

    def case(overlap, b_better, a_better, seeds, p_b=0.98, p_a=0.01):
        return verdict(Comparison("dnn", "ma", "bmuf", 2, 14.21, 13.08, 600, p_b, p_a, overlap,
                                  b_better, a_better, seeds), "better")

    assert case(False, 1, 0, 1).startswith("**agrees** (")
    one_seed = case(True, 1, 0, 1)
    assert one_seed.startswith("**agrees on these utterances, not resolved across runs**")
    assert "1 of 1 seed(s)" in one_seed and "more seeds are needed" in one_seed
    assert "not resolved across runs" in case(True, 2, 1, 3)
    three = case(True, 3, 0, 3)
    assert three.startswith("**agrees** (") and "all 3 of 3 seed(s) order them this way" in three
    worse = case(True, 0, 2, 2, p_b=0.01, p_a=0.97)
    assert worse.startswith("**disagrees: BMUF is worse on these utterances, not resolved")
    assert "0 of 2" not in worse and "2 of 2 seed(s)" in worse


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
    result = CliRunner().invoke(main, ["report", "--out", str(out), "--archs", "dnn",
                                       "--strategies", "bmuf", "--replications", "100", exp])
    assert result.exit_code == 0, result.output
    row = table_rows(out.read_text(), "Networks")[("DNN", "BMUF")]
    assert row[6].startswith("10.00 [")      # dev at its best: 1 error in 10 characters
    assert row[7].startswith("20.00 [")      # test at dev's setting (2.1, 0.5), not its own best
    assert row[8] == "2.1, 0.5" and row[9] == "10.00"   # Kaldi's best-on-test, beside it
    # 2.1 between 1.9 and 3: the acoustic scale 1/3 is 30% away, so the report asks for a
    # finer grid
    protocol = out.read_text().split("## Scoring protocol")[1].split("\n## ")[0]
    assert "chosen on dev, 2.1, has neighbours 1.9 and 3" in protocol


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
    result = CliRunner().invoke(main, ["report", "--out", str(out), "--archs", "dnn",
                                       "--strategies", "single single+ema bmuf bmuf+ema",
                                       "--replications", "100", *dirs])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    table = text.split("## Networks")[1].split("\n## ")[0]
    bmuf = [l for l in table.splitlines() if l.startswith("| DNN | BMUF |")]
    assert [l.split("|")[3].strip() for l in bmuf] == ["2", "8"]   # one row per worker count
    assert [l.split("|")[5].strip() for l in bmuf] == ["0.1", "0.1 (x8)"]   # each worker at 8x
    # the single worker's EMA gains more (30% -> 10%) than BMUF's at 8 workers (40% -> 30%)
    assert ("DNN, 8 workers: the EMA changes BMUF's test CER by -25.0% and a single worker's by "
            "-66.7% (relative): **the EMA's gain is not specific to parallel training here**"
            in text)
    assert (tmp_path / "plots" / "cer_vs_workers.png").read_bytes()[:8] == PNG_MAGIC
