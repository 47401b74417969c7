"""Checkpoints that resume training exactly, written so a crash never leaves a broken one.

Layout: <exp>/checkpoints/epochEEE-blockBBBBBB/ holds rank<G>.pt for every worker G, 0..N-1
(its local model, optimizer and RNG states; a process with K virtual workers writes K of them,
each with its dropout stream under rng["stream"]) and state.pt (rank 0: the global model, block momentum, EMA, schedule,
counters, data position and the resolved config). EEE is the epoch to continue in and BBBBBB the
blocks already done in it. Every file is written under a temporary name and renamed; state.pt is
written last, after all ranks wrote theirs, so a directory without it is incomplete and ignored.
"""
from __future__ import annotations

import os
import random
import shutil

import numpy as np
import torch

from emasr.io.atomic import atomic_write

STATE = "state.pt"


def tag(epoch: int, block: int) -> str:
    return f"epoch{epoch:03d}-block{block:06d}"


def directory(exp_dir: str, epoch: int, block: int) -> str:
    return os.path.join(exp_dir, "checkpoints", tag(epoch, block))


def save(obj: dict, path: str) -> None:
    try:
        with atomic_write(path, "wb", encoding=None, newline=None) as f:
            torch.save(obj, f)
    except RuntimeError as err:
        # torch.save reports a failed write (a full disk) as a zip-writer RuntimeError ("unexpected
        # pos ..."); say what really happened.
        cause = err.__context__
        if isinstance(cause, OSError):
            raise OSError(cause.errno, f"could not write checkpoint {path}: {cause.strerror}") \
                from None
        raise


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read (truncated, corrupt, not a checkpoint)."""


def load(path: str, device: str | torch.device = "cpu") -> dict:
    try:
        return torch.load(path, map_location=device, weights_only=False)
    except FileNotFoundError:
        raise
    except Exception as err:  # noqa: BLE001 (torch raises several types for a damaged file)
        in_checkpoint = os.path.basename(os.path.dirname(os.path.abspath(path))).startswith("epoch")
        hint = (f". Delete its directory {os.path.dirname(path)} to resume from the checkpoint "
                "before it" if in_checkpoint else "")
        raise CheckpointError(
            f"cannot read {path} (truncated or corrupt?): {type(err).__name__}: "
            f"{(str(err).splitlines() or [''])[0].split('. ')[0]}{hint}") from None


def latest(exp_dir: str) -> str | None:
    """The newest complete checkpoint directory (one with state.pt), or None."""
    root = os.path.join(exp_dir, "checkpoints")
    if not os.path.isdir(root):
        return None
    done = sorted(d for d in os.listdir(root) if os.path.isfile(os.path.join(root, d, STATE)))
    return os.path.join(root, done[-1]) if done else None


def start_afresh(exp_dir: str) -> None:
    """Before a run that does not resume: remove what an earlier run in `exp_dir` left and this
    one writes again (checkpoints, metrics.jsonl, the models *.pt), so nothing of it survives
    beside the new run; then check that the dirs the run writes are writable, before any work."""
    root = os.path.join(exp_dir, "checkpoints")
    try:
        if os.path.isdir(root):
            shutil.rmtree(root)
        for name in os.listdir(exp_dir):
            if name.endswith(".pt") or name == "metrics.jsonl":
                os.remove(os.path.join(exp_dir, name))
    except OSError as err:
        raise CheckpointError(f"cannot remove the earlier run's {err.filename} ({err.strerror}); "
                              "expected a writable exp dir") from None
    check_writable(exp_dir)


def check_writable(exp_dir: str) -> None:
    """The exp dir and its checkpoints/ must take new files: say so now, not after an epoch.
    Root may write whatever the permission bits say, so the bits are checked too."""
    root = os.path.join(exp_dir, "checkpoints")
    os.makedirs(root, exist_ok=True)
    for path in (exp_dir, root):
        if not os.access(path, os.W_OK | os.X_OK) or not os.stat(path).st_mode & 0o222:
            raise CheckpointError(f"cannot write to {path} (read-only); expected a writable "
                                  "directory for the models and checkpoints")


def rng_states() -> dict:
    return {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
            "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def restore_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    np.random.set_state(states["numpy"])
    random.setstate(states["python"])
    if states.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
