"""Route SIGINT/SIGTERM to a launcher's handler while its jobs run (stdlib only, see cmdline.py)."""
from __future__ import annotations

import contextlib
import os
import signal
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


def exit_by_signal(signum: int) -> None:
    """End this process by `signum` itself, not by an exit code: a shell waiting on it stops only
    when its child died of the SIGINT it also received (bash's wait-and-cooperative-exit), and goes
    on to the next command after a child that exited normally, even with 130."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    raise SystemExit(128 + signum)   # reached only if the signal is blocked in this thread
