"""Route SIGINT/SIGTERM to a launcher's handler while its jobs run (stdlib only, see cmdline.py)."""
from __future__ import annotations

import contextlib
import signal
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
