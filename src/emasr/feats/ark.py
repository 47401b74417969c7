"""Write a Kaldi ark/scp pair atomically, one matrix at a time.

Kaldi writes `ark,scp:X.ark,X.scp` in place, so a crashed job leaves a half-written pair behind.
Here the ark goes to a temporary name and the scp lines name the final ark path; on success the ark
is renamed into place first and the scp last, so a present scp always points at a complete ark.
The matrices are encoded as kaldiio encodes them (binary, optionally compressed as Kaldi's
`--compress`), the common compressed case through emasr.feats.compression, which is faster.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from types import TracebackType

import kaldiio.matio
import numpy as np

from emasr.feats.compression import MIN_ROWS_FOR_SPEECH_FEATURE, compress_speech_feature
from emasr.io.atomic import atomic_write

# Kaldi's kAutomaticMethod: speech-feature compression for matrices of more than 8 rows, else
# two-byte. It is what `copy-feats --compress=true` uses by default.
KALDI_AUTOMATIC_COMPRESSION = 1


class ArkScpWriter:
    """Context manager: `with ArkScpWriter(ark, scp) as w: w.write(key, matrix)`."""

    def __init__(self, ark_path: str, scp_path: str, compress: bool = False):
        self.ark_path = os.path.abspath(ark_path)
        self.scp_path = scp_path
        self.compression = KALDI_AUTOMATIC_COMPRESSION if compress else None
        self.entries: list[tuple[str, int]] = []
        self.abandoned = False
        os.makedirs(os.path.dirname(self.ark_path), exist_ok=True)
        fd, self.tmp_path = tempfile.mkstemp(prefix=os.path.basename(ark_path) + ".tmp.",
                                             dir=os.path.dirname(self.ark_path))
        self.file = os.fdopen(fd, "wb")

    def write(self, key: str, matrix: np.ndarray) -> None:
        if not key or " " in key:
            raise ValueError(f"bad ark key '{key}': keys must be non-empty without spaces")
        try:
            self.file.write(key.encode("utf-8") + b" ")
            self.entries.append((key, self.file.tell()))
            if (self.compression and matrix.ndim == 2
                    and len(matrix) >= MIN_ROWS_FOR_SPEECH_FEATURE):
                self.file.write(b"\0B" + compress_speech_feature(matrix))  # kaldiio's bytes
            else:
                kaldiio.matio.write_array(self.file, matrix, compression_method=self.compression)
        except OSError as err:  # a full disk: Python's message names no file
            raise _naming(err, self.ark_path) from None

    def abandon(self) -> None:
        """Write neither ark nor scp on leaving the `with` (a job with nothing to write: an
        empty ark would look like a complete one)."""
        self.abandoned = True

    def discard(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp_path)

    def __enter__(self) -> "ArkScpWriter":
        return self

    def __exit__(self, kind: type | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        # No fsync (Kaldi does not sync arks either): the rename alone means a crashed job never
        # leaves a partial ark under the final name.
        try:
            self.file.close()   # writes the last buffered bytes: fails too when the disk is full
        except BaseException as err:
            self.discard()
            if kind is None:
                raise _naming(err, self.ark_path) if isinstance(err, OSError) else err from None
            return   # the error raised in the `with` body goes on
        if kind is not None or self.abandoned:
            self.discard()
            return
        os.chmod(self.tmp_path, 0o644)
        os.replace(self.tmp_path, self.ark_path)
        with atomic_write(self.scp_path) as scp:
            for key, offset in self.entries:
                scp.write(f"{key} {self.ark_path}:{offset}\n")


def _naming(err: OSError, path: str) -> OSError:
    """The same error with the file in its message: 'could not write X: No space left ...'."""
    return type(err)(err.errno, f"could not write {path}: {err.strerror or err}")
