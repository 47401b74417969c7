"""emasr sweep: the same comparisons across several reports' counts (one per setting)."""
from __future__ import annotations

import re

from click.testing import CliRunner

from emasr.cli import main
from report_synthetic import make_network_run, reference_texts

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def counts_of(root, ema_errors: dict[int, int]) -> str:
    """A report of one worker's runs (seed -> the EMA's errors per test utterance, the global
    model's 3 on every seed; dev alike) and its counts dir."""
    refs = {"dev": reference_texts(12, seed=1), "test": reference_texts(12, seed=2)}
    dirs = []
    for seed, ema in ema_errors.items():
        errors = {(s, "final"): {u: 3 for u in refs[s]} for s in refs}
        errors.update({(s, "ema"): {u: ema for u in refs[s]} for s in refs})
        dirs.append(make_network_run(str(root / "exp"), "dnn", "single", seed, 1, True, refs,
                                     errors))
    result = CliRunner().invoke(main, ["report", "--out", str(root / "RESULTS.md"), "--archs",
                                       "dnn", "--strategies", "single single+ema",
                                       "--replications", "200", *dirs])
    assert result.exit_code == 0, result.output
    return str(root / "counts")


def sweep(*args: str):
    return CliRunner().invoke(main, ["sweep", "--replications", "200", *args])


def table(text: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split(" | ") for line in text.splitlines()
            if line.startswith("| ") and not line.startswith("| setting")]
    return {r[0].strip(): [c.strip() for c in r] for r in rows}


def test_a_sweep_compares_each_setting_within_its_own_counts(tmp_path):
    # the EMA gains on every seed under one setting and loses on every seed under the other
    gains = counts_of(tmp_path / "a", {1: 1, 2: 2, 3: 1})
    losses = counts_of(tmp_path / "b", {1: 4, 2: 5, 3: 4})
    out, png = tmp_path / "SWEEP.md", tmp_path / "plots" / "sweep.png"
    result = sweep("--counts", f"lr/10={gains}", "--counts", f"lr/100={losses}",
                   "--compare", "single,single+ema", "--out", str(out), "--plot", str(png))
    assert result.exit_code == 0, result.output
    rows = table(out.read_text())
    assert list(rows) == ["lr/10", "lr/100"]
    a, b = rows["lr/10"], rows["lr/100"]
    assert a[5:7] == ["30.00", "13.33"] and b[5:7] == ["30.00", "43.33"]
    assert a[7].startswith("-55.6 [") and b[7].startswith("+44.4 [")
    assert a[8] == "3/3" and b[8] == "0/3"
    assert "at the family-wise 97.50% of these 2 comparisons" in out.read_text()
    assert png.read_bytes()[:8] == PNG_MAGIC
    # only the seeds asked for: seed 2 alone
    result = sweep("--counts", f"lr/10={gains}", "--compare", "single,single+ema", "--seeds",
                   "2", "--out", str(out))
    assert result.exit_code == 0, result.output
    only = table(out.read_text())["lr/10"]
    assert only[6] == "20.00" and only[8] == "1/1"
    assert re.search(r"seeds 2 of both rows", out.read_text())


def test_a_sweep_refuses_what_its_counts_cannot_answer(tmp_path):
    counts = counts_of(tmp_path / "a", {1: 1})
    out = tmp_path / "SWEEP.md"
    result = sweep("--counts", f"x={counts}", "--compare", "bmuf,bmuf+ema", "--out", str(out))
    assert result.exit_code != 0
    assert f"x ({counts}): no comparison of bmuf+ema against bmuf (its report's rows: single, " \
           "single+ema; with seeds [1])" in result.output
    result = sweep("--counts", f"x={tmp_path / 'none'}", "--compare", "single,single+ema",
                   "--out", str(out))
    assert result.exit_code != 0 and f"x: expected a counts dir at {tmp_path / 'none'}" in \
        result.output
    result = sweep("--counts", "no-label", "--compare", "single,single+ema", "--out", str(out))
    assert result.exit_code != 0 and "expected LABEL=COUNTS_DIR" in result.output
    result = sweep("--counts", f"x={counts}", "--compare", "single", "--out", str(out))
    assert result.exit_code != 0 and "expected A,B" in result.output
    result = sweep("--counts", f"x={counts}", "--compare", "single,single+ema", "--seeds", "7",
                   "--out", str(out))
    assert result.exit_code != 0 and "with seeds none" in result.output
    assert not out.exists()
