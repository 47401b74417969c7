"""The one collective of a sync: the mean of a flat vector over all workers, with accounting.

Process-group setup lives here too, so the trainer has one place that knows about processes.
Every collective goes through the Communicator, which records in the job's key-value store how
many collectives this worker has entered, and a heartbeat thread stamps the time there every few
seconds. When a collective times out (dist.timeout_s), the survivors read both and name the
worker(s) that never arrived or stopped beating (a frozen process) instead of stalling silently.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import threading
import time
from typing import Iterator

import torch
import torch.distributed as dist

from emasr.nnet.sections import ConfigError


class RendezvousError(RuntimeError):
    """A worker could not reach its peers."""


class CollectiveTimeout(RuntimeError):
    """A collective did not complete: a peer died, or stalled past dist.timeout_s."""


def worker_device(choice: str) -> torch.device:
    """This worker's device from dist.device: auto (a GPU when torch sees one), cpu or cuda.
    Worker LOCAL_RANK takes GPU LOCAL_RANK modulo the node's GPUs, so with more workers than GPUs
    they share (e.g. 4 MA/BMUF workers on a one-GPU workstation)."""
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError("dist.device is cuda but torch sees no GPU (torch.cuda.is_available() "
                          f"is False; torch {torch.__version__}); use dist.device=auto or cpu")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    return torch.device("cuda", local_rank % torch.cuda.device_count())


def choose_backend(choice: str, device: torch.device) -> str:
    """dist.backend: auto is nccl when every worker on this node has a GPU of its own, else gloo
    (CPU workers, or workers sharing a GPU: NCCL refuses two ranks on one device)."""
    local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    own_gpu = device.type == "cuda" and local_workers <= torch.cuda.device_count()
    if choice == "auto":
        return "nccl" if own_gpu else "gloo"
    if choice == "nccl" and not own_gpu:
        raise ConfigError(
            f"dist.backend is nccl, which needs one GPU per worker, but this node runs "
            f"{local_workers} worker(s) on {device.type}"
            + (f" with {torch.cuda.device_count()} GPU(s)" if device.type == "cuda" else "")
            + "; use dist.backend=gloo (or auto) to share, or fewer workers")
    return choice


def init_process_group(backend: str, timeout_s: float, device: torch.device) -> tuple[int, int]:
    """Join the torchrun job described by the environment (RANK, WORLD_SIZE, MASTER_ADDR...);
    without it, run as a single worker. Returns (rank, world_size)."""
    if device.type == "cuda":   # before NCCL creates its communicator on the current device
        torch.cuda.set_device(device)
    if "WORLD_SIZE" not in os.environ:
        return 0, 1
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = choose_backend(backend, device)
    where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
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


def default_store():
    """The process group's key-value store (torchrun's), or None where torch hides it."""
    try:
        return dist.distributed_c10d._get_default_store()   # noqa: SLF001 (no public accessor)
    except Exception:  # noqa: BLE001
        return None


class Communicator:
    """Mean over workers of one flat vector per call; counts bytes and seconds spent."""

    def __init__(self, world_size: int, rank: int = 0, timeout_s: float = 0.0) -> None:
        self.world_size, self.rank, self.timeout_s = world_size, rank, timeout_s
        self.bytes_reduced = 0
        self.seconds = 0.0
        self.entered = 0   # collectives this worker has entered in this process
        self.store = default_store() if world_size > 1 else None
        # a restarted worker group (torchrun --max-restarts) counts afresh under its own keys
        self.prefix = f"emasr/progress/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
        self.heartbeat_s = max(0.2, timeout_s / 5)
        if self.store is not None:
            threading.Thread(target=self.beat, daemon=True, name="emasr-heartbeat").start()

    def beat(self) -> None:
        """Stamp this worker's time in the store until the process ends (daemon thread)."""
        while True:
            try:
                self.store.set(f"{self.prefix}alive/{self.rank}", repr(time.time()))
            except Exception:  # noqa: BLE001 (the job's store is gone: nothing left to tell)
                return
            time.sleep(self.heartbeat_s)

    @contextlib.contextmanager
    def collective(self, what: str) -> Iterator[None]:
        """Run one collective; if it fails, say which worker(s) never entered it."""
        self.entered += 1
        if self.store is not None:
            self.store.set(self.prefix + str(self.rank), str(self.entered))
        try:
            yield
        except Exception as err:  # noqa: BLE001 (gloo/nccl raise several types for a timeout)
            raise CollectiveTimeout(self.failure_message(what, err)) from None

    def failure_message(self, what: str, err: Exception) -> str:
        findings = []
        behind = self.workers_behind()
        if behind:
            ranks = ", ".join(f"{rank} (entered {n})" for rank, n in behind)
            findings.append(f"worker(s) {ranks} never entered it")
        silent = self.workers_silent()
        if silent:
            ranks = ", ".join(f"{rank} (last heartbeat {s:.0f} s ago)" for rank, s in silent)
            findings.append(f"worker(s) {ranks} stopped responding (hung or frozen)")
        who = "; ".join(findings) or "no peer looks stalled, so one probably died inside it"
        return (f"worker {self.rank} of {self.world_size}: collective #{self.entered} ({what}) "
                f"failed: a peer died or made no progress within dist.timeout_s={self.timeout_s:g} "
                f"s; {who}. {type(err).__name__}: {first_line(err)}")

    def read_store(self, name: str) -> str | None:
        try:
            key = self.prefix + name
            return self.store.get(key).decode() if self.store.check([key]) else None
        except Exception:  # noqa: BLE001 (the store itself may be gone with the job)
            return None

    def workers_behind(self) -> list[tuple[int, int]]:
        """(rank, collectives entered) of every worker that has not reached this one."""
        if self.store is None:
            return []
        counts = {rank: self.read_store(str(rank)) for rank in range(self.world_size)}
        return [(rank, int(n or 0)) for rank, n in counts.items() if int(n or 0) < self.entered]

    def workers_silent(self) -> list[tuple[int, float]]:
        """(rank, seconds since its heartbeat) of every worker silent for over 3 beats."""
        if self.store is None:
            return []
        now, silent = time.time(), []
        for rank in range(self.world_size):
            stamp = self.read_store(f"alive/{rank}")
            if stamp is not None and now - float(stamp) > 3 * self.heartbeat_s:
                silent.append((rank, now - float(stamp)))
        return silent

    def all_reduce(self, tensor: torch.Tensor, what: str, op=None) -> torch.Tensor:
        """In-place all-reduce (sum unless `op`), a no-op for a single worker."""
        if self.world_size > 1:
            # gloo between workers that share a GPU: reduce a host copy (gloo's CUDA support
            # varies between torch builds; the copy costs little next to a training block)
            staged = tensor.cpu() if tensor.is_cuda and dist.get_backend() == "gloo" else tensor
            with self.collective(what):
                dist.all_reduce(staged, op=dist.ReduceOp.SUM if op is None else op)
            if staged is not tensor:
                tensor.copy_(staged)
        return tensor

    def mean(self, vector: torch.Tensor) -> torch.Tensor:
        if self.world_size == 1:
            return vector
        start = time.perf_counter()
        self.all_reduce(vector, "sync all-reduce")
        vector.div_(self.world_size)
        if vector.is_cuda:
            torch.cuda.synchronize(vector.device)
        self.seconds += time.perf_counter() - start
        self.bytes_reduced += vector.numel() * vector.element_size()
        return vector

    def barrier(self, what: str = "barrier") -> None:
        if self.world_size > 1:
            with self.collective(what):
                dist.barrier()

    def state_dict(self) -> dict:
        return {"bytes_reduced": self.bytes_reduced, "seconds": self.seconds}

    def load_state_dict(self, state: dict) -> None:
        self.bytes_reduced, self.seconds = state["bytes_reduced"], state["seconds"]
