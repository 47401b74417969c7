"""Run one job and write its Kaldi-format log: the piece every launcher shares.

A log written here looks exactly like one from Kaldi's run.pl:

    # some-program --opt 3
    # Started at Sun Nov 29 14:59:13 UTC 2026
    #
    ...stdout and stderr of the command...
    # Accounting: time=2 threads=1
    # Ended (code 0) at Sun Nov 29 14:59:15 UTC 2026, elapsed time 2 seconds

The command runs through `bash -c`, so pipelines and redirections work; as in Kaldi, the exit
status of a pipeline is that of its last command (no pipefail). A job killed by signal N is logged
as `(code 128+N; signal N)`.

Run as a program (`python -m emasr.parallel.task ...`), it is the body of a queue.pl/slurm.pl job
script: it runs the task whose number the scheduler gives, then writes the exit status to a status
file that the waiting launcher polls for. Standard library only (see cmdline.py).
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from emasr.io.atomic import atomic_write
from emasr.parallel.cmdline import JobArray

ENDED = re.compile(r"^# Ended \(code (\d+)(; signal \d+)?\)")
KALDI_QUEUE_ENDED = re.compile(r"^# Finished at .* with status (\d+)")  # Kaldi's own queue.pl


def kaldi_date() -> str:
    """The output of `date` in the C locale, which Kaldi's logs carry."""
    return time.strftime("%a %b %e %H:%M:%S %Z %Y")


class RunningJobs:
    """The job processes now running, so a launcher that is interrupted can stop them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen] = set()
        self.stopping = threading.Event()

    def add(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.add(proc)
        if self.stopping.is_set():  # a stop that raced with the start
            self._signal(proc)

    def remove(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self._procs.discard(proc)

    def stop_all(self) -> None:
        """Send SIGTERM to every running job's process group; start no new ones."""
        self.stopping.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            self._signal(proc)

    @staticmethod
    def _signal(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


# Under a launcher, a job runs in its own session (so that stopping it, killpg, stops its
# whole pipeline), led by this supervisor: it runs `bash -c COMMAND` in that session, passes a
# SIGTERM, SIGINT or SIGHUP to all of it, and asks the kernel for a SIGTERM when the launcher dies
# (PR_SET_PDEATHSIG), so that no job outlives a launcher killed even by SIGKILL (a recipe's process
# group killed as a whole). A job that dies of a signal makes the supervisor die of the same one.
SUPERVISOR = """
import ctypes, os, signal, subprocess, sys
def stop(signum, frame):
    signal.signal(signum, signal.SIG_DFL)
    os.killpg(0, signum)
for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(signum, stop)
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[2]):  # the launcher died before the request
    stop(signal.SIGTERM, None)
code = subprocess.Popen(["bash", "-c", sys.argv[1]]).wait()
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def where_running() -> str:
    """This host, and the scheduler's job and node where there is one: what a job log's header
    says, so a failure can be matched with the scheduler's own account of the job."""
    where = socket.gethostname()
    job = os.environ.get("SLURM_JOB_ID") or os.environ.get("JOB_ID")
    node = os.environ.get("SLURMD_NODENAME")
    if job:
        scheduler = "Slurm" if "SLURM_JOB_ID" in os.environ else "GridEngine"
        where += f" ({scheduler} job {job}{f', node {node}' if node else ''})"
    return where


def run_task(command: str, log: str, threads: int = 1, show_host: bool = False,
             running: RunningJobs | None = None) -> int:
    """Run `command` with bash, output appended to `log` between Kaldi's header and footer.

    Returns the exit code (128+N when killed by signal N).
    """
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
    # surrogateescape: a command line that is not valid UTF-8 is logged byte for byte.
    with open(log, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(f"# {command}\n# Started at {kaldi_date()}\n")
        if show_host:
            f.write(f"# Running on {where_running()}\n")
        f.write("#\n")
    start = time.time()
    with open(log, "ab") as out:
        # Under a launcher that may stop it, the job gets its own session and supervisor
        # (SUPERVISOR). In a scheduler's job it stays in the job's group, which the scheduler
        # signals on qdel/scancel.
        args = (["bash", "-c", command] if running is None else
                [sys.executable, "-c", SUPERVISOR, command, str(os.getpid())])
        stops = StopForwarder() if running is None else None
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=running is not None)
        if running is not None:
            running.add(proc)
        else:
            stops.attach(proc)
        try:
            returncode = proc.wait()
        finally:
            if running is not None:
                running.remove(proc)
    elapsed = round(time.time() - start)
    signum = -returncode if returncode < 0 else 0
    code = f"code {128 + signum}; signal {signum}" if signum else f"code {returncode}"
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"# Accounting: time={elapsed} threads={threads}\n")
        f.write(f"# Ended ({code}) at {kaldi_date()}, elapsed time {elapsed} seconds\n")
    return 128 + signum if signum else returncode


class StopForwarder:
    """In a scheduler's job: a SIGTERM or SIGINT (scancel, a time limit, qdel with notify) goes to
    the command, and this runner lives on to write the log's footer and the status file; the
    scheduler's SIGKILL after its grace period ends both. Installed before the command starts, so
    a signal that comes before it is passed on as soon as it exists."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.pending: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._forward)

    def attach(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        for signum in self.pending:
            self._forward(signum, None)

    def _forward(self, signum, frame) -> None:
        if self.proc is None:
            self.pending.append(signum)
            return
        try:
            self.proc.send_signal(signum)
        except ProcessLookupError:
            pass


def logged_exit_code(log: str) -> int | None:
    """The exit code recorded at the end of a job log, or None when the job did not finish.

    Reads Kaldi's run.pl footer (`# Ended (code N)`, also written by our launchers) and Kaldi's
    queue.pl footer (`# Finished at ... with status N`); a signal counts as a failure.
    """
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(tail):
        match = ENDED.match(line) or KALDI_QUEUE_ENDED.match(line)
        if match:
            signalled = match.lastindex == 2 and match.group(2)
            return 128 if signalled and int(match.group(1)) == 0 else int(match.group(1))
    return None


def write_status(path: str, code: int) -> None:
    """Write the exit code atomically, so the launcher never reads a half-written status."""
    with atomic_write(path) as f:
        f.write(f"{code}\n")


def status_path(prefix: str, task_id: int | None) -> str:
    """Where the job script of task `task_id` writes its exit status."""
    return prefix if task_id is None else f"{prefix}.{task_id}"


def main(argv: list[str] | None = None) -> int:
    """Body of a queue.pl/slurm.pl job script: run one task of the array and record its status."""
    parser = argparse.ArgumentParser(prog="python -m emasr.parallel.task", description=main.__doc__)
    parser.add_argument("--command", required=True, help="command line, with the array variable")
    parser.add_argument("--log", required=True, help="log file, with the array variable")
    parser.add_argument("--status-prefix", required=True, help="status file (plus .TASK in arrays)")
    parser.add_argument("--array-name", help="the array variable, e.g. JOB")
    parser.add_argument("--task-id", help="this task's number (from SGE_TASK_ID etc.)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    command, log, task_id = args.command, args.log, None
    if args.array_name:
        if not (args.task_id or "").isdigit():
            parser.error(f"--task-id must be the task number, got '{args.task_id}'")
        task_id = int(args.task_id)
        array = JobArray(args.array_name, task_id, task_id)
        command, log = array.substitute(command, task_id), array.substitute(log, task_id)
    code = run_task(command, log, args.threads, show_host=True)
    write_status(status_path(args.status_prefix, task_id), code)
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
