"""slurm.pl and multi-node training against a real Slurm: two nodes (n1, n2, one CPU each) on this
machine, started for this module by tests/slurm/cluster.sh and stopped after it. Skipped, with the
reason in the summary, only where the machine cannot run Slurm (not root, no apt-get)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from conftest import REPO, find_process, run_script
from emasr.nnet.training import checkpoint
from emasr.parallel.grid import SCHEDULERS

CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "EMASR_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """The cluster's environment (SLURM_CONF) for the commands the tests run."""
    state = tmp_path_factory.mktemp("slurm")
    started = subprocess.run([str(CLUSTER), "start", str(state)], capture_output=True, text=True)
    if started.returncode == 2:
        pytest.skip(started.stderr.strip().splitlines()[-1])
    assert started.returncode == 0, started.stderr
    yield {"SLURM_CONF": str(state / "slurm.conf")}
    subprocess.run([str(CLUSTER), "stop", str(state)], check=True)


def slurm_pl(args, cwd, env, **kwargs):
    return run_script([str(REPO / "utils" / "slurm.pl"), *args], cwd=cwd, env=env, **kwargs)


def queue_empty(env) -> bool:
    out = subprocess.run(["squeue", "-h"], capture_output=True, text=True, env={**os.environ, **env})
    return out.returncode == 0 and out.stdout.strip() == ""


def test_an_array_runs_on_both_nodes_throttled_with_kaldi_logs(slurm, tmp_path):
    result = slurm_pl(["--max-jobs-run", "1", "--num-threads", "1", "--mem", "100M", "JOB=1:2",
                       "exp/log/a.JOB.log", "echo task JOB; sleep 1"], tmp_path, slurm)
    assert result.returncode == 0, result.stderr
    submit = (tmp_path / "exp/q/a.sh").read_text().splitlines()[-1]
    assert "--array=1-2%1" in submit and "--mem-per-cpu 100M" in submit
    assert "--cpus-per-task 1" in submit
    spans = []
    for task in (1, 2):
        log = (tmp_path / f"exp/log/a.{task}.log").read_text()
        assert f"task {task}\n" in log and "# Ended (code 0)" in log
        assert re.search(r"^# Running on \S+ \(Slurm job \d+, node n[12]\)$", log, re.M), log
        spans.append(os.stat(tmp_path / f"exp/log/a.{task}.log").st_mtime)
    # %1: one task at a time, each about a second, so the second ended a second after the first
    assert max(spans) - min(spans) >= 0.9


def test_a_failing_task_is_named_with_its_error_line(slurm, tmp_path):
    command = '[ JOB -ne 2 ] || { echo "ERROR: task two fails"; exit 3; }'
    result = slurm_pl(["JOB=1:3", "exp/log/f.JOB.log", command], tmp_path, slurm)
    assert result.returncode == 1
    assert "Error: exp/log/f.2.log: ERROR: task two fails" in result.stderr
    assert "slurm.pl: 1 / 3 failed, log is in exp/log/f.*.log" in result.stderr
    assert "# Ended (code 3)" in (tmp_path / "exp/log/f.2.log").read_text()


def test_a_task_cancelled_by_the_scheduler_is_named_as_such(slurm, tmp_path):
    launcher = subprocess.Popen([str(REPO / "utils" / "slurm.pl"), "JOB=1:2", "exp/log/c.JOB.log",
                                 "echo started; [ JOB -eq 1 ] || sleep 60"], cwd=tmp_path,
                                env={**os.environ, **slurm}, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "exp/log/c.2.log"
    job = wait_for(lambda: log.exists() and "started" in log.read_text() and
                   re.search(r"Slurm job (\d+)", log.read_text()).group(1))
    array = re.search(r"Submitted batch job (\d+)", (tmp_path / "exp/q/c.log").read_text()).group(1)
    subprocess.run(["scancel", f"{array}_2"], check=True, env={**os.environ, **slurm})
    _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 1
    assert re.search(rf"slurm.pl: task 2 \(Slurm job {job} on n[12]\) was cancelled at \S+ by "
                     r"scancel or an administrator; log is in exp/log/c.2.log", stderr), stderr
    # the job's runner outlived the SIGTERM to write the footer and the status. The scheduler
    # signals every process of the job: bash dies of the SIGTERM itself ("signal 15"), or, when
    # its child `sleep` died first and bash reached its end before handling its own, exits with
    # the child's 143 (a race inside bash; both are the cancel)
    assert re.search(r"^# Ended \(code 143(; signal 15)?\)", log.read_text(), re.M), log.read_text()
    assert "# Ended (code 0)" in (tmp_path / "exp/log/c.1.log").read_text()


def test_the_time_limit_is_named_from_slurms_own_line(tmp_path):
    """slurmstepd's line for a job past its --time (as Slurm 22.05 writes it; a real time limit
    takes over a minute to fire, too long for the test run)."""
    (tmp_path / "t.1.log").write_text("# sleep 200\n# Started at x\n"
                                      "# Running on vm (Slurm job 13, node n1)\n#\n")
    (tmp_path / "t.log").write_text(
        "Submitted batch job 12\nslurmstepd-n1: error: *** JOB 13 ON n1 CANCELLED AT "
        "2026-12-06T09:35:55 DUE TO TIME LIMIT ***\n")
    assert SCHEDULERS["slurm.pl"].cancellation(str(tmp_path / "t.1.log"), str(tmp_path / "t.log")) \
        == "(Slurm job 13 on n1) was cancelled at 2026-12-06T09:35:55 due to time limit"


def test_ctrl_c_of_slurm_pl_cancels_the_array(slurm, tmp_path):
    launcher = subprocess.Popen([str(REPO / "utils" / "slurm.pl"), "JOB=1:2", "exp/log/i.JOB.log",
                                 "sleep 60"], cwd=tmp_path, env={**os.environ, **slurm},
                                stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (tmp_path / "exp/log/i.2.log").exists() and
             (tmp_path / "exp/log/i.1.log").exists())
    launcher.send_signal(signal.SIGINT)
    _, stderr = launcher.communicate(timeout=60)
    assert launcher.returncode == -signal.SIGINT, stderr   # it dies of the signal it caught
    assert re.search(r"caught signal 2; cancelling job \d+", stderr), stderr
    wait_for(lambda: queue_empty(slurm), timeout=30)


def test_an_unreachable_controller_is_one_line(slurm, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+", "SlurmctldPort=1",
                           Path(slurm["SLURM_CONF"]).read_text()))
    result = slurm_pl(["exp/log/u.log", "true"], tmp_path, {"SLURM_CONF": str(conf)})
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Unable to contact slurm controller" in result.stderr
    assert "exp/q/u.log" in result.stderr


def test_a_request_slurm_cannot_meet_quotes_sbatch(slurm, tmp_path):
    result = slurm_pl(["--gpu", "1", "exp/log/g.log", "true"], tmp_path, slurm)
    assert result.returncode == 1
    assert "sbatch: error: Invalid generic resource (gres) specification" in result.stderr


# -- multi-node training: one job of two nodes, one torchrun agent on each ----------------------

# yesno's 31 training utterances make ~6,000 frames an epoch: 4 workers of 256-frame minibatches
# sync every block (tau 1) to have several syncs an epoch, and a checkpoint every 2 of them
BMUF_EMA = ["--strategy", "bmuf", "--block-size", "1", "--ema-decay", "0.9", "--epochs", "4",
            "--set-opts", "model.hidden_layers=1 model.hidden_dim=32 train.checkpoint_every_blocks=2"]


def train(recipe: Path, exp: str, workers: int, *options: str, env: dict | None = None,
          background: bool = False):
    args = [str(REPO / "steps/nnet/train.sh"), "--num-workers", str(workers), "--nnet-config",
            "conf/nnet/dnn.yaml", *BMUF_EMA, *options, "exp/dnn/targets", "data/train_yesno",
            "data/train_yesno", exp]
    env = {**ONE_THREAD, **(env or {})}
    if background:
        return subprocess.Popen(args, cwd=recipe, env={**os.environ, **env, "LC_ALL": "C"},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    result = run_script(args, cwd=recipe, env=env)
    log = recipe / exp / "log" / "train.log"
    assert result.returncode == 0, result.stderr[-2000:] + (log.read_text()[-3000:]
                                                            if log.exists() else "")
    return result


def assert_same_models(a: Path, b: Path):
    for name in ("final.pt", "ema.pt"):
        want, got = checkpoint.load(str(a / name))["state_dict"], \
            checkpoint.load(str(b / name))["state_dict"]
        assert want.keys() == got.keys()
        for key in want:   # the all-reduce sums in another order across two agents
            torch.testing.assert_close(got[key], want[key], rtol=1e-5, atol=1e-6, msg=key)


@pytest.fixture(scope="module")
def one_node_of_four(yesno_run):
    recipe, result = yesno_run
    assert result.returncode == 0, result.stderr[-3000:]
    train(recipe, "exp/slurm_ref", 4)
    return recipe, recipe / "exp/slurm_ref"


@pytest.mark.timeout(600)
def test_two_nodes_of_two_workers_equal_one_node_of_four(slurm, one_node_of_four):
    recipe, reference = one_node_of_four
    train(recipe, "exp/slurm_2x2", 2, "--num-nodes", "2", "--cmd", f"{REPO}/utils/slurm.pl",
          env=slurm)
    log = (recipe / "exp/slurm_2x2/log/train.log").read_text()
    assert re.search(r"torchrun_nodes.sh: 2 nodes of Slurm job \d+ \(n\[1-2\]\)", log), log[-2000:]
    assert "sbatch" in (recipe / "exp/slurm_2x2/q/train.sh").read_text().splitlines()[-1]
    assert "--nodes 2" in (recipe / "exp/slurm_2x2/q/train.sh").read_text().splitlines()[-1]
    assert_same_models(reference, recipe / "exp/slurm_2x2")


@pytest.mark.timeout(600)
def test_two_agents_on_this_machine_equal_one_node_of_four(one_node_of_four):
    """The loopback case: --num-nodes 2 with run.pl starts both agents here."""
    recipe, reference = one_node_of_four
    train(recipe, "exp/loop_2x2", 2, "--num-nodes", "2")
    assert "2 agents on this machine" in (recipe / "exp/loop_2x2/log/train.log").read_text()
    assert_same_models(reference, recipe / "exp/loop_2x2")


def worker_on_node(exp: str, node: str) -> int | None:
    """The pid of a training worker (not an agent: it has a LOCAL_RANK) that Slurm started on
    `node` for `exp` (as given on train.sh's command line)."""
    return find_process([exp.encode(), b"emasr.cli"],
                        [b"LOCAL_RANK=0", f"SLURMD_NODENAME={node}".encode()])


@pytest.mark.timeout(600)
def test_a_worker_killed_on_node_two_is_restarted_and_the_run_ends_the_same(
        slurm, one_node_of_four):
    recipe, reference = one_node_of_four
    exp = recipe / "exp/slurm_kill"
    proc = train(recipe, "exp/slurm_kill", 2, "--num-nodes", "2", "--max-restarts", "1",
                 "--cmd", f"{REPO}/utils/slurm.pl", env=slurm, background=True)
    try:
        wait_for(lambda: checkpoint.latest(str(exp)), timeout=300, proc=proc)
        victim = wait_for(lambda: worker_on_node("exp/slurm_kill", "n2"), timeout=60, proc=proc)
        os.kill(victim, signal.SIGKILL)
        out, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (exp / "log/train.log").read_text()
    assert proc.returncode == 0, out[-2000:] + log[-3000:]
    assert "worker group restart 1: resuming" in log
    assert_same_models(reference, exp)


def wait_for(condition, timeout: float = 60, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"ended before the condition:\n{proc.stdout.read()[-3000:]}")
        time.sleep(0.05)
    pytest.fail(f"not within {timeout} s")
