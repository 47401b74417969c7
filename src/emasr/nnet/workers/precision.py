"""How a training step computes: its precision, TF32 matmuls, the optimizer's kernels, compilation.

Each is a switch in the config's `train` section (docs/training.md, "Precision and launches");
their defaults compute exactly what the toolkit computed before they existed.

- `train.precision`: `fp32`, or `bf16`: the forward and the loss run under torch.autocast with
  bfloat16 (matmuls and the LSTM in bf16), the weights, gradients and optimizer state stay fp32
  (the master weights), and the log-softmax and the loss are computed in fp32. bf16 has fp32's
  exponent range, so no loss scaling is needed. Evaluation and decoding stay fp32.
- `train.tf32`: TF32 tensor-core matmuls for fp32 on CUDA (no effect on a CPU).
- `train.optimizer_impl`: `default` (torch's own choice: a per-tensor loop on the CPU, `foreach`
  on CUDA), `foreach` (one multi-tensor kernel per update step), `fused` (one fused kernel where
  torch has one for the optimizer and device, else `foreach`).
- `train.compile`: torch.compile of the per-step work (forward and loss, and so their backward),
  in `train.compile_mode`: `default`, or `reduce-overhead` (the compiled forward and backward
  replayed as CUDA graphs: one launch each instead of one per kernel; on a CPU the same as
  `default`).
"""
from __future__ import annotations

import contextlib
import logging

import torch

logger = logging.getLogger(__name__)

# The precisions a step can compute in (the one registry: the config check reads it), each with
# the dtype autocast runs in (None: no autocast).
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}

# The optimizer step's kernels (train.optimizer_impl).
OPTIMIZER_IMPLS = ("default", "foreach", "fused")

# torch.compile's modes a step may compile in (train.compile_mode), each with whether it replays
# CUDA graphs (whose trees must be told where a training step begins: new_step).
COMPILE_MODES: dict[str, bool] = {"default": False, "reduce-overhead": True}


def autocast(device: torch.device, precision: str):
    """The context a step's forward and loss run in."""
    dtype = PRECISIONS[precision]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def set_tf32(device: torch.device, allowed: bool) -> None:
    """Allow (or forbid, torch's default) TF32 matmuls for fp32 on CUDA; a CPU has none."""
    if device.type != "cuda":
        return
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):   # torch >= 2.9; allow_tf32 is its older spelling
        matmul.fp32_precision = "tf32" if allowed else "ieee"
    else:
        matmul.allow_tf32 = allowed


def optimizer_options(impl: str) -> dict:
    """Keyword arguments of torch.optim.SGD / Adam for train.optimizer_impl."""
    if impl == "default":
        return {}
    if impl == "foreach":
        return {"foreach": True}
    if impl == "fused":
        return {"fused": True}
    raise ValueError(f"unknown train.optimizer_impl '{impl}'; expected one of "
                     f"{', '.join(OPTIMIZER_IMPLS)}")


def make_optimizer(factory, params, impl: str) -> torch.optim.Optimizer:
    """factory(params, **kernel options); `fused` falls back to `foreach` where torch has no fused
    kernel for the optimizer or the parameters' device."""
    params = list(params)
    try:
        return factory(params, **optimizer_options(impl))
    except (RuntimeError, ValueError, TypeError) as err:
        if impl != "fused":
            raise
        logger.warning("no fused optimizer step here (%s); using foreach", err)
        return factory(params, foreach=True)


def compile_mode(train) -> str | None:
    """The torch.compile mode of a config's `train` section; None: eager."""
    return train.compile_mode if train.compile else None


def compiled(function, mode: str | None):
    """torch.compile(function, mode=mode), or function itself for None (the first calls compile;
    a new minibatch shape, the short last one of an epoch, compiles once more)."""
    return function if mode is None else torch.compile(function, mode=mode)


def replays_graphs(mode: str | None) -> bool:
    return mode is not None and COMPILE_MODES[mode]


def new_step(mode: str | None) -> None:
    """Mark the start of a training step for CUDA graph trees: from here the graphs' replays
    reuse the memory of the last step's outputs (what must outlive a step is copied: kept)."""
    if replays_graphs(mode):
        torch.compiler.cudagraph_mark_step_begin()


def kept(output: torch.Tensor, mode: str | None) -> torch.Tensor:
    """A compiled function's output that must outlive the step (the step's statistics, read
    once per block): under CUDA graphs a copy, since the next step's replay overwrites it."""
    return output.clone() if replays_graphs(mode) else output
