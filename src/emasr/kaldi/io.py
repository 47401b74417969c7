"""Kaldi's object serialization at the token level, binary and text, without the C++ library.

Kaldi objects (TransitionModel, AmDiagGmm, trees) are written as a stream of tokens and values
(src/base/io-funcs.cc, src/matrix/kaldi-vector.cc, kaldi-matrix.cc):

- a binary file starts with the two bytes ``\\0B``; a text file has no header;
- a token is a word followed by one space, in both modes (``<DiagGMM> ``);
- a binary int32 is a size byte (4; -4 for unsigned) then 4 little-endian bytes; a binary float is
  a size byte (4 or 8) then the IEEE value; in text, both are the number followed by a space;
- an integer vector is, in binary, a size byte, an int32 count and the raw values; in text
  ``[ 1 2 3 ]``;
- a float vector is ``FV``/``DV`` + int32 dim + raw values in binary, `` [ a b c ]`` in text;
- a float matrix is ``FM``/``DM`` + int32 rows + int32 cols + raw rows in binary; in text
  `` [`` then one line per row and ``]``.

KaldiReader and KaldiWriter implement exactly these rules; the object layouts live with the
objects (emasr.kaldi.transitions, emasr.kaldi.model_io).
"""
from __future__ import annotations

import io
import os
import struct

import numpy as np

BINARY_HEADER = b"\0B"
_WHITESPACE = b" \t\n\r\v\f"


class KaldiFormatError(ValueError):
    """A Kaldi object file does not have the expected layout; the message names file and offset."""


class KaldiReader:
    """Reads tokens and values from the bytes of one Kaldi object file (binary or text)."""

    def __init__(self, data: bytes, name: str = "<bytes>"):
        self.name = name
        self.binary = data.startswith(BINARY_HEADER)
        self.data = data
        self.pos = len(BINARY_HEADER) if self.binary else 0

    @classmethod
    def open(cls, path: str | os.PathLike) -> "KaldiReader":
        path = os.fspath(path)
        try:
            with open(path, "rb") as f:
                return cls(f.read(), path)
        except FileNotFoundError:
            raise FileNotFoundError(f"{path}: no such file") from None

    # -- errors and low-level scanning --
    def error(self, what: str) -> KaldiFormatError:
        mode = "binary" if self.binary else "text"
        return KaldiFormatError(f"{self.name}: at byte {self.pos} ({mode} Kaldi format): {what}")

    def _skip_whitespace(self) -> None:
        data, pos = self.data, self.pos
        while pos < len(data) and data[pos] in _WHITESPACE:
            pos += 1
        self.pos = pos

    def _take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise self.error(f"file ends while reading {what} (truncated file?)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def _word(self, what: str) -> str:
        """The next whitespace-delimited word (text values, and tokens in both modes)."""
        self._skip_whitespace()
        start = self.pos
        data = self.data
        while self.pos < len(data) and data[self.pos] not in _WHITESPACE:
            self.pos += 1
        if self.pos == start:
            raise self.error(f"file ends while reading {what} (truncated file?)")
        return data[start:self.pos].decode("utf-8", errors="replace")

    def at_end(self) -> bool:
        self._skip_whitespace()
        return self.pos >= len(self.data)

    # -- tokens --
    def read_token(self) -> str:
        token = self._word("a token")
        if self.binary:
            # Kaldi writes exactly one space after a token and checks for it when reading.
            if self.pos >= len(self.data) or self.data[self.pos] not in _WHITESPACE:
                raise self.error(f"expected a space after token '{token}'")
            self.pos += 1
        return token

    def expect_token(self, *expected: str) -> str:
        start = self.pos
        token = self.read_token()
        if token not in expected:
            self.pos = start
            want = " or ".join(f"'{e}'" for e in expected)
            raise self.error(f"expected {want}, got '{token[:40]}'")
        return token

    # -- scalars --
    def read_int(self, what: str = "an integer") -> int:
        if not self.binary:
            word = self._word(what)
            try:
                return int(word)
            except ValueError:
                raise self.error(f"expected {what}, got '{word[:40]}'") from None
        start = self.pos
        size = struct.unpack("b", self._take(1, what))[0]
        if size not in (4, -4):
            self.pos = start
            raise self.error(f"expected {what} (size byte 4), got size byte {size}")
        return struct.unpack("<i" if size == 4 else "<I", self._take(4, what))[0]

    def read_float(self, what: str = "a float") -> float:
        if not self.binary:
            word = self._word(what)
            try:
                return float(word)
            except ValueError:
                raise self.error(f"expected {what}, got '{word[:40]}'") from None
        start = self.pos
        size = struct.unpack("b", self._take(1, what))[0]
        if size == 4:
            return struct.unpack("<f", self._take(4, what))[0]
        if size == 8:
            return struct.unpack("<d", self._take(8, what))[0]
        self.pos = start
        raise self.error(f"expected {what} (size byte 4 or 8), got size byte {size}")

    # -- containers --
    def read_int_vector(self, what: str = "an integer vector") -> list[int]:
        if not self.binary:
            if self.expect_token("[", "[]") == "[]":
                return []
            values = []
            while (word := self._word(what)) != "]":
                try:
                    values.append(int(word))
                except ValueError:
                    raise self.error(f"expected an integer in {what}, got '{word[:40]}'") from None
            return values
        start = self.pos
        size = struct.unpack("b", self._take(1, what))[0]
        if size != 4:
            self.pos = start
            raise self.error(f"expected {what} of int32 (size byte 4), got size byte {size}")
        count = struct.unpack("<i", self._take(4, what))[0]
        if count < 0:
            raise self.error(f"negative length {count} for {what}")
        return np.frombuffer(self._take(4 * count, what), dtype="<i4").tolist()

    def read_float_vector(self, what: str = "a float vector") -> np.ndarray:
        """A Kaldi Vector<float> or Vector<double>, returned as float32 or float64."""
        if not self.binary:
            if self.expect_token("[", "[]") == "[]":
                return np.zeros(0, dtype=np.float32)
            words = []
            while (word := self._word(what)) != "]":
                words.append(word)
            return self._parse_floats(words, what, np.float32)
        kind = self.expect_token("FV", "DV")
        dim = self.read_int(f"the dimension of {what}")
        dtype = np.dtype("<f4") if kind == "FV" else np.dtype("<f8")
        if dim < 0:
            raise self.error(f"negative dimension {dim} for {what}")
        return np.frombuffer(self._take(dtype.itemsize * dim, what), dtype=dtype).astype(
            dtype.newbyteorder("="))

    def read_float_matrix(self, what: str = "a float matrix") -> np.ndarray:
        """A Kaldi Matrix<float> or Matrix<double>, returned as a 2-D float32 or float64 array."""
        if not self.binary:
            return self._read_text_matrix(what)
        kind = self.expect_token("FM", "DM")
        rows = self.read_int(f"the number of rows of {what}")
        cols = self.read_int(f"the number of columns of {what}")
        if rows < 0 or cols < 0:
            raise self.error(f"negative size {rows}x{cols} for {what}")
        dtype = np.dtype("<f4") if kind == "FM" else np.dtype("<f8")
        flat = np.frombuffer(self._take(dtype.itemsize * rows * cols, what), dtype=dtype)
        return flat.astype(dtype.newbyteorder("=")).reshape(rows, cols)

    def _read_text_matrix(self, what: str) -> np.ndarray:
        # Text matrices are line-structured: one row per line between "[" and "]".
        opening = self._word(what)
        if opening == "[]":
            return np.zeros((0, 0), dtype=np.float32)
        if opening != "[":
            raise self.error(f"expected '[' to open {what}, got '{opening[:40]}'")
        end = self.data.find(b"]", self.pos)
        if end < 0:
            raise self.error(f"file ends inside {what} (no closing ']')")
        body = self.data[self.pos:end].decode("ascii", errors="replace")
        self.pos = end + 1
        rows = [line.split() for line in body.replace(";", "\n").splitlines() if line.split()]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        widths = {len(row) for row in rows}
        if len(widths) != 1:
            raise self.error(f"rows of {what} have different lengths {sorted(widths)}")
        values = self._parse_floats([w for row in rows for w in row], what, np.float32)
        return values.reshape(len(rows), widths.pop())

    def _parse_floats(self, words: list[str], what: str, dtype) -> np.ndarray:
        try:
            # float() accepts inf/-inf/nan as Kaldi's text reader does.
            return np.array([float(w) for w in words], dtype=dtype)
        except ValueError as err:
            raise self.error(f"expected numbers in {what}: {err}") from None


class KaldiWriter:
    """Writes tokens and values in Kaldi's binary or text layout into an in-memory buffer."""

    def __init__(self, binary: bool = True):
        self.binary = binary
        self.buffer = io.BytesIO()
        if binary:
            self.buffer.write(BINARY_HEADER)

    def getvalue(self) -> bytes:
        return self.buffer.getvalue()

    def _text(self, text: str) -> None:
        self.buffer.write(text.encode("utf-8"))

    def newline(self) -> None:
        """Kaldi's text writers put newlines between parts; binary files have none."""
        if not self.binary:
            self._text("\n")

    def write_token(self, token: str) -> None:
        self._text(token + " ")

    def write_int(self, value: int, unsigned: bool = False) -> None:
        if self.binary:
            self.buffer.write(struct.pack("<b", -4 if unsigned else 4))
            self.buffer.write(struct.pack("<I" if unsigned else "<i", int(value)))
        else:
            self._text(f"{int(value)} ")

    def write_float(self, value: float) -> None:
        if self.binary:
            self.buffer.write(b"\x04" + struct.pack("<f", value))
        else:
            self._text(f"{format_float(value)} ")

    def write_int_vector(self, values) -> None:
        values = [int(v) for v in values]
        if self.binary:
            self.buffer.write(b"\x04" + struct.pack("<i", len(values)))
            self.buffer.write(np.asarray(values, dtype="<i4").tobytes())
        else:
            self._text("[ " + "".join(f"{v} " for v in values) + "]\n")

    def write_float_vector(self, values: np.ndarray) -> None:
        values = np.asarray(values)
        double = values.dtype == np.float64
        if self.binary:
            self.write_token("DV" if double else "FV")
            self.write_int(len(values))
            self.buffer.write(values.astype("<f8" if double else "<f4").tobytes())
        elif len(values) == 0:
            self._text(" [ ]\n")
        else:
            self._text(" [ " + "".join(format_float(v, double) + " " for v in values.tolist())
                       + "]\n")

    def write_float_matrix(self, values: np.ndarray) -> None:
        values = np.asarray(values)
        if values.ndim != 2:
            raise ValueError(f"expected a 2-D matrix, got shape {values.shape}")
        double = values.dtype == np.float64
        if self.binary:
            self.write_token("DM" if double else "FM")
            self.write_int(values.shape[0])
            self.write_int(values.shape[1])
            self.buffer.write(values.astype("<f8" if double else "<f4").tobytes())
        elif values.shape[1] == 0:
            self._text(" [ ]\n")
        else:
            rows = ("\n  " + "".join(format_float(v, double) + " " for v in row)
                    for row in values.tolist())
            self._text(" [" + "".join(rows) + "]\n")


def format_float(value: float, double: bool = False) -> str:
    """Shortest text that reads back to the same float32 (or float64) value.

    Kaldi's own text writer prints 6 significant digits, which loses precision; a reader cannot
    tell the difference, and this keeps text round trips exact.
    """
    if double:
        return repr(float(value))
    text = str(np.float32(value))
    return text[:-2] if text.endswith(".0") else text
