"""A sync rule is one module plus one registration: the toy rule below, written here and registered
through emasr.nnet.sync.register, trains, gets its regime file, is searched by the tuning grid and
appears in every table and plot of the report, with no file of emasr touched for it."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest
import torch
from click.testing import CliRunner

from emasr.cli import main
from emasr.nnet import config as configs
from emasr.nnet.sections import ConfigError, Section
from emasr.nnet.sync import RULES, SyncRule, register, unregister
from emasr.nnet.sync.state import copy_or_none
from emasr.nnet.config.tuning import grid_points, parse_grid, rule_settings
from emasr.report import plots
from nnet_synthetic import TINY_DNN
from report_synthetic import make_network_run, reference_texts
from test_nnet_train import problem, train  # noqa: F401  (the tiny training problem)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- the toy rule's module ------------------------------------------------------------------------

@dataclass
class DampedOptions(Section):
    """The toy rule's keys in the `sync` section."""
    damping: float = 0.5   # the share of the way from W_g to the workers' mean taken per sync


def check_damped(config) -> None:
    if not 0.0 < config.sync.damping <= 1.0:
        raise ConfigError(f"sync.damping must be in (0, 1], got {config.sync.damping}")


class DampedAveraging:
    """W_g <- W_g + damping * (W̄ - W_g); every worker restarts from W_g (damping 1: MA)."""
    name = "damped"
    communicates = True

    def __init__(self, damping: float) -> None:
        self.damping = damping
        self.global_model: torch.Tensor | None = None

    @classmethod
    def from_config(cls, sync, workers: int) -> "DampedAveraging":
        return cls(sync.damping)

    def start(self, initial: torch.Tensor) -> None:
        self.global_model = initial.detach().clone()

    def step(self, average: torch.Tensor) -> torch.Tensor:
        self.global_model.lerp_(average, self.damping)
        return self.global_model

    def state_dict(self) -> dict:
        return {"global_model": copy_or_none(self.global_model)}

    def load_state_dict(self, state: dict) -> None:
        self.global_model = copy_or_none(state["global_model"])


# -- its registration ---------------------------------------------------------------------------

DAMPED = SyncRule("damped", "Damped", "tab:purple", DampedAveraging.from_config, DampedOptions,
                  check_damped, tuned={"sync.damping": "damp"},
                  regime={"damping": lambda sync, workers: sync.damping},
                  regime_columns=(("damping", "damping", "g"),), compared_with=("single",))


@pytest.fixture
def damped():
    register(DAMPED)
    try:
        yield DAMPED
    finally:
        unregister(DAMPED.name)


# -- the checks ---------------------------------------------------------------------------------

def test_the_toy_rule_trains_two_workers_and_records_its_regime(problem, tmp_path,  # noqa: F811
                                                                damped):
    exp = tmp_path / "exp"
    result = train(problem, exp, TINY_DNN + [
        "train.epochs=3", "train.lr=0.1", "sync.strategy=damped", "sync.damping=0.5",
        "dist.workers_per_process=2", "average.ema_decay=0.5"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in open(exp / "metrics.jsonl")]
    epochs = [r for r in records if r["type"] == "epoch"]
    assert len(epochs) == 3 and epochs[-1]["dev_loss"] < records[0]["loss"], epochs
    assert os.path.isfile(exp / "final.pt") and os.path.isfile(exp / "ema.pt")
    regime = json.load(open(exp / "regime.json"))
    # what its entry adds, and the other rules' keys at null
    assert regime["strategy"] == "damped" and regime["workers"] == 2
    assert regime["damping"] == 0.5
    assert regime["block_momentum"] is None and regime["data_rule_met"] is None
    assert [e["name"] for e in regime["emas"]] == ["ema"]
    # its keys are in the saved config, and checked
    assert configs.load(exp / "conf.yaml")["sync"]["damping"] == 0.5
    with pytest.raises(ConfigError, match="sync.damping must be in"):
        configs.resolve(None, ["sync.strategy=damped", "sync.damping=0"])
    # and a choice of the CLI's --strategy
    assert "damped" in CliRunner().invoke(main, ["train", "--help"]).output


def test_the_tuning_grid_searches_the_toy_rules_key_under_its_tag(damped):
    assert "sync.damping" in rule_settings(damped)
    assert "sync.lr_times_workers" in rule_settings(damped)   # a parallel rule
    grid = parse_grid("damped: sync.damping=0.25,0.5 train.lr=0.1", RULES)
    assert grid_points(grid["damped"]) == [
        ("_damp0.25_lr0.1", ["sync.damping=0.25", "train.lr=0.1"]),
        ("_damp0.5_lr0.1", ["sync.damping=0.5", "train.lr=0.1"])]
    out = CliRunner().invoke(main, ["tuning-grid", "--grid", "damped: sync.damping=0.25,0.5",
                                    "--rules", "single damped", "damped"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == ["_damp0.25 sync.damping=0.25", "_damp0.5 sync.damping=0.5"]
    # a value the config refuses, and a key another rule reads, are refused before any run
    refused = CliRunner().invoke(main, ["tuning-grid", "--grid", "damped: sync.damping=2",
                                        "damped"])
    assert refused.exit_code != 0 and "sync.damping must be in" in refused.output
    refused = CliRunner().invoke(main, ["tuning-grid", "--grid",
                                        "damped: sync.block_momentum=0.5", "damped"])
    assert refused.exit_code != 0 and "damped does not read sync.block_momentum" in refused.output


def test_the_report_gives_the_toy_rule_its_rows_comparisons_and_curves(tmp_path, damped,
                                                                      monkeypatch):
    refs = {"dev": reference_texts(20, seed=1), "test": reference_texts(20, seed=2)}

    def errors(final: int, ema: int) -> dict:
        return {(s, m): {u: n for u in refs[s]} for s in refs
                for m, n in (("final", final), ("ema", ema))}

    nnet = str(tmp_path / "nnet")
    dirs = [make_network_run(nnet, "dnn", "single", 1, 1, True, refs, errors(3, 2)),
            make_network_run(nnet, "dnn", "bmuf", 1, 2, True, refs, errors(3, 2))]
    # the toy rule at two worker counts, a grid over its own key at N = 2 (dev chooses 0.25)
    for workers, damping, acc0 in ((2, 0.25, 0.3), (2, 0.5, 0.2), (4, 0.25, 0.3)):
        dirs.append(make_network_run(nnet, "dnn", "damped", 1, workers, True, refs, errors(2, 1),
                                     acc0=acc0, settings=(f"sync.damping={damping}",)))
    labels = {}

    def spy(fig, path):   # the legend of every plot written
        labels[os.path.basename(path)] = [text for ax in fig.axes
                                          for text in ax.get_legend_handles_labels()[1]]
        return save(fig, path)

    save = plots.save
    monkeypatch.setattr(plots, "save", spy)
    out = tmp_path / "RESULTS.md"
    result = CliRunner().invoke(main, ["report", "--out", str(out), "--replications", "200",
                                       "--archs", "dnn", "--strategies",
                                       "single single+ema bmuf bmuf+ema damped damped+ema",
                                       *dirs])
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    table = text.split("## Networks")[1].split("\n## ")[0]
    assert "| DNN | Damped | 2 |" in table and "| DNN | Damped | 4 |" in table
    assert "| DNN | Damped+EMA | 2 |" in table
    assert "damping {0.25, 0.5}" in table   # its tuned key, searched on dev
    assert "damping 0.25" in text.split("## Baselines searched on dev")[1].split("\n## ")[0]
    # its regime, with the column its entry adds (the other rules' '-')
    regime = text.split("## Regime")[1].split("\n## ")[0]
    assert "| block lr | damping | time constant" in regime
    assert "| DNN | Damped | 4 |" in regime and "| - | - | 0.25 | - | - | - |" in regime
    # its entry's comparisons: against one worker, and its global model against its EMA
    same = text.split("## Same test utterances")[1].split("\n## ")[0]
    assert "| single | Damped |" in same and "| Damped | Damped+EMA |" in same
    # a parallel rule: a parity test against one worker and the EMA's specificity
    assert "DNN, 2 workers, Damped against one worker on dev" in text
    assert "the EMA's relative gain for Damped minus its gain for one worker" in text
    # every plot draws it: the curves per run, and CER against the worker count
    assert "damped N=2 global" in labels["dev_frame_accuracy.png"]
    assert "damped N=4 train" in labels["training_loss.png"]
    assert {"damped", "damped+ema"} <= set(labels["cer_vs_workers.png"])
