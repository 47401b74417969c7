"""What a step's outputs were made from: `<dir>/inputs.sha256`, the sha256 of every input file in
sha256sum's format (written by the shell steps, utils/lib/inputs.sh; a decode writes it last).
A reader of those outputs (emasr report) refuses a dir whose inputs have changed since: the
metrics of a retrained model paired with the error rate of the model it replaced would otherwise
be reported without a word. Paths are as the step was given them, relative to its directory (a
recipe's); a file that cannot be found from here is not checked."""
from __future__ import annotations

import functools
import hashlib
import logging
import os

RECORD = "inputs.sha256"

logger = logging.getLogger(__name__)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@functools.lru_cache(maxsize=None)
def changed_inputs(directory: str) -> tuple[str, ...]:
    """The files of <directory>/inputs.sha256 whose content is no longer the one recorded
    (none where the dir has no record: a Kaldi decode dir, or one from before records)."""
    record = os.path.join(directory, RECORD)
    if not os.path.isfile(record):
        return ()
    changed, unseen = [], []
    with open(record, encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            digest, _, path = line.rstrip("\n").partition("  ")
            if not path:
                continue
            if not os.path.isfile(path):
                unseen.append(path)
            elif file_sha256(path) != digest:
                changed.append(path)
    if unseen:
        logger.warning("%s: %d recorded input(s) not found from %s (e.g. %s): not checked", record,
                       len(unseen), os.getcwd(), unseen[0])
    return tuple(changed)
