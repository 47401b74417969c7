"""The recipes' wiring: options, stage selection, done markers, the corpus check of egs/aishell and
the report stage. Each test runs a copy of the recipe in a temporary tree whose shared parts
(steps/, utils/, local/, conf/, path.sh, .venv) link to this repository, so no output lands in it.
The full tiny-profile run is tests/test_recipe_tiny.py (slow)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO, run_script
from recipe_helpers import fake_aishell, recipe_copy
from report_synthetic import make_network_run


def error_line(result) -> str:
    """The one `Error:` line a failed run printed (the console format)."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1, result.stdout[-2000:] + result.stderr
    return errors[0]


def test_help_and_bad_options():
    run = REPO / "egs" / "aishell_sim" / "run.sh"
    result = run_script([str(run), "--help"])
    assert result.returncode == 0
    assert "--stage N --stop-stage M" in result.stderr and "10 report" in result.stderr
    result = run_script([str(run), "--no-such-option", "1"])
    assert result.returncode == 1 and "--no-such-option" in result.stderr
    result = run_script([str(run), "extra-argument"])
    assert result.returncode == 1 and "Usage:" in result.stderr
    for option, value in (("--stop-stage", "11"), ("--stage", "-1")):
        result = run_script([str(run), option, value])
        assert result.returncode == 1, (option, value)
        assert f"{option} must be a stage number from 0 to 10, got '{value}'" in result.stderr
        assert "done" not in result.stdout
    result = run_script([str(run), "--stage", "abc"])   # parse_options: not a number
    assert result.returncode == 1 and "expected a number" in result.stderr
    result = run_script([str(run), "--strategies", "single bmuf+foo", "--stage", "10"])
    assert result.returncode != 0 and "'bmuf+foo': expected one of single, ma, bmuf" in result.stderr


def test_ctrl_c_stops_the_recipe_even_when_the_interrupted_command_exits_0(tmp_path):
    # a step that catches SIGINT (or gets it while exiting) and ends normally: bash alone would go
    # on to the next command; the recipe's trap stops it there
    script = tmp_path / "run.sh"
    script.write_text(f"""#!/usr/bin/env bash
set -euo pipefail
. {REPO}/utils/lib/recipe.sh
run {sys.executable} -c 'import signal, time; signal.signal(signal.SIGINT, lambda *a: None); \\
open("started", "w").close(); time.sleep(1)'
run touch next
""")
    script.chmod(0o755)
    proc = subprocess.Popen([str(script)], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists():
        assert time.monotonic() < deadline and proc.poll() is None, "the command never started"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 130, out
    assert "interrupted (SIGINT) in: " in out and "signal.SIGINT" in out
    assert not (tmp_path / "next").exists()


def test_a_stage_done_with_other_settings_stops_the_run(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    corpus = fake_aishell(tmp_path / "corpus")
    args = [str(recipe / "run.sh"), "--simulate", "false", "--corpus-dir", str(corpus),
            "--stage", "0", "--stop-stage", "0"]
    assert run_script(args + ["--profile", "tiny"], cwd=tmp_path).returncode == 0
    marker = recipe / "exp" / "done" / "stage0"
    assert "settings: profile=tiny corpus_dir=" in marker.read_text()
    # the small profile must not reuse the tiny profile's stage 0
    result = run_script(args + ["--profile", "small"], cwd=tmp_path)
    assert result.returncode == 1
    error = error_line(result)
    assert "stage 0 (corpus in" in error and "other settings" in error
    assert "profile: 'tiny' -> 'small'" in error and "Remove exp/done/stage0" in error
    assert run_script(args + ["--profile", "tiny"], cwd=tmp_path).returncode == 0   # as it was


def test_unknown_profile_is_an_error(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "huge"])
    assert result.returncode == 1
    assert "--profile must be tiny, small or large, not 'huge'" in result.stderr


def test_stage_zero_checks_the_corpus_and_is_skipped_when_done(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    corpus = fake_aishell(tmp_path / "corpus")
    args = [str(recipe / "run.sh"), "--profile", "tiny", "--simulate", "false",
            "--corpus-dir", str(corpus), "--stage", "0", "--stop-stage", "0"]
    first = run_script(args, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    marker = recipe / "exp" / "done" / "stage0"
    assert marker.read_text().split()[1] == "s,"
    assert "stage 0 done in" in first.stdout
    second = run_script(args, cwd=tmp_path)
    assert second.returncode == 0
    assert "stage 0 (corpus in" in second.stdout and "done already" in second.stdout
    # a corpus missing a file: stage 0 fails, names the file, and leaves no marker
    marker.unlink()
    (corpus / "resource_aishell" / "lexicon.txt").unlink()
    third = run_script(args, cwd=tmp_path)
    assert third.returncode == 1
    assert "expected file" in error_line(third) and "resource_aishell/lexicon.txt" in third.stderr
    assert not marker.exists()


def test_decoding_without_trained_networks_fails_clearly(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny", "--stage", "9",
                         "--stop-stage", "9"])
    assert result.returncode == 1
    assert "no trained network in exp/nnet" in error_line(result)


def test_nnet_train_opts_reach_train_sh_with_their_quoting(tmp_path):
    # no targets yet: train.sh gets past its option parsing (a wrongly split quoted value would
    # be a usage error) and stops at the missing input, naming it
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny", "--stage", "8",
                         "--stop-stage", "8", "--archs", "dnn", "--strategies", "single",
                         "--nnet-train-opts", "--torchrun-opts '--nnodes 1 --max-restarts 0'"])
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "--torchrun-opts '--nnodes 1 --max-restarts 0'" in output   # logged, quoted
    assert "Usage:" not in output and "expected file exp/nnet/targets" in output


def test_report_stage_writes_every_row_when_nothing_ran(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny", "--stage", "10",
                         "--archs", "dnn", "--strategies", "single bmuf bmuf+ema"])
    assert result.returncode == 0, result.stdout + result.stderr
    text = (recipe / "RESULTS.md").read_text()
    assert text.startswith("# Results: tiny profile")
    for label in ("single", "BMUF", "BMUF+EMA"):
        assert f"| DNN | {label} | not run |" in text
    assert "- machine: " in text and "--profile tiny" in text
    assert re.search(r"- machine: .*; torch \S+ \(CPU capability \w+\), numpy \S+\n", text)
    assert "(exp/nnet/targets/pdf.scp's archives) not built" in text   # no stage 7 here
    assert (recipe / "plots" / "dev_frame_accuracy.png").is_file()


def test_aishell_stage_zero_checks_layout_and_writes_lm_text_from_train_only(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell")
    recipe_copy(tmp_path, "aishell_sim")
    corpus = fake_aishell(tmp_path / "aishell")
    result = run_script([str(recipe / "run.sh"), "--corpus-dir", str(corpus), "--stop-stage", "0"],
                        cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "train: 2 wav files" in result.stdout
    lm_text = recipe / "data" / "local" / "lm_text" / "train_transcripts.txt"
    assert lm_text.read_text(encoding="utf-8") == "北京天气\n北京天气\n"
    assert (recipe / "exp" / "done" / "stage0").is_file()     # the shared stage 0 check ran here
    assert not (recipe.parent / "aishell_sim" / "exp").exists()


def test_aishell_requires_unpacking_the_tarballs(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell")
    corpus = fake_aishell(tmp_path / "aishell")
    packed = corpus / "data_aishell" / "wav"
    shutil.rmtree(packed / "dev")
    (packed / "S0724.tar.gz").write_bytes(b"")   # as shipped: one tarball per speaker
    result = run_script([str(recipe / "run.sh"), "--corpus-dir", str(corpus), "--stop-stage", "0"])
    assert result.returncode == 1
    assert "speaker tarballs" in error_line(result) and "--extract true" in error_line(result)


def planned_run(line: str) -> tuple[str, str, str, str]:
    """A line of runs.list (emasr experiment plan --lines): the run's dir, rule, workers on each
    node and its grid point's override ('' for none)."""
    import shlex

    fields = line.split("\t")
    options = shlex.split(fields[2])
    set_opts = options[options.index("--set-opts") + 1].split()
    point = set_opts[-1] if set_opts[-1].startswith("train.lr=") else ""
    return (fields[0], options[options.index("--strategy") + 1],
            options[options.index("--num-workers") + 1], point)


def test_a_worker_list_and_a_grid_train_each_strategy_at_each_count_and_point(tmp_path):
    # no targets yet: stage 8 lists its runs, then stops at the missing input
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny", "--stage", "8",
                         "--stop-stage", "8", "--archs", "dnn", "--num-workers", "2 4",
                         "--strategies", "single single+ema ma bmuf+avg",
                         "--grid", "ma: train.lr=0.1,0.4"])
    assert result.returncode == 1 and "expected file exp/nnet/targets" in result.stdout + result.stderr
    runs = [planned_run(line) for line in (recipe / "exp/nnet/runs.list").read_text().splitlines()]
    assert runs == [("exp/nnet/dnn_single_s1", "single", "1", ""),
                    ("exp/nnet/dnn_ma_n2_s1_lr0.1", "ma", "2", "train.lr=0.1"),
                    ("exp/nnet/dnn_ma_n2_s1_lr0.4", "ma", "2", "train.lr=0.4"),
                    ("exp/nnet/dnn_ma_n4_s1_lr0.1", "ma", "4", "train.lr=0.1"),
                    ("exp/nnet/dnn_ma_n4_s1_lr0.4", "ma", "4", "train.lr=0.4"),
                    ("exp/nnet/dnn_bmuf_n2_s1", "bmuf", "2", ""),
                    ("exp/nnet/dnn_bmuf_n4_s1", "bmuf", "4", "")]
    # the first run asks for its EMA (single+ema) and nothing else
    train_sh = next(l for l in result.stdout.splitlines() if "running: steps/nnet/train.sh" in l)
    assert "average.ema_half_life_frames=1500" in train_sh
    assert "average.cumulative_start" not in train_sh


def test_a_grid_seed_searches_the_grid_and_the_other_seeds_train_its_choice(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    nnet = recipe / "exp" / "nnet"
    # seed 1's MA grid trained, the better dev frame accuracy at lr 0.4
    for lr, acc0 in ((0.1, 0.2), (0.4, 0.3)):
        run = make_network_run(str(nnet), "dnn", "ma", 1, 2, False, {}, {}, lr=lr, acc0=acc0)
        (Path(run) / ".done").write_text("1 s\n")
    stage8 = [str(recipe / "run.sh"), "--profile", "tiny", "--stage", "8", "--stop-stage", "8",
              "--archs", "dnn", "--num-workers", "2", "--strategies", "single ma+ema",
              "--grid", "ma: train.lr=0.1,0.4", "--seeds", "1 2"]
    result = run_script([*stage8, "--grid-seed", "3"])
    assert result.returncode == 1
    assert "grid_seed: expected one of the seeds [1, 2], got 3" in error_line(result)
    result = run_script([*stage8, "--grid-seed", "1"])
    # no targets yet: stage 8 lists its runs, then stops at the missing input
    assert result.returncode == 1 and "expected file exp/nnet/targets" in result.stdout + result.stderr
    assert "exp/nnet/dnn_ma_n2_s1*: the grid point chosen on dev for the other seeds: _lr0.4" \
        in result.stderr
    runs = [planned_run(line) for line in (nnet / "runs.list").read_text().splitlines()]
    assert runs == [("exp/nnet/dnn_single_s1", "single", "1", ""),
                    ("exp/nnet/dnn_single_s2", "single", "1", ""),
                    ("exp/nnet/dnn_ma_n2_s1_lr0.1", "ma", "2", "train.lr=0.1"),
                    ("exp/nnet/dnn_ma_n2_s1_lr0.4", "ma", "2", "train.lr=0.4"),
                    ("exp/nnet/dnn_ma_n2_s2_lr0.4", "ma", "2", "train.lr=0.4")]
    # until the grid seed's grid is trained, the other seeds' point is unknown: not listed
    shutil.rmtree(nnet / "dnn_ma_n2_s1_lr0.1")
    result = run_script([*stage8, "--grid-seed", "1"])
    runs = [line.split("\t")[0] for line in (nnet / "runs.list").read_text().splitlines()]
    assert runs == ["exp/nnet/dnn_single_s1", "exp/nnet/dnn_single_s2",
                    "exp/nnet/dnn_ma_n2_s1_lr0.1", "exp/nnet/dnn_ma_n2_s1_lr0.4"]


def test_per_arch_options_and_the_network_dir_reach_the_runs(tmp_path):
    # workers/run.sh's options: the runs go to --nnet-dir, an arch's options follow the profile's
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny", "--stage", "8",
                         "--stop-stage", "8", "--archs", "dnn", "--strategies", "single",
                         "--nnet-dir", "exp/nnet_paper", "--dnn-opts", "model.hidden_layers=8",
                         "--lstm-opts", "model.num_layers=3"])
    assert result.returncode == 1 and "expected file exp/nnet/targets" in result.stdout + result.stderr
    runs = (recipe / "exp/nnet_paper/runs.list").read_text().splitlines()
    assert [line.split("\t")[0] for line in runs] == ["exp/nnet_paper/dnn_single_s1"]
    assert not (recipe / "exp/nnet/runs.list").exists()
    set_opts = result.stdout.split("--set-opts ", 1)[1].split("\n", 1)[0]
    assert "model.hidden_layers=2" in set_opts and "model.num_layers=3" not in set_opts
    assert set_opts.index("model.hidden_layers=2") < set_opts.index("model.hidden_layers=8")


def test_spec_opts_take_shell_words_so_a_value_may_hold_spaces(tmp_path):
    # each item a key of the spec, quoted as on a command line; the short names apply before them
    recipe = recipe_copy(tmp_path, "aishell_sim")
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny", "--stage", "8",
                         "--stop-stage", "8", "--archs", "dnn", "--seeds", "4",
                         "--spec-opts", "seeds='1 2' title='A title: two seeds' "
                         "grid='ma: train.lr=0.1,0.4; bmuf: sync.block_momentum=0.5'"])
    assert result.returncode == 1 and "expected file exp/nnet/targets" in result.stdout + result.stderr
    show = ["emasr", "experiment", "show", "--key"]
    spec = str(recipe / "exp" / "nnet.spec.yaml")
    assert run_script([*show, "seeds", spec]).stdout.split() == ["1", "2"]
    assert run_script([*show, "title", spec]).stdout.strip() == "A title: two seeds"
    assert "block_momentum" in run_script([*show, "grid", spec]).stdout
    result = run_script([str(recipe / "run.sh"), "--profile", "tiny", "--stage", "8",
                         "--spec-opts", "seeds"])
    assert result.returncode == 1 and "--spec-opts: 'seeds' is not key=value" in error_line(result)


def test_workers_per_process_and_nodes_reach_the_parallel_runs_and_divide_every_count(tmp_path):
    recipe = recipe_copy(tmp_path, "aishell_sim")
    stage8 = [str(recipe / "run.sh"), "--profile", "tiny", "--stage", "8", "--stop-stage", "8",
              "--archs", "dnn"]
    result = run_script([*stage8, "--num-workers", "2 4", "--workers-per-process", "4"])
    assert result.returncode == 1
    assert ("workers_per_process: 4 workers a process do not divide the 2 workers of workers[0]"
            in error_line(result))
    assert not (recipe / "exp/nnet/runs.list").exists()   # stopped before any work
    # no targets yet: the first run's train.sh command is logged, then it stops at the input
    for strategies, k in (("bmuf", "2"), ("single bmuf", "1")):
        result = run_script([*stage8, "--num-workers", "4", "--workers-per-process", "2",
                             "--strategies", strategies])
        assert "expected file exp/nnet/targets" in result.stdout + result.stderr
        assert f"--workers-per-process {k} " in result.stdout, strategies
    # M nodes: N / M workers on each; one worker's run stays on one node
    result = run_script([*stage8, "--num-workers", "2 3", "--num-nodes", "2"])
    assert result.returncode == 1
    assert "nodes: 2 nodes do not divide workers[1] = 3" in error_line(result)
    result = run_script([*stage8, "--num-workers", "4", "--num-nodes", "2",
                         "--strategies", "single bmuf"])
    assert "--num-workers 1 --num-nodes 1 " in result.stdout
    assert "expected file exp/nnet/targets" in result.stdout + result.stderr

