"""A model's synchronized state as one flat vector, so a sync is a single all-reduce.

The vector holds every parameter and every floating-point buffer (batchnorm running statistics
are averaged like weights; integer counters are left alone), in `state_tensors` order.
"""
from __future__ import annotations

import torch
from torch import nn


def state_tensors(model: nn.Module) -> list[torch.Tensor]:
    tensors = [p for p in model.parameters()]
    tensors += [b for b in model.buffers() if b.is_floating_point()]
    return tensors


def model_to_vector(model: nn.Module, out: torch.Tensor | None = None) -> torch.Tensor:
    """The flat vector, new or written into `out` (a buffer of the right size, reused)."""
    return torch.cat([t.detach().reshape(-1) for t in state_tensors(model)], out=out)


@torch.no_grad()
def vector_to_model(vector: torch.Tensor, model: nn.Module) -> None:
    offset = 0
    for tensor in state_tensors(model):
        size = tensor.numel()
        tensor.copy_(vector[offset:offset + size].view_as(tensor))
        offset += size
    if offset != vector.numel():
        raise ValueError(f"vector has {vector.numel()} values, the model {offset}")
