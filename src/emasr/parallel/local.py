"""run.pl: run the jobs on this machine, at most `--max-jobs-run` at a time.

Resource options (--mem, --gpu, --num-threads, --time, --config) are accepted and ignored, as in
Kaldi, except that --num-threads is reported in the log's Accounting line and --gpu changes the
default concurrency to the number of GPUs.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor, wait

from emasr.parallel.cmdline import LaunchRequest, Task, positive_int
from emasr.parallel.signals import StepWatch, exit_by_signal, signals_handled
from emasr.parallel.task import RunningJobs, run_task

log = logging.getLogger(__name__)


def default_max_jobs(num_jobs: int, gpu: str) -> int:
    """Kaldi's run.pl default: one job per CPU (per GPU with --gpu N>0); if the jobs are only a
    few more than that (< 1.4x), run them all at once rather than leave a short tail."""
    if gpu not in ("", "0"):
        return max(1, _count_gpus())
    cpus = os.cpu_count() or 1
    return num_jobs if cpus < num_jobs < 1.4 * cpus else cpus


def _count_gpus() -> int:
    if shutil.which("nvidia-smi") is None:
        log.warning("run.pl: --gpu given but nvidia-smi not found; running one job at a time")
        return 1
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def run_local(request: LaunchRequest, tasks: list[Task]) -> dict[Task, int | None]:
    """Run `tasks`; return each one's exit code (None for a job not started after a stop)."""
    if "max_jobs_run" in request.options:
        max_jobs = positive_int(request.options["max_jobs_run"], "--max-jobs-run")
    else:
        max_jobs = default_max_jobs(len(request.all_tasks()), request.options.get("gpu", "0"))
    running = RunningJobs()

    def run_one(task: Task) -> int | None:
        if running.stopping.is_set():
            return None
        return run_task(task.command, task.log, request.num_threads, running=running)

    received: list[int] = []

    def stop(signum: int) -> None:
        # Stop the jobs (their logs still get a footer) rather than leave them running unowned.
        received.append(signum)
        running.stop_all()

    steps = StepWatch()
    with signals_handled(stop):
        with ThreadPoolExecutor(max_workers=max(1, min(max_jobs, len(tasks)))) as pool:
            futures = [pool.submit(run_one, task) for task in tasks]
            # Wake up every 0.2 s: a signal the kernel hands to a worker thread runs its Python
            # handler only when this thread next runs bytecode, and a plain blocking wait did not
            # return until the jobs ended (measured: 1 SIGTERM in 25 waited out a 30 s job).
            # Each time, make sure the steps above are still there (a step killed by SIGKILL
            # sends nothing: its jobs would go on alone, holding its dirs' locks).
            while wait(futures, timeout=0.2).not_done:
                if not received and (pid := steps.gone()) is not None:
                    log.warning("run.pl: the step that started these jobs (PID %d) is gone; "
                                "stopping them (logs in %s)", pid, request.log_pattern())
                    stop(signal.SIGTERM)
            codes = [future.result() for future in futures]
    if received:
        log.warning("run.pl: stopped by signal %d", received[0])
        exit_by_signal(received[0])
    return dict(zip(tasks, codes))
