"""Route SIGINT/SIGTERM to a launcher's handler while its jobs run, and notice when the steps that
started the launcher are gone (stdlib only, see cmdline.py)."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from typing import Callable, Iterator


@contextlib.contextmanager
def signals_handled(handler: Callable[[int], None]) -> Iterator[None]:
    """Call handler(signum) on SIGINT or SIGTERM inside the block; restore the old handlers after.

    Python delivers signals to the main thread only, so elsewhere (a launcher called from a worker
    thread) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, lambda signum, frame: handler(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def process_start(pid: int) -> str | None:
    """The start time of process `pid` (field 22 of /proc/PID/stat, in clock ticks since boot), or
    None when no such process runs: with the pid it names one process, even after pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


class StepWatch:
    """The steps above this launcher: every shell step and recipe (utils/parse_options.sh) appends
    `PID:START:HOST` to EMASR_STEPS, which its children inherit. `gone()` names the first of them that no
    longer runs: a step killed even by SIGKILL, whose launcher must then stop the jobs instead of
    leaving them running unowned (they would go on holding its dirs' locks). A launcher started
    by hand, outside any step, has nothing to watch."""

    def __init__(self, value: str | None = None) -> None:
        value = os.environ.get("EMASR_STEPS", "") if value is None else value
        # a step on another machine (a job on a cluster node inherits the submitter's
        # environment) cannot be watched from here: its PID means nothing on this one
        host = socket.gethostname()
        self.steps = [(int(pid), start) for pid, start, on in
                      (f"{word}::".split(":")[:3] for word in value.split())
                      if pid.isdigit() and on == host]

    def gone(self) -> int | None:
        for pid, start in self.steps:
            if process_start(pid) != start:
                return pid
        return None


def exit_by_signal(signum: int) -> None:
    """End this process by `signum` itself, not by an exit code: a shell waiting on it stops only
    when its child died of the SIGINT it also received (bash's wait-and-cooperative-exit), and goes
    on to the next command after a child that exited normally, even with 130."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    raise SystemExit(128 + signum)   # reached only if the signal is blocked in this thread
