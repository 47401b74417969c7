"""The optimizer of K stacked workers (emasr.nnet.workers.StackedWorkers): K real workers'
optimizers over parameters stacked as [K, ...] tensors, each worker's state in a real worker's
layout.

A worker may sit out a step: at an epoch's end a shorter shard has run out of minibatches while
the others train theirs (emasr.nnet.trainer.blocks). A real worker then takes no step at all, so
neither its parameters nor its optimizer state may change, whatever the others do. Two layouts,
chosen by what the optimizer keeps (`counts_steps`):

- `StackedOptimizer`: one optimizer over the stacked tensors, for optimizers whose state is kept
  element by element (SGD's momentum buffer): it is K optimizers at once, a worker's state its
  slice [k]. A worker that sits out a step gets its slices of the parameters and of that state
  put back after the step (its zero gradient would still move them through momentum and weight
  decay). The step's kernels are those of one optimizer whatever K.
- `PerWorkerOptimizer`: one optimizer over each worker's slices (K x P tensors), for optimizers
  that also keep a number per tensor (Adam's step count, which sets its bias correction): one such
  number cannot count K workers that took different numbers of steps. A worker that sits out a
  step has no gradient there, and torch's optimizers skip a tensor without one.
"""
from __future__ import annotations

import copy

import torch
from torch import nn


def per_worker(value) -> bool:
    """Optimizer state of a stacked tensor with one entry per worker (momentum buffers), not
    shared by its K slices (Adam's step)."""
    return torch.is_tensor(value) and value.dim() > 0


def counts_steps(make_optimizer, device: torch.device) -> bool:
    """Whether the optimizer keeps state that is not element by element (a step count per
    tensor): one step of it on a small probe tensor says."""
    probe = torch.zeros(2, device=device, requires_grad=True)
    optimizer = make_optimizer([probe])
    probe.grad = torch.zeros_like(probe)
    optimizer.step()
    return any(value is not None and not per_worker(value)
               for state in optimizer.state.values() for value in state.values())


def make_stacked_optimizer(make_optimizer, params: list[nn.Parameter], device: torch.device):
    """The layout the optimizer needs (module docstring) over stacked `params` [K, ...]."""
    kind = PerWorkerOptimizer if counts_steps(make_optimizer, device) else StackedOptimizer
    return kind(make_optimizer, params)


def one_group(saved: dict) -> dict:
    if len(saved["param_groups"]) != 1:
        raise ValueError(f"stacked workers take an optimizer of one parameter group, got "
                         f"{len(saved['param_groups'])}")
    return copy.deepcopy(saved["param_groups"][0])


class StackedOptimizer:
    """One optimizer over the stacked [K, ...] tensors (state kept element by element)."""

    def __init__(self, make_optimizer, params: list[nn.Parameter]) -> None:
        self.params, self.count = params, params[0].shape[0]
        self.optimizer = make_optimizer(params)

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def held(self) -> list[torch.Tensor]:
        """What a step changes, per worker along dim 0: the parameters and their state."""
        state = [value for p in self.params for value in self.optimizer.state.get(p, {}).values()
                 if per_worker(value)]
        return [p.detach() for p in self.params] + state

    @torch.no_grad()
    def step(self, absent: list[int]) -> None:
        """One step of every worker but those in `absent`, whose slices are put back."""
        if not absent:
            self.optimizer.step()
            return
        index = torch.tensor(absent, device=self.params[0].device)
        tensors = self.held()
        kept = [t.index_select(0, index) for t in tensors]   # copies
        self.optimizer.step()
        for tensor, before in zip(tensors, kept):
            tensor.index_copy_(0, index, before)

    def state(self, k: int) -> dict:
        """Worker k's optimizer state_dict, as a real worker's optimizer writes it."""
        saved = self.optimizer.state_dict()
        return {"param_groups": [one_group(saved)],
                "state": {i: {key: value[k].clone(memory_format=torch.contiguous_format)
                              if per_worker(value) else value
                              for key, value in entry.items()}
                          for i, entry in saved["state"].items()}}

    def load(self, states: list[dict]) -> None:
        """The K workers' states, each buffer laid out as its parameter is (a stacked weight may
        be a transpose: emasr.nnet.workers.stacked)."""
        first = states[0]
        self.optimizer.load_state_dict({
            "param_groups": copy.deepcopy(first["param_groups"]),
            "state": {i: {key: torch.empty_like(self.params[i]).copy_(
                              torch.stack([s["state"][i][key] for s in states]))
                          if per_worker(value) else value for key, value in entry.items()}
                      for i, entry in first["state"].items()}})


class PerWorkerOptimizer:
    """One optimizer over the K x P slices of the stacked tensors (state counted per tensor)."""

    def __init__(self, make_optimizer, params: list[nn.Parameter]) -> None:
        self.params, self.count = params, params[0].shape[0]
        # views of the stacked tensors: the optimizer updates the stacked parameters in place
        self.views = [[p.detach()[k] for p in params] for k in range(self.count)]
        self.optimizer = make_optimizer([view for views in self.views for view in views])

    @property
    def param_groups(self) -> list[dict]:
        return self.optimizer.param_groups

    def zero_grad(self) -> None:
        for p in self.params:   # the stacked tensors' gradients, which backward fills
            p.grad = None
        self.optimizer.zero_grad(set_to_none=True)

    @torch.no_grad()
    def step(self, absent: list[int]) -> None:
        """One step of every worker but those in `absent` (no gradient: skipped)."""
        for k, views in enumerate(self.views):
            for p, view in zip(self.params, views):
                view.grad = None if k in absent else p.grad[k]
        self.optimizer.step()

    def state(self, k: int) -> dict:
        saved, size = self.optimizer.state_dict(), len(self.params)
        group = one_group(saved)
        group["params"] = list(range(size))
        return {"param_groups": [group],
                "state": {i - k * size: {key: value.clone() if torch.is_tensor(value) else value
                                         for key, value in entry.items()}
                          for i, entry in saved["state"].items()
                          if k * size <= i < (k + 1) * size}}

    def load(self, states: list[dict]) -> None:
        size = len(self.params)
        group = one_group(states[0])
        group["params"] = list(range(self.count * size))
        self.optimizer.load_state_dict({
            "param_groups": [group],
            "state": {k * size + i: entry for k, s in enumerate(states)
                      for i, entry in s["state"].items()}})
