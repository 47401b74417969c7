"""The one collective of a sync: the mean of a flat vector over all workers, with accounting.

Process-group setup lives here too, so the trainer has one place that knows about processes.
"""
from __future__ import annotations

import datetime
import os
import time

import torch
import torch.distributed as dist


class RendezvousError(RuntimeError):
    """A worker could not reach its peers."""


def init_process_group(backend: str, timeout_s: float) -> tuple[int, int]:
    """Join the torchrun job described by the environment (RANK, WORLD_SIZE, MASTER_ADDR...);
    without it, run as a single worker. Returns (rank, world_size)."""
    if "WORLD_SIZE" not in os.environ:
        return 0, 1
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    if backend == "nccl":   # one GPU per worker on its node, before NCCL creates its communicator
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    try:
        dist.init_process_group(backend, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        dist.barrier()
    except Exception as err:  # noqa: BLE001 (torch raises several types for the same failure)
        raise RendezvousError(
            f"worker {rank} of {world} could not reach its peers at {where} within {timeout_s:g} s "
            f"(backend {backend}): {type(err).__name__}: {first_line(err)}. Check that all "
            "workers started and MASTER_ADDR/MASTER_PORT are reachable, or raise dist.timeout_s"
        ) from None
    return rank, world


def first_line(err: Exception) -> str:
    return (str(err).splitlines() or [""])[0].rstrip(".")


def destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class Communicator:
    """Mean over workers of one flat vector per call; counts bytes and seconds spent."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.bytes_reduced = 0
        self.seconds = 0.0

    def mean(self, vector: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return vector
        start = time.perf_counter()
        dist.all_reduce(vector, op=dist.ReduceOp.SUM)
        vector.div_(self.world_size)
        if vector.is_cuda:
            torch.cuda.synchronize(vector.device)
        self.seconds += time.perf_counter() - start
        self.bytes_reduced += vector.numel() * vector.element_size()
        return vector

    def barrier(self) -> None:
        if self.world_size > 1:
            dist.barrier()

    def state_dict(self) -> dict:
        return {"bytes_reduced": self.bytes_reduced, "seconds": self.seconds}

    def load_state_dict(self, state: dict) -> None:
        self.bytes_reduced, self.seconds = state["bytes_reduced"], state["seconds"]
