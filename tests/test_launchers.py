"""utils/run.pl, queue.pl, slurm.pl: Kaldi's calling form, logs, exit status, concurrency,
reruns of failed jobs, and (for the cluster launchers) the submission and the conf mapping.

queue.pl and slurm.pl run through stand-in qsub/sbatch/qstat/squeue/qdel/scancel
(tests/launcher_standins.py) put first on PATH: they run the array locally in the background, as a
scheduler would, and record the options they received.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO
from emasr.parallel import grid, local
from emasr.parallel.cmdline import LaunchError, parse_launch_args, shell_command
from emasr.parallel.schedconf import load_conf, parse_conf
from emasr.parallel.task import logged_exit_code

UTILS = REPO / "utils"
LAUNCHERS = ["run.pl", "queue.pl", "slurm.pl"]
STANDIN_NAMES = ("qsub", "sbatch", "qstat", "squeue", "qdel", "scancel")


@pytest.fixture
def standins(tmp_path: Path) -> Path:
    """A folder of stand-in scheduler commands (all one program, dispatching on its name)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(REPO / "tests" / "launcher_standins.py", bin_dir / "standin.py")
    (bin_dir / "standin.py").chmod(0o755)
    for name in STANDIN_NAMES:
        (bin_dir / name).symlink_to("standin.py")
    return bin_dir


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The directory the launchers run in (no conf/ unless a test writes one)."""
    path = tmp_path / "work"
    path.mkdir()
    return path


def launch(launcher: str, args: list[str], cwd: Path, standins: Path, extra_env: dict | None = None,
           ) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{standins}:{UTILS}:{os.environ['PATH']}", LC_ALL="C")
    env.update(extra_env or {})
    return subprocess.run([str(UTILS / launcher), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def calls(standins: Path, cmd: str) -> list[list[str]]:
    path = standins / "calls.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r["argv"] for r in records if r["cmd"] == cmd]


def log_parts(path: Path) -> tuple[list[str], list[str], list[str]]:
    """(header, body, footer) of a Kaldi-style job log; checks their format on the way."""
    lines = path.read_text().splitlines()
    end_of_header = lines.index("#")
    header, body, footer = lines[:end_of_header], lines[end_of_header + 1:-2], lines[-2:]
    assert header[0].startswith("# ")
    assert re.fullmatch(r"# Started at \w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \S+ \d{4}", header[1])
    assert re.fullmatch(r"# Accounting: time=\d+ threads=\d+", footer[0])
    assert re.fullmatch(r"# Ended \(code \d+(; signal \d+)?\) at \w{3} \w{3} [ \d]\d "
                        r"\d\d:\d\d:\d\d \S+ \d{4}, elapsed time \d+ seconds", footer[1])
    return header, body, footer


def ended_code(path: Path) -> int:
    return int(re.match(r"# Ended \(code (\d+)", path.read_text().splitlines()[-1]).group(1))


# ---------------------------------------------------------------- all three launchers, same tests

@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_three_jobs_give_three_logs_and_exit_0(launcher, work, standins):
    result = launch(launcher, ["JOB=1:3", "exp/x/log/t.JOB.log", "echo", "JOB"], work, standins)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    for i in (1, 2, 3):
        header, body, footer = log_parts(work / f"exp/x/log/t.{i}.log")
        assert header[0] == f"# echo {i}"
        assert body == [str(i)]
        assert footer[1].startswith("# Ended (code 0) at ")
    assert sorted(p.name for p in (work / "exp/x/log").glob("*.log")) == [
        "t.1.log", "t.2.log", "t.3.log"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_failing_job_gives_exit_1_and_the_summary(launcher, work, standins):
    result = launch(launcher, ["JOB=1:3", "exp/x/log/f.JOB.log", "[", "JOB", "-ne", "2", "]"],
                    work, standins)
    assert result.returncode == 1
    # the console format: the summary is the last log line, at ERROR
    assert re.fullmatch(rf"\S+ \S+ ERROR launcher.py:\d+ {launcher}: 1 / 3 failed, log is in "
                        r"exp/x/log/f.\*.log", result.stderr.strip().splitlines()[-1]), \
        result.stderr
    assert [ended_code(work / f"exp/x/log/f.{i}.log") for i in (1, 2, 3)] == [0, 1, 0]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_any_variable_name_and_start_index(launcher, work, standins):
    result = launch(launcher, ["TASK=3:5", "log/s.TASK.log", "echo", "task=TASK"], work, standins)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (work / "log").glob("*.log")) == ["s.3.log", "s.4.log", "s.5.log"]
    for i in (3, 4, 5):
        assert log_parts(work / f"log/s.{i}.log")[1] == [f"task={i}"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_pipelines_quoted_or_escaped(launcher, work, standins):
    quoted = launch(launcher, ["JOB=1:2", "log/q.JOB.log", "echo a b JOB | wc -w"], work, standins)
    escaped = launch(launcher, ["JOB=1:2", "log/e.JOB.log", "echo", "xJOB", "|", "tr", "x", "y"],
                     work, standins)
    assert quoted.returncode == 0 and escaped.returncode == 0, quoted.stderr + escaped.stderr
    for i in (1, 2):
        assert log_parts(work / f"log/q.{i}.log")[1] == ["3"]
        assert log_parts(work / f"log/e.{i}.log")[1] == [f"y{i}"]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_argument_with_spaces_stays_one_argument(launcher, work, standins):
    result = launch(launcher, ["log/a.log", "printf", "<%s> \\n", "ark:gunzip -c $x.gz |", "b"],
                    work, standins)
    assert result.returncode == 0, result.stderr
    assert log_parts(work / "log/a.log")[1] == ["<ark:gunzip -c $x.gz |> ", "<b> "]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_single_job_without_array(launcher, work, standins):
    ok = launch(launcher, ["log/one.log", "echo", "hello"], work, standins)
    assert ok.returncode == 0, ok.stderr
    assert log_parts(work / "log/one.log")[1] == ["hello"]
    bad = launch(launcher, ["log/bad.log", "exit 3"], work, standins)
    assert bad.returncode == 1
    assert f"{launcher}: job failed with status 3, log is in log/bad.log" in bad.stderr
    assert ended_code(work / "log/bad.log") == 3


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_max_jobs_run_bounds_concurrency(launcher, work, standins):
    marks = work / "marks"
    marks.mkdir()
    job = f"date +%s.%N > {marks}/JOB.start; sleep 0.5; date +%s.%N > {marks}/JOB.end"
    result = launch(launcher, ["--max-jobs-run", "2", "JOB=1:4", "log/c.JOB.log", job],
                    work, standins)
    assert result.returncode == 0, result.stderr
    events = []
    for i in range(1, 5):
        events += [(float((marks / f"{i}.start").read_text()), 1),
                   (float((marks / f"{i}.end").read_text()), -1)]
    running, most = 0, 0
    for _, step in sorted(events):
        running += step
        most = max(most, running)
    assert most == 2  # never more than 2 at once, and the 2 slots were used


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_pick_failed_reruns_only_failed_jobs(launcher, work, standins):
    args = ["JOB=1:4", "log/p.JOB.log", "echo run; [ JOB -eq 1 ] || [ JOB -eq 4 ] || [ -e ok ]"]
    first = launch(launcher, args, work, standins)
    assert first.returncode == 1 and "2 / 4 failed" in first.stderr
    before = {i: (work / f"log/p.{i}.log").read_text() for i in (1, 4)}
    (work / "ok").touch()
    rerun = launch(launcher, ["--pick", "failed", *args], work, standins)
    assert rerun.returncode == 0, rerun.stderr
    assert [ended_code(work / f"log/p.{i}.log") for i in (1, 2, 3, 4)] == [0, 0, 0, 0]
    assert {i: (work / f"log/p.{i}.log").read_text() for i in (1, 4)} == before  # not rerun
    again = launch(launcher, ["--pick", "failed", *args], work, standins)
    assert again.returncode == 0 and "nothing to rerun" in again.stderr


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_usage_errors(launcher, work, standins):
    one_log = launch(launcher, ["JOB=1:2", "log/same.log", "true"], work, standins)
    assert one_log.returncode == 1 and "just one log file (log/same.log)" in one_log.stderr
    zero = launch(launcher, ["JOB=0:2", "log/z.JOB.log", "true"], work, standins)
    assert zero.returncode == 1 and "invalid job range JOB=0:2" in zero.stderr
    backwards = launch(launcher, ["JOB=3:1", "log/z.JOB.log", "true"], work, standins)
    assert backwards.returncode == 1 and "invalid job range JOB=3:1" in backwards.stderr
    pick = launch(launcher, ["--pick", "some", "log/z.log", "true"], work, standins)
    assert pick.returncode == 1 and "--pick must be one of all|failed" in pick.stderr
    usage = launch(launcher, [], work, standins)
    assert usage.returncode == 1 and "Usage:" in usage.stderr
    assert not (work / "log").exists()


# ---------------------------------------------------------------- run.pl

def test_run_pl_accepts_and_ignores_resource_options(work, standins):
    result = launch("run.pl", ["--mem", "4G", "--gpu", "0", "--time", "1:00:00", "--num-threads",
                               "3", "JOB=1:2", "log/r.JOB.log", "true"], work, standins)
    assert result.returncode == 0, result.stderr
    assert log_parts(work / "log/r.1.log")[2][0].endswith("threads=3")
    assert calls(standins, "qsub") == calls(standins, "sbatch") == []


def test_run_pl_default_concurrency_is_the_number_of_cpus(monkeypatch):
    monkeypatch.setattr(local.os, "cpu_count", lambda: 4)
    assert local.default_max_jobs(10, "0") == 4
    assert local.default_max_jobs(5, "0") == 5  # < 1.4 x CPUs: all at once, no short tail
    assert local.default_max_jobs(2, "0") == 4


def test_run_pl_works_without_the_venv(work, standins):
    venv_bin = str(REPO / ".venv" / "bin")
    path = ":".join(p for p in os.environ["PATH"].split(":") if p != venv_bin)
    env = {"PATH": path, "HOME": os.environ.get("HOME", "/tmp"), "LC_ALL": "C"}
    result = subprocess.run([str(UTILS / "run.pl"), "JOB=1:2", "log/v.JOB.log", "echo", "JOB"],
                            cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert log_parts(work / "log/v.2.log")[1] == ["2"]


def test_run_pl_sigterm_stops_the_jobs_and_closes_their_logs(work):
    proc = subprocess.Popen([str(UTILS / "run.pl"), "JOB=1:2", "log/k.JOB.log",
                             "echo started; sleep 30"], cwd=work, stderr=subprocess.PIPE, text=True)
    logs = [work / "log/k.1.log", work / "log/k.2.log"]
    deadline = time.time() + 20
    while not all(p.exists() and "started" in p.read_text() for p in logs):
        assert time.time() < deadline, "jobs did not start"
        time.sleep(0.05)
    start = time.time()
    proc.send_signal(signal.SIGTERM)
    # it dies of the signal (not exit 143), so a shell that also got it stops instead of going on
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert time.time() - start < 5  # did not wait for the sleeps
    assert "stopped by signal 15" in proc.stderr.read()
    for log in logs:
        assert log.read_text().splitlines()[-1].startswith("# Ended (code 143; signal 15)")
        assert logged_exit_code(str(log)) == 143


def test_no_job_outlives_run_pl_killed_with_its_process_group(work):
    # a recipe killed as a whole (SIGKILL to its process group, which cannot be handled): the jobs
    # run in sessions of their own, and their supervisors stop them when run.pl dies
    proc = subprocess.Popen(["bash", "-c", f"{UTILS / 'run.pl'} JOB=1:2 log/o.JOB.log "
                             "'echo started; sleep 41 | cat'"], cwd=work, start_new_session=True)
    logs = [work / "log/o.1.log", work / "log/o.2.log"]
    deadline = time.time() + 20
    while not all(p.exists() and "started" in p.read_text() for p in logs):
        assert time.time() < deadline, "jobs did not start"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 10
    while survivors := [c for c in pgrep_commands() if "sleep 41" in c]:
        assert time.time() < deadline, f"jobs outlived run.pl: {survivors}"
        time.sleep(0.1)


def pgrep_commands() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:   # gone meanwhile
            continue
    return found


# ---------------------------------------------------------------- queue.pl and slurm.pl

def test_queue_pl_submits_one_array_with_the_default_conf(work, standins):
    result = launch("queue.pl", ["--mem", "4G", "--max-jobs-run", "2", "JOB=1:3",
                                 "exp/x/log/t.JOB.log", "echo", "JOB"], work, standins)
    assert result.returncode == 0, result.stderr
    (argv,) = calls(standins, "qsub")
    script = str(work / "exp/x/q/t.sh")
    assert argv == ["-v", "PATH", "-cwd", "-S", "/bin/bash", "-j", "y", "-l", "arch=*64*",
                    "-o", str(work / "exp/x/q/t.log"), "-l", "mem_free=4G,ram_free=4G",
                    "-tc", "2", "-t", "1:3", script]
    assert "Your job-array" in (work / "exp/x/q/t.log").read_text()
    header = log_parts(work / "exp/x/log/t.2.log")[0]
    assert header[0] == "# echo 2" and header[2].startswith("# Running on ")


def test_slurm_pl_maps_options_with_the_default_conf(work, standins):
    result = launch("slurm.pl", ["--mem", "4G", "--gpu", "1", "--num-threads", "4",
                                 "--max-jobs-run", "2", "JOB=1:3", "exp/x/log/t.JOB.log", "true"],
                    work, standins)
    assert result.returncode == 0, result.stderr
    (argv,) = calls(standins, "sbatch")
    queue_log = str(work / "exp/x/q/t.log")
    assert argv == ["--export=PATH", "--ntasks-per-node=1",
                    "--open-mode=append", "-e", queue_log, "-o", queue_log,
                    "--mem-per-cpu", "4G", "--gres=gpu:1",
                    "--cpus-per-task", "4", "--ntasks-per-node=1",
                    "--array=1-3%2", str(work / "exp/x/q/t.sh")]
    assert log_parts(work / "exp/x/log/t.1.log")[2][0].endswith("threads=4")


@pytest.mark.parametrize("launcher,conf_name,submit", [("queue.pl", "queue.conf", "qsub"),
                                                        ("slurm.pl", "slurm.conf", "sbatch")])
def test_conf_in_cwd_and_config_option(launcher, conf_name, submit, work, standins):
    (work / "conf").mkdir()
    (work / "conf" / conf_name).write_text(
        f"command {submit} --site-default\n"
        "option mem=* --memory=$0  # a comment\n"
        "default gpu=0\noption gpu=0 --cpu-partition\n")
    ok = launch(launcher, ["--mem", "2G", "log/c.log", "true"], work, standins)
    assert ok.returncode == 0, ok.stderr
    other = work / "other.conf"
    other.write_text(f"command {submit}\noption mem=* --other-memory $0\n")
    over = launch(launcher, ["--config", str(other), "--mem", "2G", "log/d.log", "true"],
                  work, standins)
    assert over.returncode == 0, over.stderr
    first, second = calls(standins, submit)
    assert first[0] == "--site-default" and "--memory=2G" in first and "--cpu-partition" in first
    assert "--other-memory" in second and "--site-default" not in second


@pytest.mark.parametrize("launcher", ["queue.pl", "slurm.pl"])
def test_conf_errors_name_the_option_and_the_file(launcher, work, standins):
    unknown = launch(launcher, ["--colour", "red", "log/u.log", "true"], work, standins)
    assert unknown.returncode == 1
    assert "option --colour not described in built-in default config" in unknown.stderr
    bad = work / "bad.conf"
    bad.write_text("command qsub\noption mem=* -l mem=FIXED\n")
    broken = launch(launcher, ["--config", str(bad), "log/u.log", "true"], work, standins)
    assert broken.returncode == 1 and f"{bad}:2:" in broken.stderr and "$0" in broken.stderr
    missing = launch(launcher, ["--config", "nope.conf", "log/u.log", "true"], work, standins)
    assert missing.returncode == 1 and "could not read config file nope.conf" in missing.stderr
    assert calls(standins, "qsub") == calls(standins, "sbatch") == []


def test_pick_failed_submits_only_the_failed_tasks(work, standins):
    args = ["JOB=1:3", "log/p.JOB.log", "[ JOB -eq 2 ] || [ -e ok ]"]
    assert launch("slurm.pl", args, work, standins).returncode == 1
    assert launch("queue.pl", args, work, standins).returncode == 1
    (work / "ok").touch()
    log2 = (work / "log/p.2.log").read_text()
    assert launch("slurm.pl", ["--pick", "failed", *args], work, standins).returncode == 0
    assert launch("queue.pl", ["--pick", "failed", *args], work, standins).returncode == 0
    assert calls(standins, "sbatch")[-1][-2] == "--array=1,3"
    # GridEngine takes one range: 1:3, and the job script skips task 2.
    assert calls(standins, "qsub")[-1][-3:-1] == ["-t", "1:3"]
    assert (work / "log/p.2.log").read_text() == log2
    assert 'in 1|3) ;; *) exit 0 ;; esac' in (work / "q/p.sh").read_text()


def test_queue_pl_with_sync_y(work, standins):
    result = launch("queue.pl", ["-sync", "y", "JOB=1:2", "log/y.JOB.log", "[ JOB -eq 1 ]"],
                    work, standins)
    assert result.returncode == 1
    assert "queue.pl: 1 / 2 failed, log is in log/y.*.log" in result.stderr
    assert calls(standins, "qsub")[0][-5:-3] == ["-sync", "y"]


@pytest.mark.parametrize("launcher", ["queue.pl", "slurm.pl"])
def test_submit_failure_is_reported(launcher, work, standins):
    result = launch(launcher, ["log/s.log", "true"], work, standins, {"STANDIN_SUBMIT_FAILS": "1"})
    assert result.returncode == 1
    assert "error submitting jobs to the queue (return status 1)" in result.stderr
    assert "unable to contact the scheduler" in result.stderr
    assert not (work / "log/s.log").exists()


@pytest.mark.parametrize("launcher,submit", [("queue.pl", "qsub"), ("slurm.pl", "sbatch")])
def test_a_task_killed_without_status_fails_instead_of_hanging(launcher, submit, work, standins,
                                                               monkeypatch, caplog):
    monkeypatch.setenv("PATH", f"{standins}:{os.environ['PATH']}")
    monkeypatch.chdir(work)
    # kill -9 $PPID kills the job's runner: no footer, no status file, as after an OOM kill.
    request = parse_launch_args(launcher, ["JOB=1:2", "log/v.JOB.log",
                                           "[ JOB -eq 1 ] || kill -9 $PPID"])
    scheduler = grid.SCHEDULERS[launcher]
    codes = grid.run_grid(scheduler, request, request.all_tasks(), check_interval=0.2,
                          vanish_grace=0.2)
    assert sorted((t.id, c) for t, c in codes.items()) == [(1, 0), (2, None)]
    assert "no longer exists but task 2 wrote no exit status" in caplog.text
    assert logged_exit_code("log/v.2.log") is None
    assert calls(standins, "qstat" if submit == "qsub" else "squeue")


@pytest.mark.parametrize("launcher,cancel", [("queue.pl", "qdel"), ("slurm.pl", "scancel")])
def test_sigterm_cancels_the_submitted_job(launcher, cancel, work, standins):
    env = dict(os.environ, PATH=f"{standins}:{os.environ['PATH']}")
    proc = subprocess.Popen([str(UTILS / launcher), "JOB=1:2", "log/k.JOB.log",
                             "echo started; sleep 30"], cwd=work, env=env,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while not all((work / f"log/k.{i}.log").exists()
                  and "started" in (work / f"log/k.{i}.log").read_text() for i in (1, 2)):
        assert time.time() < deadline, "jobs did not start"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == -signal.SIGTERM
    assert "cancelling job" in proc.stderr.read()
    (argv,) = calls(standins, cancel)
    job_id = argv[-1]
    assert (standins / "state" / f"{job_id}.done").exists()


# ---------------------------------------------------------------- pieces

def test_shell_command_quoting():
    assert shell_command(["a | b > c"]) == "a | b > c"
    assert shell_command(["copy", "ark:-", "|", "x"]) == "copy ark:- | x"
    assert shell_command(["prog", "ark:gunzip -c f.gz|", "it's x"]) == (
        "prog 'ark:gunzip -c f.gz|' 'it'\"'\"'s x'")


def test_parse_options_interleaved_with_the_array():
    request = parse_launch_args("queue.pl", ["-q", "all.q", "JOB=2:4", "--mem", "1G", "-pe", "smp",
                                             "3", "-V", "log/x.JOB.log", "cmd"])
    assert request.array.name == "JOB" and list(request.array.ids) == [2, 3, 4]
    assert request.options == {"mem": "1G", "num_threads": "3"}
    assert request.scheduler_args == ["-q", "all.q", "-pe", "smp", "3", "-V"]
    assert parse_launch_args("run.pl", ["-tc", "3", "JOB=7", "l.JOB", "c"]).options == {
        "max_jobs_run": "3"}
    with pytest.raises(LaunchError, match="--num-threads"):
        parse_launch_args("run.pl", ["--num-threads", "zero", "l", "c"])


def test_example_conf_files_match_the_built_in_defaults():
    for name, scheduler in grid.SCHEDULERS.items():
        example = load_conf(str(REPO / scheduler.default_conf_path), "", "")
        builtin = parse_conf(scheduler.builtin_conf, "built-in")
        assert (example.command, example.wildcard, example.by_value, example.defaults) == (
            builtin.command, builtin.wildcard, builtin.by_value, builtin.defaults), name


def test_conf_value_line_wins_over_wildcard():
    conf = parse_conf("command qsub\noption gpu=* -l gpu=$0\noption gpu=0 -q cpu.q\n"
                      "default gpu=0\n", "x.conf")
    assert conf.map_options({}) == ["-q", "cpu.q"]
    assert conf.map_options({"gpu": "2"}) == ["-l", "gpu=2"]
    with pytest.raises(LaunchError, match="x.conf does not contain"):
        parse_conf("option mem=* -l m=$0\n", "x.conf")


def test_compress_ids():
    assert grid.compress_ids([1, 2, 3, 7, 9, 10]) == "1-3,7,9-10"
    assert grid.compress_ids([5]) == "5"


def test_logged_exit_code(tmp_path):
    log = tmp_path / "a.log"
    assert logged_exit_code(str(log)) is None
    log.write_text("# cmd\n# Started at x\n#\n")
    assert logged_exit_code(str(log)) is None
    log.write_text("# Accounting: time=1 threads=1\n"
                   "# Ended (code 0) at x, elapsed time 1 seconds\n")
    assert logged_exit_code(str(log)) == 0
    log.write_text("# Ended (code 0; signal 9) at x, elapsed time 1 seconds\n")
    assert logged_exit_code(str(log)) == 128
    log.write_text("# Finished at Sun Nov 29 2026 with status 2\n")  # Kaldi's queue.pl
    assert logged_exit_code(str(log)) == 2


def test_step_watch_names_a_gone_step_and_ignores_another_hosts():
    import socket
    import subprocess

    from emasr.parallel.signals import StepWatch, process_start

    host = socket.gethostname()
    me = f"{os.getpid()}:{process_start(os.getpid())}:{host}"
    assert StepWatch(me).gone() is None
    child = subprocess.Popen(["sleep", "30"])
    entry = f"{child.pid}:{process_start(child.pid)}"
    child.kill()
    child.wait()
    assert StepWatch(f"{me} {entry}:{host}").gone() == child.pid
    # the same PID on a cluster node's submitter means nothing here
    assert StepWatch(f"{me} {entry}:not-{host}").gone() is None
