"""One log format for every Python step, and progress reporting that suits terminals and log files.

Every `emasr` subcommand logs through the standard `logging` module with the format
`2026-11-29 14:52:22 INFO fbank.py:57 message`, the shell scripts' too (utils/lib/log.sh); what
stops a step is one `Error: ...` line instead (click's, for a ClickException): the console format
of docs/reliability.md. On a terminal, long loops show a tqdm bar; when
stderr is a file (a job log written by run.pl), the bar would fill the log with carriage returns, so
`progress` logs one line every `every` items instead.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Iterable, Iterator, TypeVar

LOG_FORMAT = "%(asctime)s %(levelname)s %(filename)s:%(lineno)d %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

T = TypeVar("T")


def setup_logging(verbose: bool = False, log_file: str | None = None) -> None:
    """Configure the root logger once per process: stderr, and optionally a file too."""
    level = logging.DEBUG if verbose or os.environ.get("EMASR_VERBOSE") == "1" else logging.INFO
    root = logging.getLogger()
    root.setLevel(level)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_file:
        os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(logging.Formatter(LOG_FORMAT, DATE_FORMAT))
        root.addHandler(handler)


def progress(items: Iterable[T], total: int | None = None, desc: str = "", every: int = 100,
             logger: logging.Logger | None = None) -> Iterator[T]:
    """Iterate over `items` with a tqdm bar on a terminal, else a log line every `every` items."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    if sys.stderr.isatty() and os.environ.get("EMASR_NO_TQDM") != "1":
        from tqdm import tqdm

        yield from tqdm(items, total=total, desc=desc, unit="it", dynamic_ncols=True)
        return
    log = logger or logging.getLogger("emasr.progress")
    start = time.monotonic()
    count = 0
    for count, item in enumerate(items, 1):
        yield item
        if count % every == 0:
            rate = count / max(time.monotonic() - start, 1e-9)
            of = f"/{total}" if total else ""
            log.info("%s: %d%s done (%.1f/s)", desc or "progress", count, of, rate)
    log.info("%s: finished %d items in %.1f s", desc or "progress", count, time.monotonic() - start)
