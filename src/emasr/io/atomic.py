"""Atomic file output: write under a temporary name in the same directory, then rename.

A reader (or a later stage after a crash) never sees a half-written file: either the old content or
the complete new one. The temporary name starts with the target's name so it is easy to spot.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Iterator


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """A temporary file name beside `path` for libraries that write by file name (FSTs, torch).

    The caller writes the temporary file; on success it is renamed onto `path`, on any exception
    it is removed and `path` is left as it was.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=directory)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                 newline: str | None = "\n") -> Iterator[IO]:
    """Open a temporary file beside `path`; on success fsync and rename it onto `path`.

    On any exception the temporary file is removed and `path` is left as it was.
    """
    text_options = {} if "b" in mode else {"encoding": encoding, "newline": newline}
    with atomic_path(path) as tmp, open(tmp, mode, **text_options) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())
