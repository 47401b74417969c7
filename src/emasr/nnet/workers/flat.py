"""A model's synchronized state as one flat vector, so a sync is a single all-reduce.

The vector holds every parameter and every floating-point buffer (batchnorm running statistics
are averaged like weights; integer counters are left alone), in `state_tensors` order.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


def state_tensors(model: nn.Module) -> list[torch.Tensor]:
    tensors = [p for p in model.parameters()]
    tensors += [b for b in model.buffers() if b.is_floating_point()]
    return tensors


def model_to_vector(model: nn.Module, out: torch.Tensor | None = None) -> torch.Tensor:
    """The flat vector, new or written into `out` (a buffer of the right size, reused)."""
    return torch.cat([t.detach().reshape(-1) for t in state_tensors(model)], out=out)


def check_mean_size(values: int, out: torch.Tensor) -> None:
    """That a vector `out` can hold the mean of models of `values` values each."""
    if values != out.numel():
        raise ValueError(f"the models have {values} values, the vector {out.numel()}")


@torch.no_grad()
def mean_to_vector(columns: list[Sequence[torch.Tensor]], out: torch.Tensor,
                   accumulator: torch.Tensor) -> torch.Tensor:
    """The mean of K models' flat vectors written into `out`: columns[i] holds the K models'
    copies of their i-th tensor in state_tensors order, summed one model at a time into
    `accumulator` (float64, the vector's size, reused), all tensors of a model in one
    multi-tensor add (K dispatches, not K x tensors; on a GPU the float32-into-float64 add takes
    PyTorch's per-tensor path, whose fused kernels want one dtype). Stacking the K vectors and
    reducing the [K, V] float64 copy gives the same bits at many times the cost on a CPU (a
    model-sized float64 copy per model). On a GPU stacked workers reduce their stacked
    parameters instead (StackedWorkers.mean)."""
    sizes = [column[0].numel() for column in columns]
    check_mean_size(sum(sizes), out)
    if len(columns[0]) == 1:   # one model: its vector (no sum, no rounding)
        return torch.cat([column[0].reshape(-1) for column in columns], out=out)
    totals = [part.view(column[0].shape)
              for part, column in zip(accumulator.split(sizes), columns)]
    torch._foreach_copy_(totals, [column[0] for column in columns])
    for k in range(1, len(columns[0])):
        torch._foreach_add_(totals, [column[k] for column in columns])
    return out.copy_(accumulator.div_(len(columns[0])))


@torch.no_grad()
def vector_to_model(vector: torch.Tensor, model: nn.Module) -> None:
    offset = 0
    for tensor in state_tensors(model):
        size = tensor.numel()
        tensor.copy_(vector[offset:offset + size].view_as(tensor))
        offset += size
    if offset != vector.numel():
        raise ValueError(f"vector has {vector.numel()} values, the model {offset}")
