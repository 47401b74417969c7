"""queue.pl and slurm.pl: submit the jobs as ONE array job, wait for it, collect the exit codes.

For `queue.pl JOB=1:N exp/x/log/name.JOB.log cmd...` (as Kaldi's queue.pl):
  exp/x/q/name.sh           the job script (the submit command is recorded at its end)
  exp/x/q/name.log          what the scheduler itself prints (qsub/sbatch output, -o file)
  exp/x/q/sync/done.PID.T   task T's exit status, written by the job when it ends
  exp/x/log/name.T.log      the job's log, in run.pl's format (plus `# Running on HOST`)
The launcher polls for the status files (so it needs no `qsub -sync y`; with `-sync y` they are
there when qsub returns). Every `check_interval` seconds it asks the scheduler whether the job still
exists (qstat -j / squeue -j); a task whose job has vanished without a status file (killed, node
lost, out of memory) counts as failed instead of being waited for forever. SIGINT/SIGTERM cancel
the job (qdel / scancel).
"""
from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from emasr.io.atomic import atomic_write
from emasr.parallel.cmdline import LaunchError, LaunchRequest, Task
from emasr.parallel.schedconf import load_conf
from emasr.parallel.signals import StepWatch, exit_by_signal, signals_handled
from emasr.parallel.task import status_path

log = logging.getLogger(__name__)
SRC_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SGE_DEFAULT_CONF = """\
# Built-in default for queue.pl (Kaldi's, without site-specific queue names).
command qsub -v PATH -cwd -S /bin/bash -j y -l arch=*64*
option mem=* -l mem_free=$0,ram_free=$0
option mem=0          # do not add anything to the qsub options
option num_threads=* -pe smp $0
option num_threads=1  # do not add anything to the qsub options
option max_jobs_run=* -tc $0
default gpu=0
option gpu=0
option gpu=* -l gpu=$0
"""

SLURM_DEFAULT_CONF = """\
# Built-in default for slurm.pl (Kaldi's, without site-specific partition names).
command sbatch --export=PATH --ntasks-per-node=1
option time=* --time $0
option mem=* --mem-per-cpu $0
option mem=0          # do not add anything to the sbatch options
option num_threads=* --cpus-per-task $0 --ntasks-per-node=1
option num_threads=1 --cpus-per-task 1 --ntasks-per-node=1
default gpu=0
option gpu=0
option gpu=* --gres=gpu:$0
default num_nodes=1
option num_nodes=1
option num_nodes=* --nodes $0   # a job of several nodes (steps/nnet/train.sh --num-nodes)
# --max-jobs-run K becomes the array's %K throttle; it needs no line here.
"""


@dataclass(frozen=True)
class Scheduler:
    """What differs between GridEngine and Slurm; the rest of the launch is shared."""

    prog: str
    default_conf_path: str
    builtin_conf: str
    task_id_var: str
    job_id_pattern: str       # finds the job id in the submit command's output
    transient_error: str      # submit errors worth retrying after a pause
    cancel_command: str       # + job id
    throttle_in_array: bool   # --max-jobs-run goes into the array option rather than the conf

    def output_args(self, queue_log: str) -> list[str]:
        raise NotImplementedError

    def array_args(self, ids: list[int], max_jobs: str | None) -> list[str]:
        raise NotImplementedError

    def job_exists(self, job_id: str) -> bool | None:
        """True/False, or None when the scheduler cannot be asked (no status command)."""
        raise NotImplementedError

    def cancellation(self, task_log: str, queue_log: str) -> str | None:
        """Why the scheduler ended a failed task, where it says so in the queue log: '(Slurm job
        11, node n2) was cancelled at ... (time limit)'; None when it says nothing."""
        return None


class GridEngine(Scheduler):
    def output_args(self, queue_log: str) -> list[str]:
        return ["-o", queue_log]

    def array_args(self, ids: list[int], max_jobs: str | None) -> list[str]:
        # -t takes one range; tasks inside it but not picked exit at once (see the job script).
        return ["-t", f"{ids[0]}:{ids[-1]}"]

    def job_exists(self, job_id: str) -> bool | None:
        if shutil.which("qstat") is None:
            return None
        return subprocess.run(["qstat", "-j", job_id], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0


# the header line of a task's log (emasr.parallel.task.where_running) and slurmstepd's line in the
# queue log when Slurm ends a job: "*** JOB 11 ON n2 CANCELLED AT 2026-12-06T09:35:55 DUE TO TIME
# LIMIT ***" (no reason: scancel or an administrator)
SLURM_TASK_HEADER = re.compile(r"^# Running on .*\(Slurm job (\d+)(?:, node \S+)?\)$")
SLURM_CANCELLED = r"\*\*\* JOB {job} ON (\S+) CANCELLED AT (\S+)(?: DUE TO (.+?))? \*\*\*"


class Slurm(Scheduler):
    def output_args(self, queue_log: str) -> list[str]:
        return ["--open-mode=append", "-e", queue_log, "-o", queue_log]

    def array_args(self, ids: list[int], max_jobs: str | None) -> list[str]:
        return [f"--array={compress_ids(ids)}" + (f"%{max_jobs}" if max_jobs else "")]

    def job_exists(self, job_id: str) -> bool | None:
        if shutil.which("squeue") is None:
            return None
        out = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True)
        return out.returncode == 0 and out.stdout.strip() != ""

    def cancellation(self, task_log: str, queue_log: str) -> str | None:
        job = _first_match(task_log, SLURM_TASK_HEADER)
        if job is None:
            return None
        line = _first_match(queue_log, re.compile(SLURM_CANCELLED.format(job=job.group(1))))
        if line is None:
            return None
        node, when, reason = line.groups()
        why = f"due to {reason.lower()}" if reason else "by scancel or an administrator"
        return f"(Slurm job {job.group(1)} on {node}) was cancelled at {when} {why}"


def _first_match(path: str, pattern: re.Pattern) -> re.Match | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if match := pattern.search(line.rstrip("\n")):
                    return match
    except OSError:
        pass
    return None


SCHEDULERS = {
    "queue.pl": GridEngine("queue.pl", "conf/queue.conf", SGE_DEFAULT_CONF, "SGE_TASK_ID",
                           r"Your job\S* (\d+)[. ].* has been submitted", r"gdi request|qmaster",
                           "qdel", throttle_in_array=False),
    "slurm.pl": Slurm("slurm.pl", "conf/slurm.conf", SLURM_DEFAULT_CONF, "SLURM_ARRAY_TASK_ID",
                      r"Submitted batch job (\d+)",
                      r"Socket timed out|Resource temporarily unavailable|try again",
                      "scancel", throttle_in_array=True),
}


def compress_ids(ids: list[int]) -> str:
    """[1, 2, 3, 7, 9, 10] -> "1-3,7,9-10" (Slurm's --array syntax)."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@dataclass
class QueuePaths:
    """Kaldi's layout: exp/x/log/name.JOB.log -> exp/x/q/name.{sh,log} and exp/x/q/sync/."""

    script: str
    queue_log: str
    status_prefix: str

    @classmethod
    def for_log(cls, request: LaunchRequest) -> "QueuePaths":
        log_dir, base = os.path.split(os.path.abspath(request.log_template))
        q_dir = re.sub(r"/(log|LOG)/*q$", "/q", os.path.join(log_dir, "q"))
        if request.array is not None:  # the q/ files are per array, not per task
            base = re.sub(r"\.?" + re.escape(request.array.name), "", base, count=1)
        queue_log = os.path.join(q_dir, base)
        script = re.sub(r"\.[a-zA-Z]{1,5}$", ".sh", queue_log)
        if script == queue_log:
            script += ".sh"
        status_prefix = os.path.join(q_dir, "sync", f"done.{os.getpid()}")
        return cls(script, queue_log, status_prefix)


def run_grid(scheduler: Scheduler, request: LaunchRequest, tasks: list[Task],
             check_interval: float = 120.0, vanish_grace: float = 10.0,
             max_poll: float = 3.0) -> dict[Task, int | None]:
    """Submit `tasks` as one array job and wait; return each task's exit code (None: no status)."""
    conf = load_conf(request.options.get("config"), scheduler.default_conf_path,
                     scheduler.builtin_conf)
    is_array = request.array is not None
    skip = ("max_jobs_run",) if scheduler.throttle_in_array or not is_array else ()
    paths = QueuePaths.for_log(request)
    os.makedirs(os.path.dirname(paths.status_prefix), exist_ok=True)
    ids = [t.id for t in tasks]
    submit = [*conf.command, *scheduler.output_args(paths.queue_log),
              *conf.map_options(request.options, skip), *request.scheduler_args,
              *(scheduler.array_args(ids, request.options.get("max_jobs_run")) if is_array else []),
              paths.script]
    write_job_script(scheduler, request, ids, paths, submit)
    for task in tasks:
        _remove(status_path(paths.status_prefix, task.id))
    submitted: list[str] = []

    def cancel(signum: int) -> None:
        if submitted and shutil.which(scheduler.cancel_command):
            log.warning("%s: caught signal %d; cancelling job %s", scheduler.prog, signum,
                        submitted[0])
            subprocess.run([scheduler.cancel_command, submitted[0]], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        exit_by_signal(signum)

    def step_gone(pid: int) -> None:
        log.warning("%s: the step that submitted job %s (PID %d) is gone; cancelling the job",
                    scheduler.prog, submitted[0], pid)
        cancel(signal.SIGTERM)

    with signals_handled(cancel):
        submitted.append(submit_job(scheduler, submit, paths.queue_log, request.sync))
        codes = wait_for_tasks(scheduler, submitted[0], tasks, paths.status_prefix,
                               check_interval, vanish_grace, max_poll, step_gone)
    for task, code in codes.items():
        if code != 0 and (why := scheduler.cancellation(task.log, paths.queue_log)):
            log.error("%s: task %s %s; log is in %s", scheduler.prog,
                      task.id if task.id is not None else "", why, task.log)
    return codes


def write_job_script(scheduler: Scheduler, request: LaunchRequest, ids: list[int | None],
                     paths: QueuePaths, submit: list[str]) -> None:
    # --opt=value, so that a command or log name starting with '-' is not taken for an option.
    runner = [sys.executable, "-m", "emasr.parallel.task", f"--command={request.command}",
              f"--log={request.log_template}", f"--status-prefix={paths.status_prefix}",
              "--threads", str(request.num_threads)]
    lines = ["#!/bin/bash",
             f"# Written by {request.prog}; the scheduler runs it once per task.",
             f"cd {shlex.quote(os.getcwd())}",
             "if [ -f ./path.sh ]; then . ./path.sh; fi  # the recipe's environment, as Kaldi"]
    if request.array is not None:
        task_var = "${" + scheduler.task_id_var + ":-}"
        runner += ["--array-name", request.array.name, "--task-id"]
        if ids != list(range(ids[0], ids[-1] + 1)):  # --pick failed: skip the tasks not picked
            lines.append(f'case "{task_var}" in {"|".join(map(str, ids))}) ;; *) exit 0 ;; esac')
        runner_line = " ".join(map(shlex.quote, runner)) + f' "{task_var}"'
    else:
        runner_line = " ".join(map(shlex.quote, runner))
    lines += [f'export PYTHONPATH={shlex.quote(SRC_DIR)}"${{PYTHONPATH:+:$PYTHONPATH}}"',
              f"exec {runner_line}",
              "## submitted with:",
              "# " + " ".join(map(shlex.quote, submit))]
    with atomic_write(paths.script) as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(paths.script, 0o755)


def submit_job(scheduler: Scheduler, submit: list[str], queue_log: str, sync: bool,
               tries: int = 4, pause: float = 20.0) -> str:
    """Run the submit command (retrying transient scheduler errors); return the job id."""
    for attempt in range(1, tries + 1):
        try:
            out = subprocess.run(submit, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise LaunchError(f"cannot run '{submit[0]}': {e.strerror} (is this a "
                              f"{'GridEngine' if scheduler.prog == 'queue.pl' else 'Slurm'} "
                              "cluster? run.pl runs jobs locally)") from None
        output = out.stdout + out.stderr
        with open(queue_log, "a", encoding="utf-8") as f:
            f.write(output)
        match = re.search(scheduler.job_id_pattern, output)
        # With -sync y, qsub returns the job's status, so a failed job is not a submit error.
        if match and (out.returncode == 0 or sync):
            return match.group(1)
        if attempt < tries and re.search(scheduler.transient_error, output):
            log.warning("%s: the scheduler seems unreachable; trying again in %g seconds",
                        scheduler.prog, pause)
            time.sleep(pause)
            continue
        with open(queue_log, "a", encoding="utf-8") as f:
            f.write(f"# {scheduler.prog}: the submit command was: {shlex.join(submit)}\n")
        said = ([line for line in output.splitlines() if "error" in line.lower()]
                or output.splitlines() or ["(no output)"])[-1].strip()
        raise LaunchError(f"error submitting jobs to the queue (return status {out.returncode}): "
                          f"{said} (the command and its output are in {queue_log})")
    raise AssertionError("unreachable")


def wait_for_tasks(scheduler: Scheduler, job_id: str, tasks: list[Task], status_prefix: str,
                   check_interval: float, vanish_grace: float,
                   max_poll: float, step_gone=None) -> dict[Task, int | None]:
    """Poll for the tasks' status files until each has one or the job has vanished; call
    step_gone(pid) when a step above the launcher no longer runs (emasr.parallel.signals)."""
    pending = {task: status_path(status_prefix, task.id) for task in tasks}
    steps = StepWatch()
    codes: dict[Task, int | None] = {}
    # Poll often at first (short jobs end soon), then back off to max_poll (Kaldi: 3 s) so that
    # many waiting launchers do not load a shared file system.
    wait, last_check, vanished_at = 0.05, time.monotonic(), None
    while True:
        for task, path in list(pending.items()):
            if os.path.exists(path):
                codes[task] = _read_status(path)
                del pending[task]
        if not pending:
            break
        if step_gone is not None and (pid := steps.gone()) is not None:
            step_gone(pid)
        now = time.monotonic()
        if vanished_at is None and now - last_check >= check_interval:
            last_check = now
            if scheduler.job_exists(job_id) is False:
                vanished_at = now  # give slow (NFS) status files a moment before giving up
        if vanished_at is not None and now - vanished_at >= vanish_grace:
            for task in pending:
                log.error("%s: job %s no longer exists but task %s wrote no exit status "
                          "(killed? out of memory?); log is in %s", scheduler.prog, job_id,
                          task.id if task.id is not None else "", task.log)
                codes[task] = None
            break
        time.sleep(wait)
        wait = min(wait * 1.15, max_poll)
    for task in tasks:
        _remove(status_path(status_prefix, task.id))
    return codes


def _read_status(path: str) -> int | None:
    try:
        with open(path, encoding="utf-8") as f:
            return int(f.read().strip())
    except ValueError:
        return None


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
