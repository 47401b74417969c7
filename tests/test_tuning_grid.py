"""The tuning grid (emasr.nnet.config.tuning): a spec per sync rule -> one run per point, each named by
its values, and the experiment driver trains exactly those runs."""
import pytest
from click.testing import CliRunner

from emasr.nnet.sync import RULES
from emasr.nnet.config.tuning import GridError, grid_points, parse_grid, tuning_grid_cli
from emasr.report.systems import grid, read_network_run
from report_synthetic import make_network_run


def points(spec, rule):
    return grid_points(parse_grid(spec, RULES).get(rule, []))


def test_an_entry_is_the_product_of_its_values():
    assert points("bmuf: sync.block_momentum=0.875,0.75 sync.warmup_blocks=0,12", "bmuf") == [
        ("_eta0.875_warmup0", ["sync.block_momentum=0.875", "sync.warmup_blocks=0"]),
        ("_eta0.875_warmup12", ["sync.block_momentum=0.875", "sync.warmup_blocks=12"]),
        ("_eta0.75_warmup0", ["sync.block_momentum=0.75", "sync.warmup_blocks=0"]),
        ("_eta0.75_warmup12", ["sync.block_momentum=0.75", "sync.warmup_blocks=12"]),
    ]


def test_a_rule_named_twice_searches_the_union_once_per_point():
    spec = ("ma: train.lr=0.1,0.4; bmuf: sync.block_momentum=0.875,0.75; "
            "bmuf: sync.block_momentum=0.75 sync.warmup_blocks=12; bmuf: sync.block_momentum=0.75")
    assert [suffix for suffix, _ in points(spec, "bmuf")] == [
        "_eta0.875", "_eta0.75", "_eta0.75_warmup12"]
    assert points(spec, "ma") == [("_lr0.1", ["train.lr=0.1"]), ("_lr0.4", ["train.lr=0.4"])]


def test_a_rule_without_an_entry_runs_once_unnamed():
    assert points("ma: train.lr=0.1,0.4", "single") == [("", [])]
    assert points("", "bmuf") == [("", [])]


@pytest.mark.parametrize("spec, expected", [
    ("sgd: train.lr=0.1", "a rule among"),
    ("ma train.lr=0.1", "a rule among"),
    ("ma: model.hidden_dim=512", "a key among"),
    ("ma: train.lr", "is not key=v"),
    ("ma: train.lr=0.1,", "is not key=v"),
    ("ma: train.lr=0.1 train.lr=0.2", "names train.lr twice"),
    ("ma:", "names no setting"),
    # values the runs' config reads as one, or refuses: refused before any run trains
    ("ma: train.lr=0.1,0.10", r"train.lr has the value 0.1 twice \(0.1, 0.10\); expected each"),
    ("ma: train.lr=0.1,fast", "train.lr=fast: 'train.lr' must be a number"),
    ("bmuf: sync.block_momentum=0.5,1.5", "sync.block_momentum=1.5: "),
    # a key the rule does not read: its runs would be one run under several names
    ("ma: sync.block_momentum=0.875,0.75", "ma does not read sync.block_momentum"),
    ("single: sync.lr_times_workers=true,false", "single does not read sync.lr_times_workers"),
])
def test_a_bad_spec_names_its_entry(spec, expected):
    with pytest.raises(GridError, match=expected):
        parse_grid(spec, RULES)


def test_a_grid_of_a_rule_no_row_trains_is_refused():
    with pytest.raises(GridError, match=r"grid entry 'bmuf: train.lr=0.1,0.2': no row trains "
                                        r"bmuf \(the rows' rules: single, ma\)"):
        parse_grid("bmuf: train.lr=0.1,0.2", RULES, ["single", "ma"])


def test_experiment_driver_refuses_a_bad_grid_before_any_run(tmp_path):
    from conftest import REPO, run_script

    (tmp_path / "dnn.yaml").write_text("model: {type: dnn}\n")
    for grid, where in (("ma: train.lr=0.1,0.10", "grid.ma[0]: grid entry 'ma: train.lr=0.1,"),
                        ("bmuf: train.lr=0.1", "grid.bmuf: no row trains bmuf"),
                        ("ma: sync.block_momentum=0.5", "grid.ma[0]: grid entry 'ma: sync.")):
        (tmp_path / "spec.yaml").write_text(
            "archs: {dnn: {config: dnn.yaml}}\nrows: [single, ma]\n"
            f"grid: '{grid}'\n")   # the grid's text, as --grid gives it
        result = run_script([str(REPO / "steps/nnet/experiment.sh"), "spec.yaml", "t", "a", "b",
                             "c", "g", "m", str(tmp_path / "nnet")], cwd=tmp_path)
        assert result.returncode == 1
        errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1 and errors[0].startswith(f"Error: spec.yaml: {where}"), \
            result.stderr
        assert not (tmp_path / "nnet").exists()


def test_cli_prints_suffix_and_overrides_and_refuses_a_bad_spec():
    runner = CliRunner()
    out = runner.invoke(tuning_grid_cli, ["--grid", "ma: train.lr=0.1,0.4", "ma"])
    assert out.exit_code == 0 and out.output == "_lr0.1 train.lr=0.1\n_lr0.4 train.lr=0.4\n"
    out = runner.invoke(tuning_grid_cli, ["--grid", "ma: train.lr=0.1,0.4", "bmuf"])
    assert out.exit_code == 0 and out.output == "-\n"
    out = runner.invoke(tuning_grid_cli, ["--grid", "ma: lr=0.1", "ma"])
    assert out.exit_code == 1 and "Error: --grid: grid entry 'ma: lr=0.1': 'lr=0.1' is not key=v" \
        in out.output


def test_a_default_block_momentum_is_the_grid_point_it_ran_at(tmp_path):
    # one run left eta to its default (1 - 1/N = 0.5 at 2 workers), one named 0.75: the report's
    # grid holds the values they ran at, and a run that named the default is the same point
    runs = [make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, False, {}, {}, settings=s)
            for s in ((), ("sync.block_momentum=0.75",))]
    assert grid([read_network_run(r) for r in runs]) == {"sync.block_momentum": [0.5, 0.75]}
    named = make_network_run(str(tmp_path), "dnn", "bmuf", 1, 2, False, {}, {},
                             settings=("sync.block_momentum=0.5",))
    assert grid([read_network_run(r) for r in (runs[0], named)]) == {}
