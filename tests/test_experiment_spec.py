"""The experiment spec (emasr.experiment): every committed spec validates; a wrong key, name or
combination is refused naming the file and the key; `--set` overrides any key; the tiny
profile's plan is the runs and overrides the recipe trained before the spec (a fixture recorded
from main at 981d608, tests/experiment_recorder.py), and the recipe trains them again through it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from conftest import REPO
from emasr.cli import main
from emasr.experiment.checks import check
from emasr.experiment.plan import decoded_models, runs
from emasr.experiment.spec import SpecError, load
from test_toy_rule import damped  # noqa: F401  (the toy rule's fixture, registered per test)

RECIPE = REPO / "egs" / "aishell_sim"
SPECS = sorted(REPO.glob("egs/*/conf/experiment/*.yaml")) + sorted(
    REPO.glob("egs/*/conf/experiment.yaml"))
FIXTURE = REPO / "tests" / "fixtures" / "experiment_trainings.json"


@pytest.fixture
def in_recipe(monkeypatch):
    monkeypatch.chdir(RECIPE)   # a spec's paths are the recipe's


def spec_file(tmp_path: Path, changes: dict, base: str = "tiny") -> str:
    """The tiny spec with `changes` merged over its top-level keys, written to tmp_path."""
    values = yaml.safe_load((RECIPE / "conf/experiment" / f"{base}.yaml").read_text())
    values.update(changes)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def refused(path: str, sets=()) -> str:
    with pytest.raises(SpecError) as err:
        check(load(path, sets))
    return str(err.value)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_spec_validates(path, monkeypatch):
    monkeypatch.chdir(path.parents[2] if path.parent.name == "experiment" else path.parents[1])
    spec = load(str(path))
    check(spec)
    assert runs(spec, "exp/nnet")


@pytest.mark.usefixtures("in_recipe")
@pytest.mark.parametrize("changes, message", [
    ({"sedes": [1]}, "unknown key 'sedes'; known: archs, averages, "),
    ({"decode": {"beam": 13}}, "unknown configuration key 'decode.beam'; known: controls_at, "),
    ({"archs": {"dnn": {"config": "conf/nnet/dnn.yaml", "overide": []}}},
     "unknown configuration key 'archs.dnn.overide'"),
    ({"averages": {"emma": 1500}}, "unknown key 'averages.emma'; known: ema, ema-warm, avg, "),
    ({"seeds": "one"}, "'seeds[0]' must be an integer"),
])
def test_an_unknown_key_or_a_wrong_type_names_file_and_key(tmp_path, changes, message):
    path = spec_file(tmp_path, changes)
    assert refused(path).startswith(f"{path}: {message}")


@pytest.mark.usefixtures("in_recipe")
@pytest.mark.parametrize("changes, message", [
    ({"rows": ["single", "sgd"]}, "rows[1]: 'sgd': expected one of single, ma, bmuf, diloco"),
    ({"rows": ["single+ema-warm"]}, "rows[0]: 'single+ema-warm': the EMA started after "),
    ({"grid": {"sgd": [{"train.lr": [0.1]}]}}, "grid.sgd: expected a sync rule among"),
    ({"grid": {"diloco": [{"train.lr": [0.1]}]}}, "grid.diloco: no row trains diloco"),
    ({"grid": {"ma": [{"sync.block_momentum": [0.5]}]}},
     "grid.ma[0]: grid entry 'ma: sync.block_momentum=0.5': ma does not read"),
    ({"rule_overrides": {"sgd": []}}, "rule_overrides.sgd: expected a sync rule among"),
    ({"archs": {"cnn": {"config": "conf/nnet/dnn.yaml"}}}, "archs.cnn: expected an architecture"),
    ({"archs": {"lstm": {"config": "conf/nnet/dnn.yaml"}}},
     "archs.lstm.config: conf/nnet/dnn.yaml is a dnn (model.type), not a lstm"),
    ({"archs": {"dnn": {"config": "conf/nnet/dnn.yaml", "overrides": ["model.hiden=2"]}}},
     "archs.dnn: the single runs' config: unknown configuration key 'model.hiden'"),
    ({"workers": [8], "nodes": 3}, "nodes: 3 nodes do not divide workers[0] = 8"),
    ({"workers": [4, 8], "nodes": 2, "workers_per_process": 4},
     "workers_per_process: 4 workers a process do not divide the 2 workers of workers[0] = 4"),
    ({"grid_seed": 2}, "grid_seed: expected one of the seeds [1], got 2"),
    ({"warm_start_epochs": 2, "rows": ["ma", "bmuf"]},
     "warm_start_epochs: expected a row 'single'"),
    ({"warm_start_epochs": 12},
     "warm_start_epochs: expected 1 <= k < the epochs of every rule's runs (12 at fewest), got 12"),
    ({"warm_start_epochs": 4, "rule_epochs": {"bmuf": 4}},
     "warm_start_epochs: expected 1 <= k < the epochs of every rule's runs (4 at fewest), got 4"),
    ({"rule_epochs": {"sgd": 4}}, "rule_epochs.sgd: expected a sync rule among"),
    ({"rule_epochs": {"diloco": 4}}, "rule_epochs.diloco: no row trains diloco (the rows' rules: "
     "single, ma, bmuf)"),
    ({"rule_epochs": {"ma": 0}}, "rule_epochs.ma: expected epochs >= 1, got 0"),
    ({"rule_epochs": {"ma": "many"}}, "'rule_epochs.ma' must be"),
    ({"averages": {"avg": 0.5}}, "rows[1]: the row single+ema needs averages.ema"),
    ({"decode": {"controls_at": [4]}}, "decode.controls_at: 4 is no worker count of the runs"),
])
def test_an_unknown_name_or_an_impossible_combination_names_file_and_key(tmp_path, changes,
                                                                        message):
    path = spec_file(tmp_path, changes)
    assert refused(path).startswith(f"{path}: {message}"), refused(path)


@pytest.mark.usefixtures("in_recipe")
def test_set_overrides_any_key():
    spec = load("conf/experiment/tiny.yaml", [
        "seeds=1 2 3", "archs=dnn", "archs.dnn.overrides+=train.lr=0.2 train.momentum=0.5",
        "title=Results: one-off", "grid=ma: train.lr=0.1,0.2; bmuf: sync.block_momentum=0.5",
        "averages.ema=1000,3000", "decode.opts=--acwt 0.4", "rule_overrides.ma=[]"])
    check(spec)
    assert spec.seeds == [1, 2, 3] and list(spec.archs) == ["dnn"]
    assert spec.archs["dnn"].overrides[-2:] == ["train.lr=0.2", "train.momentum=0.5"]
    assert spec.title == "Results: one-off" and spec.decode.opts == "--acwt 0.4"
    # the grid's values as written: they name the run dirs (_lr0.1)
    assert spec.grid == {"ma": [{"train.lr": ["0.1", "0.2"]}],
                         "bmuf": [{"sync.block_momentum": ["0.5"]}]}
    assert spec.averages["ema"] == [1000, 3000] and spec.rule_overrides["ma"] == []
    longer = load("conf/experiment/tiny.yaml", ["rule_epochs.ma=16", "archs=dnn"])
    check(longer)
    assert {r.rule: r.train_options()[9] for r in runs(longer, "exp/nnet")} == \
        {"single": "12", "ma": "16", "bmuf": "12"}   # MA-N's the epochs it needs to converge
    ma = [r for r in runs(spec, "exp/nnet") if r.rule == "ma"]
    assert [r.dir for r in ma] == [f"exp/nnet/dnn_ma_n2_s{s}_lr{lr}" for s in (1, 2, 3)
                                   for lr in (0.1, 0.2)]
    assert "average.ema_half_life_frames=[1000,3000]" in ma[0].overrides
    assert ma[0].overrides[-1] == "train.lr=0.1"   # the grid point last: it is what is searched
    with pytest.raises(SpecError, match="conf/experiment/tiny.yaml: --set archs='cnn': the spec "
                                        "has no architecture 'cnn'"):
        load("conf/experiment/tiny.yaml", ["archs=cnn"])


def train_calls(spec, nnet_dir="exp/nnet") -> list[list[str]]:
    """The train.sh calls steps/nnet/experiment.sh makes of a plan (as the fixture recorded
    them, the recipe's data and launcher)."""
    data = ["exp/nnet/targets", "data/train_fbank", "data/dev_fbank"]
    calls = []
    for run in runs(spec, nnet_dir):
        warm = ["--init-model", run.init_model] if run.init_model else []
        calls.append(["--cmd", "run.pl", *run.train_options(), "--resume", "true",
                      "--trans-mdl", "exp/nnet_tree/final.mdl", *warm, *data, run.dir])
    return calls


@pytest.mark.usefixtures("in_recipe")
def test_the_tiny_plan_is_what_the_recipe_trained_before_the_spec():
    recorded = json.loads(FIXTURE.read_text())["tiny"]
    assert train_calls(load("conf/experiment/tiny.yaml")) == recorded
    assert len(recorded) == 6   # dnn and lstm x single, MA-2, BMUF-2


def test_the_recipe_trains_the_same_runs_through_the_spec(tmp_path):
    # run.sh stage 8 -> its spec -> steps/nnet/experiment.sh -> train.sh (a stand-in that records)
    from experiment_recorder import CASES, normalized, record

    expected = json.loads(FIXTURE.read_text())
    for name, options in CASES.items():
        calls = [normalized(c) for c in record(REPO, tmp_path / name, options)]
        assert calls == expected[name], name
    resolved = yaml.safe_load((tmp_path / "options/exp/nnet/experiment.yaml").read_text())
    assert resolved["workers"] == [4, 8] and resolved["rule_overrides"]["ma"] == []


def test_cli_validates_plans_and_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(RECIPE)
    runner = CliRunner()
    out = runner.invoke(main, ["experiment", "validate", "conf/experiment/tiny.yaml"])
    assert out.exit_code == 0 and out.output == \
        "conf/experiment/tiny.yaml: valid (6 training runs at most)\n"
    out = runner.invoke(main, ["experiment", "plan", "--nnet-dir", str(tmp_path),
                               "conf/experiment/tiny.yaml", "--set", "archs=dnn"])
    assert out.exit_code == 0
    assert out.output.splitlines()[0] == (
        f"todo {tmp_path}/dnn_single_s1: --nnet-config conf/nnet/dnn.yaml --num-workers 1 "
        "--num-nodes 1 --strategy single --epochs 12 --workers-per-process 1")
    (tmp_path / "dnn_single_s1").mkdir()
    (tmp_path / "dnn_single_s1/.done").write_text("1 s\n")
    out = runner.invoke(main, ["experiment", "plan", "--lines", "--nnet-dir", str(tmp_path),
                               "conf/experiment/tiny.yaml", "--set", "archs=dnn"])
    assert out.output.splitlines()[0].split("\t")[:2] == [f"{tmp_path}/dnn_single_s1", "done"]
    out = runner.invoke(main, ["experiment", "show", "--key", "decode.opts",
                               "conf/experiment/tiny.yaml"])
    assert out.output == "--acwt 0.5 --beam 10 --lattice-beam 4\n"
    out = runner.invoke(main, ["experiment", "validate", "conf/experiment/tiny.yaml",
                               "--set", "rows=single bmuf+emma"])
    assert out.exit_code == 1 and out.output.startswith(
        "Error: conf/experiment/tiny.yaml: rows[1]: 'bmuf+emma': expected one of")


@pytest.mark.usefixtures("in_recipe")
def test_a_control_is_decoded_only_at_its_worker_counts(tmp_path):
    spec = load("conf/experiment/tiny.yaml", ["archs=dnn", "decode.controls_at=[1]"])
    bmuf = next(r for r in runs(spec, str(tmp_path)) if r.rule == "bmuf")
    Path(bmuf.dir).mkdir(parents=True)
    for model in ("ema", "avg", "lastk"):
        (Path(bmuf.dir) / f"{model}.pt").touch()
    assert decoded_models(spec, bmuf) == ["final", "ema"]   # avg, lastk: controls, not at N = 2
    spec = load("conf/experiment/tiny.yaml", ["archs=dnn"])
    assert decoded_models(spec, bmuf) == ["final", "ema", "avg", "lastk"]




@pytest.mark.usefixtures("in_recipe", "damped")
def test_a_rule_registered_anywhere_is_a_spec_row_with_its_grid():
    spec = load("conf/experiment/tiny.yaml", [
        "archs=dnn", "rows=single damped damped+ema", "grid.damped=[{sync.damping: [0.5, 1.0]}]"])
    check(spec)
    planned = [(r.dir, r.overrides[-2:]) for r in runs(spec, "exp/nnet")]
    assert planned[1:] == [
        ("exp/nnet/dnn_damped_n2_s1_damp0.5",
         ("average.ema_half_life_frames=1500", "sync.damping=0.5")),
        ("exp/nnet/dnn_damped_n2_s1_damp1.0",
         ("average.ema_half_life_frames=1500", "sync.damping=1.0"))]


@pytest.mark.usefixtures("in_recipe")
def test_runs_in_earlier_counts_are_not_trained_again_and_their_grid_choice_stands(tmp_path):
    # seed 1 searched BMUF's block momentum in an earlier piece whose exp dirs are gone (a fresh
    # checkout); its committed counts stand for them: seed 2 trains the point seed 1 chose
    import shutil

    from emasr.experiment.plan import decodes
    from report_synthetic import make_network_run, reference_texts

    nnet = tmp_path / "exp"
    sets = ["archs=dnn", "rows=single bmuf", "seeds=1 2", "grid_seed=1",
            "grid=bmuf: sync.block_momentum=0.5,0.75"]
    spec = load("conf/experiment/tiny.yaml", sets)
    refs = {"dev": reference_texts(6, seed=1), "test": reference_texts(6, seed=2)}

    def train(run, acc0):
        made = make_network_run(str(tmp_path / "made"), "dnn", run.rule, run.seed, run.workers,
                                False, refs, {}, acc0=acc0)
        shutil.move(made, run.dir)
        Path(run.dir, ".done").write_text("1 s\n")

    seed1 = [r for r in runs(spec, str(nnet)) if r.seed == 1]
    assert [Path(r.dir).name for r in seed1] == [
        "dnn_single_s1", "dnn_bmuf_n2_s1_eta0.5", "dnn_bmuf_n2_s1_eta0.75"]
    for run, acc0 in zip(seed1, (0.3, 0.2, 0.4)):   # 0.75 the better on dev
        train(run, acc0)
    report = CliRunner().invoke(main, ["report", "--out", str(tmp_path / "r/RESULTS.md"),
                                       "--archs", "dnn", *(r.dir for r in seed1)])
    assert report.exit_code == 0, report.output
    shutil.rmtree(nnet)

    spec = load("conf/experiment/tiny.yaml", [*sets, f"earlier_counts={tmp_path}/r/counts"])
    check(spec)
    planned = runs(spec, str(nnet))
    assert [(Path(r.dir).name, r.state) for r in planned] == [
        ("dnn_single_s1", "recorded"), ("dnn_single_s2", "todo"),
        ("dnn_bmuf_n2_s1_eta0.5", "recorded"), ("dnn_bmuf_n2_s1_eta0.75", "recorded"),
        ("dnn_bmuf_n2_s2_eta0.75", "todo")]
    assert planned[0].line().split("\t")[1] == "recorded"
    for run in planned:
        if run.state == "todo":
            train(run, 0.3)
    # only what was trained here is decoded; the report's choice among seed 1's grid is its own
    assert [(Path(d).name, m) for d, m in decodes(spec, str(nnet))] == [
        ("dnn_single_s2", "final"), ("dnn_bmuf_n2_s2_eta0.75", "final")]
    assert "earlier_counts: expected a counts dir" in refused(
        spec_file(tmp_path, {"earlier_counts": str(tmp_path / "none")}))


@pytest.mark.usefixtures("in_recipe")
def test_a_recorded_warm_start_trains_again_and_must_give_the_recorded_runs_parameters(tmp_path):
    # one worker and BMUF-2 from its epoch-2 checkpoint landed in an earlier piece whose dirs are
    # gone; MA-2, still to train, needs that checkpoint: the one-worker run trains again, and the
    # recorded BMUF-2 must have started from the parameters the checkpoint here holds
    import shutil

    import torch

    from emasr.nnet.training import checkpoint, regime as regimes
    from emasr.nnet.training.warm_start import tensors_sha256
    from report_synthetic import make_network_run, reference_texts

    nnet = tmp_path / "exp"
    sets = ["archs=dnn", "rows=single ma bmuf", "warm_start_epochs=2"]
    refs = {"dev": reference_texts(6, seed=1), "test": reference_texts(6, seed=2)}
    start = torch.linspace(-1, 1, 7)

    def train(run):
        made = make_network_run(str(tmp_path / "made"), "dnn", run.rule, run.seed, run.workers,
                                False, refs, {})
        shutil.move(made, run.dir)
        Path(run.dir, ".done").write_text("1 s\n")

    single, ma, bmuf = runs(load("conf/experiment/tiny.yaml", sets), str(nnet))
    assert bmuf.init_model == ma.init_model == f"{single.dir}/checkpoints/epoch002-block000000"
    for run in (single, bmuf):
        train(run)
    regime = regimes.read(bmuf.dir)
    regime["init_model"] = {"path": bmuf.init_model, "sha256": "0" * 64, "epochs": 2,
                            "parameters_sha256": tensors_sha256([start])}
    regimes.write(regime, bmuf.dir)
    report = CliRunner().invoke(main, ["report", "--out", str(tmp_path / "r/RESULTS.md"),
                                       "--archs", "dnn", single.dir, bmuf.dir])
    assert report.exit_code == 0, report.output
    shutil.rmtree(nnet)

    spec = load("conf/experiment/tiny.yaml", [*sets, f"earlier_counts={tmp_path}/r/counts"])
    assert [(Path(r.dir).name, r.state) for r in runs(spec, str(nnet))] == [
        ("dnn_single_s1", "todo"), ("dnn_ma_n2_s1", "todo"), ("dnn_bmuf_n2_s1", "recorded")]
    # the one-worker run trained again to the same parameters: the plan stands
    state = Path(ma.init_model) / checkpoint.STATE
    state.parent.mkdir(parents=True)
    checkpoint.save({"rule": {"global_model": start.clone()}}, str(state))
    assert [r.state for r in runs(spec, str(nnet))] == ["todo", "todo", "recorded"]
    # to others: refused, naming the recorded run and the checkpoint
    checkpoint.save({"rule": {"global_model": start + 1e-6}}, str(state))
    with pytest.raises(ValueError, match=f"{bmuf.dir} .the earlier counts. started from "
                                         f"parameters with sha256 {tensors_sha256([start])[:12]}"):
        runs(spec, str(nnet))
    # without earlier counts nothing is recorded and nothing is checked
    assert [r.state for r in runs(load("conf/experiment/tiny.yaml", sets), str(nnet))] == \
        ["todo"] * 3
