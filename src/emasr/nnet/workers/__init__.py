"""The workers of one process: K local models trained side by side (`dist.workers_per_process`).

Each of the K virtual workers is exactly a real worker of global index rank * K + k: its own shard,
local model, optimizer state, dropout random stream and gradient clipping. Two implementations:

- `StackedWorkers` (the DNN): the K models' parameters stacked along a new first dimension, one
  batched forward (batched matmuls, StackedWorkers.forward) and backward, and K optimizers in
  the layout emasr.nnet.workers.stacked_optim chooses: SGD with momentum updates element by
  element, so one optimizer over [K, ...] tensors is K independent optimizers (worker k's state
  is the slice [k]); Adam also counts steps per tensor, so it runs over each worker's slices.
  The LSTMP (without dropout, in fp32, eager, on a CPU) stacks the same way, one worker too:
  each layer is one autograd Function of batched matmuls over the K workers
  (emasr.nnet.workers.lstmp), faster than nn.LSTM for one worker and than a loop over K of them.
- `LoopWorkers` (a DNN alone, a batchnorm DNN, the TDNN, any other LSTMP): K ordinary modules
  and optimizers run one after the other.

A worker's dropout stream is seeded as a real worker's (train.init_seed * 1000 + its global index)
and used by nothing else, so it draws the masks that worker would draw.

A step's minibatch of a worker may be None: at an epoch's end a worker whose shard has run out
sits the step out, as a real worker takes no step (no update, no optimizer state, no dropout
draw); its statistics are zeros.

Both run a step's forward and loss in the precision of `train.precision`
(emasr.nnet.workers.precision), optionally compiled (`train.compile`, `train.compile_mode`), and
count the labelled frames on the device the labels are on, so that data already on a GPU (the
resident loader) is never waited for.
"""
from __future__ import annotations

import contextlib
import copy

import torch
import torch.nn.functional as F
from torch import nn

from emasr.nnet.data import IGNORE
from emasr.nnet.models import ACTIVATIONS, LSTMP
from emasr.nnet.models.input_modes import INPUT_MODES
from emasr.nnet.workers import lstmp
from emasr.nnet.workers.flat import (check_mean_size, mean_to_vector, model_to_vector,
                                     state_tensors, vector_to_model)
from emasr.nnet.workers.precision import autocast, compiled, kept, new_step
from emasr.nnet.workers.stacked_optim import make_stacked_optimizer


def correct_frames(log_probs: torch.Tensor, labels: torch.Tensor,
                   labelled: torch.Tensor | None = None) -> torch.Tensor:
    """Which frames are classified correctly: the label's log-posterior is the frame's highest (a
    tie counts); an unlabelled frame never is. [..., P] and [...] -> bool [...] (`labelled`:
    labels != IGNORE, where the caller has it already). The row maximum and one gather cost a
    fraction of an argmax on a CPU."""
    label_scores = log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (label_scores == log_probs.amax(-1)) & (labels != IGNORE if labelled is None
                                                   else labelled)


def batch_stats(log_probs: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The loss per labelled frame (to differentiate; NaN if none is labelled), and [that loss,
    correct frames, labelled frames] (detached, float, on the model's device: reading them once
    per block instead of per minibatch lets a GPU run ahead of the host; `summed` adds them up).
    The mean comes from nll_loss itself: dividing its sum by the count added two operations to
    the forward and two autograd nodes to the backward of every step (256 frames of 200 pdfs, one
    CPU thread: 106 against 75 us for the loss's forward and backward)."""
    flat, labels = log_probs.reshape(-1, log_probs.shape[-1]), y.reshape(-1)
    loss = F.nll_loss(flat, labels, ignore_index=IGNORE)
    labelled = labels != IGNORE
    # counted on detached log-posteriors: no autograd graph for what the loss does not use
    return loss, torch.stack([loss.detach(), correct_frames(flat.detach(), labels, labelled).sum(),
                              labelled.sum()])


def summed(stats: list[torch.Tensor]) -> list[float]:
    """[loss sum, correct frames, labelled frames] of minibatches' stats ([..., 3] each, as
    batch_stats gives them; read from the device at once): the losses per frame times the
    frames, a minibatch without a labelled frame counting 0 (its NaN mean has no frame to
    weigh). Added on the host, in float64: two tensor operations for any number of them."""
    values = torch.stack(stats).reshape(-1, 3).tolist()
    return [sum(mean * frames for mean, _, frames in values if frames > 0),
            sum(correct for _, correct, _ in values), sum(frames for _, _, frames in values)]


def predict(model, x: torch.Tensor, data_config) -> torch.Tensor:
    """Log-posteriors aligned with the labels, as the model's input mode cuts them: [B, P], or a
    chunk's part [B, C, P]."""
    return INPUT_MODES[model.input_mode].aligned(model(x), data_config)


def new_stream(seed: int, device: torch.device) -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


# the layers StackedWorkers runs batched over K workers: Linear, LayerNorm, the activations
# (elementwise) and Dropout (its masks drawn per worker)
STACKABLE = (nn.Linear, nn.LayerNorm, nn.Dropout, *ACTIVATIONS.values())


def can_stack(model: nn.Module, precision: str = "fp32", compile_mode: str | None = None) -> bool:
    """Whether K copies of `model` can run as one batched computation (StackedWorkers): the DNN
    when each of its layers is STACKABLE (batchnorm updates running statistics of its own in
    every worker, so it runs as a loop); the LSTMP without dropout, in fp32 and eager (its
    layers are emasr.nnet.workers.lstmp's Function, which neither autocast nor torch.compile
    knows)."""
    if isinstance(model, LSTMP):
        return (model.lstm.proj_size > 0 and model.lstm.dropout == 0 and precision == "fp32"
                and compile_mode is None)
    return not INPUT_MODES[model.input_mode].sequence and isinstance(
        getattr(model, "layers", None), nn.Sequential) and \
        all(isinstance(m, STACKABLE) for m in model.layers)


def make_workers(model: nn.Module, make_optimizer, seeds: list[int], device: torch.device,
                 max_grad_norm: float, data_config, precision: str = "fp32",
                 compile_mode: str | None = None):
    """K = len(seeds) workers starting from `model`; seeds are their dropout streams' (for K = 1
    the process's global torch RNG, seeded by the caller, is the worker's stream). Stacked: a
    DNN of K > 1 workers, and an LSTMP on a CPU, one worker too (its Function beats nn.LSTM
    there, bench/roofline.py; a GPU runs nn.LSTM as cuDNN's fused kernels, not measured
    against it)."""
    stack = can_stack(model, precision, compile_mode) and (
        device.type == "cpu" if isinstance(model, LSTMP) else len(seeds) > 1)
    if stack:
        return StackedWorkers(model, make_optimizer, seeds, device, max_grad_norm,
                              precision=precision, compile_mode=compile_mode,
                              data_config=data_config)
    return LoopWorkers(model, make_optimizer, seeds, device, max_grad_norm, data_config,
                       precision=precision, compile_mode=compile_mode)


class LoopWorkers:
    """K modules and optimizers, trained one after the other."""

    def __init__(self, model: nn.Module, make_optimizer, seeds: list[int], device: torch.device,
                 max_grad_norm: float, data_config, precision: str = "fp32",
                 compile_mode: str | None = None) -> None:
        self.models = [model] + [copy.deepcopy(model) for _ in seeds[1:]]
        self.optimizers = [make_optimizer(m.parameters()) for m in self.models]
        self.device, self.max_grad_norm, self.data_config = device, max_grad_norm, data_config
        self.precision, self.compile_mode = precision, compile_mode
        # each model's forward and loss, compiled or not (the modules themselves stay plain, so
        # their state_dicts, copies and evaluation are those of an uncompiled model)
        self.losses = [compiled(self.loss_function(m), compile_mode) for m in self.models]
        # one worker uses the global RNG as a lone process always did; several keep a stream each
        self.streams = None if len(seeds) == 1 else [new_stream(s, device) for s in seeds]

    @property
    def count(self) -> int:
        return len(self.models)

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.optimizers[0]

    @contextlib.contextmanager
    def stream(self, k: int):
        """Run worker k's step on its own dropout stream (nn.Dropout and nn.LSTM's inter-layer
        dropout draw from the device's default generator)."""
        if self.streams is None:
            yield
            return
        default = (torch.cuda.default_generators[self.device.index or 0]
                   if self.device.type == "cuda" else torch.default_generator)
        saved = default.get_state()
        default.set_state(self.streams[k].get_state())
        try:
            yield
        finally:
            self.streams[k].set_state(default.get_state())
            default.set_state(saved)

    def train(self) -> None:
        for model in self.models:
            model.train()

    def loss_function(self, model: nn.Module):
        def loss(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return batch_stats(predict(model, x, self.data_config), y)
        return loss

    def step(self, batches: list[tuple[torch.Tensor, torch.Tensor] | None]) -> torch.Tensor:
        """One minibatch per worker (None: the worker sits the step out); returns [K, 3]: each
        worker's batch_stats (loss per frame, correct frames, labelled frames; zeros for a worker
        that sat out; on the device: nothing here waits for it)."""
        new_step(self.compile_mode)
        # the statistics are outputs of the compiled loss, read once per block: under CUDA
        # graphs the next step's replay overwrites them, so what is returned must be a copy
        # (the stack of several workers' is one already)
        if self.streams is None:   # one worker: no stream to switch to, nothing to stack
            if batches[0] is None:
                return torch.zeros(1, 3, device=self.device)
            return kept(self.step_one(0, *batches[0]).unsqueeze(0), self.compile_mode)
        out = []
        for k, batch in enumerate(batches):
            if batch is None:
                out.append(torch.zeros(3, device=self.device))
                continue
            with self.stream(k):
                out.append(self.step_one(k, *batch))
        return torch.stack(out)

    def step_one(self, k: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Worker k's step on its minibatch (dropout draws from the current stream); [3]."""
        model, optimizer = self.models[k], self.optimizers[k]
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with autocast(self.device, self.precision):
            loss, stats = self.losses[k](x, y)
        loss.backward()
        if self.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.max_grad_norm)
        optimizer.step()
        return stats

    def set_lr(self, lr: float) -> None:
        for optimizer in self.optimizers:
            for group in optimizer.param_groups:
                group["lr"] = lr

    def vectors(self) -> torch.Tensor:
        """[K, V]: the local models as flat vectors (emasr.nnet.workers.flat order)."""
        return torch.stack([model_to_vector(m) for m in self.models])

    def columns(self) -> list[tuple[torch.Tensor, ...]]:
        """Each synchronized tensor's K copies, in emasr.nnet.workers.flat order
        (flat.mean_to_vector)."""
        return list(zip(*[state_tensors(model) for model in self.models]))

    def mean(self, out: torch.Tensor, accumulator: torch.Tensor) -> torch.Tensor:
        """The K models' mean vector, written into `out` (flat.mean_to_vector)."""
        return mean_to_vector(self.columns(), out, accumulator)

    def load_vector(self, vector: torch.Tensor) -> None:
        for model in self.models:
            vector_to_model(vector, model)

    def state(self, k: int) -> dict:
        return {"model": self.models[k].state_dict(),
                "optimizer": self.optimizers[k].state_dict(),
                "stream": None if self.streams is None else self.streams[k].get_state()}

    def load_states(self, states: list[dict]) -> None:
        """Worker k from states[k] (a stream of None: the stream goes on)."""
        for k, state in enumerate(states):
            self.models[k].load_state_dict(state["model"])
            self.optimizers[k].load_state_dict(state["optimizer"])
            if self.streams is not None and state["stream"] is not None:
                self.streams[k].set_state(state["stream"])


def stacked(p: torch.Tensor, k: int, transposed: bool) -> nn.Parameter:
    """K copies of parameter p, [K, ...]. `transposed`: a Linear's weight [out, in], kept as the
    transpose of a [K, in, out] tensor. The forward multiplies by that transpose (x W^T), so
    autograd's batched matmul gives the weight's gradient in the parameter's own layout; in a
    [K, out, in] layout every weight's gradient was copied at every step (13% of a step of 8
    stacked DNNs 8x512 on 2 CPU cores, by torch.profiler)."""
    if transposed:
        return nn.Parameter(p.detach().t().unsqueeze(0).repeat(k, 1, 1).transpose(1, 2))
    return nn.Parameter(p.detach().unsqueeze(0).repeat(k, *[1] * p.dim()))


class StackedWorkers:
    """K DNNs or LSTMPs as stacked parameters [K, ...], trained as one batched computation."""

    def __init__(self, model: nn.Module, make_optimizer, seeds: list[int], device: torch.device,
                 max_grad_norm: float, precision: str = "fp32",
                 compile_mode: str | None = None, data_config=None) -> None:
        k = len(seeds)
        self.template = model
        # an LSTMP's forward (emasr.nnet.workers.lstmp): its shape, and the steps whose
        # outputs train
        self.lstmp = None if not isinstance(model, LSTMP) else {
            "layers": model.lstm.num_layers,
            "start": data_config.left_context + data_config.output_delay,
            "frames": data_config.chunk_frames}
        self.layers = [(f"layers.{i}", layer)
                       for i, layer in enumerate(getattr(model, "layers", []))]
        self.dropouts: list[tuple[float, int]] = []   # (p, width) of each dropout layer
        width = None
        for _, layer in self.layers:
            if isinstance(layer, nn.Linear):
                width = layer.out_features
            if isinstance(layer, nn.Dropout):
                self.dropouts.append((float(layer.p), width))
        self.names = [name for name, _ in model.named_parameters()]
        linear = {f"{name}.weight" for name, m in model.named_modules()
                  if isinstance(m, nn.Linear)}
        self.params = {name: stacked(p, k, transposed=name in linear)
                       for name, p in model.named_parameters()}
        # K optimizers in the layout the optimizer's state needs (emasr.nnet.workers.stacked_optim)
        self.optimizer = make_stacked_optimizer(
            make_optimizer, [self.params[n] for n in self.names], device)
        self.streams = [new_stream(s, device) for s in seeds]
        self.device, self.max_grad_norm, self.precision = device, max_grad_norm, precision
        self.compile_mode = compile_mode
        self.batched = compiled(self.forward, compile_mode)

    @property
    def count(self) -> int:
        return len(self.streams)

    def labels(self, y: torch.Tensor) -> torch.Tensor:
        """Labels [K, rows] in the order of forward's rows (a DNN's are its frames')."""
        return y if self.lstmp is None else lstmp.labels_of(y)

    def forward(self, params: dict, x: torch.Tensor, masks: tuple) -> torch.Tensor:
        """The K DNNs on [K, rows, D] inputs -> [K, rows, P] log-posteriors, layer by layer as
        DNN.forward: a Linear is one batched matmul with its bias (baddbmm), a LayerNorm one
        normalization and one multiply-add, a dropout one multiply by its masks. Under bf16
        autocast the matmuls run in bf16 as one worker's nn.Linear do (a LayerNorm's scale and
        shift, applied after the normalization, run in fp32 where CPU autocast keeps
        nn.LayerNorm in bf16; on a GPU autocast runs layer norms in fp32 anyway). Written out
        rather than torch.func.vmap over functional_call: vmap's rule for linear is a matmul, a
        bias scaling and an add (two kernels more per layer forward, one backward), and its
        batching machinery costs the host more per step than the operations themselves for a
        small DNN (bench/train.py (i) counts the operations). K LSTMPs: emasr.nnet.workers.lstmp."""
        if self.lstmp is not None:
            return lstmp.forward(params, x, **self.lstmp)
        masks = iter(masks)
        for name, layer in self.layers:
            if isinstance(layer, nn.Linear):
                weight = params[name + ".weight"].transpose(1, 2)
                x = (torch.baddbmm(params[name + ".bias"].unsqueeze(1), x, weight)
                     if layer.bias is not None else torch.bmm(x, weight))
            elif isinstance(layer, nn.LayerNorm):
                x = F.layer_norm(x, layer.normalized_shape, eps=layer.eps)
                if layer.weight is not None and layer.bias is not None:
                    x = torch.addcmul(params[name + ".bias"].unsqueeze(1), x,
                                      params[name + ".weight"].unsqueeze(1))
                elif layer.weight is not None:
                    x = x * params[name + ".weight"].unsqueeze(1)
            elif isinstance(layer, nn.Dropout):
                x = x * next(masks)
            else:   # an elementwise activation
                x = layer(x)
        return torch.log_softmax(x.float(), dim=-1)

    def train(self) -> None:
        pass   # the masks are drawn by the step; nothing else depends on the mode

    def masks(self, sizes: list[int], rows: int) -> tuple:
        """[K, rows, width] per dropout layer: worker k's masks drawn in layer order from its
        stream as nn.Dropout draws them (bernoulli(1 - p) / (1 - p)), padded with zeros. Each is
        drawn into its rows of the stacked mask, which is scaled once: K + 1 kernels a layer (one
        more to zero the padding), where drawing, scaling and copying each worker's mask apart
        took 3K + 1. A worker that sits the step out (size 0) draws nothing."""
        make = torch.zeros if min(sizes) < rows else torch.empty
        out = []
        for p, width in self.dropouts:
            stacked = make(self.count, rows, width, device=self.device)
            for k, (stream, size) in enumerate(zip(self.streams, sizes)):
                if size:
                    stacked[k, :size].bernoulli_(1 - p, generator=stream)
            out.append(stacked.div_(1 - p))
        return tuple(out)

    def stack(self, batches: list[tuple[torch.Tensor, torch.Tensor] | None], rows: int):
        """[K, rows, D] inputs and [K, rows] labels on the device, short minibatches padded (as
        they are where one gather made them: emasr.nnet.data.resident.StepBatches), a missing one
        (None) all padding."""
        stacked = getattr(batches, "stacked", None)
        if stacked is not None:
            return tuple(t.to(self.device, non_blocking=True) for t in stacked)
        present = [batch for batch in batches if batch is not None]
        if len(present) == self.count and all(len(y) == rows for _, y in present):
            return (torch.stack([x.to(self.device, non_blocking=True) for x, _ in batches]),
                    torch.stack([y.to(self.device, non_blocking=True) for _, y in batches]))
        x = torch.zeros(self.count, rows, *present[0][0].shape[1:], device=self.device)
        y = torch.full((self.count, rows, *present[0][1].shape[1:]), IGNORE, dtype=torch.long,
                       device=self.device)
        for k, batch in enumerate(batches):
            if batch is None:
                continue
            xk, yk = batch
            x[k, :len(yk)] = xk.to(self.device, non_blocking=True)
            y[k, :len(yk)] = yk.to(self.device, non_blocking=True)
        return x, y

    def step(self, batches: list[tuple[torch.Tensor, torch.Tensor] | None]) -> torch.Tensor:
        """One minibatch per worker (a short one, at an epoch's end, padded with unlabelled
        frames or chunks: each row of a DNN and each chunk of an LSTMP is computed on its own;
        None: the worker sits the step out, its parameters and optimizer state untouched);
        returns [K, 3] as LoopWorkers.step."""
        new_step(self.compile_mode)
        sizes = [0 if batch is None else len(batch[1]) for batch in batches]
        rows = max(sizes)
        x, y = self.stack(batches, rows)
        y = self.labels(y)
        labelled = y != IGNORE
        counts = labelled.sum(1)
        self.optimizer.zero_grad()
        masks = self.masks(sizes, rows)
        with autocast(self.device, self.precision):
            log_probs = self.batched(self.params, x, masks)
            flat = log_probs.reshape(-1, log_probs.shape[-1]).float()
            losses = F.nll_loss(flat, y.reshape(-1), ignore_index=IGNORE,
                                reduction="none").view(self.count, -1).sum(1)
            means = losses / counts.clamp(min=1.0)
        correct = correct_frames(log_probs.detach(), y, labelled).sum(1)
        # worker k's loss depends on its slice of the parameters only: one backward gives each
        # its own gradient
        means.sum().backward()
        if self.max_grad_norm > 0:
            self.clip_gradients()
        self.optimizer.step([k for k, size in enumerate(sizes) if size == 0])
        return torch.stack([means.detach(), correct, counts], dim=1)   # float, as means

    @torch.no_grad()
    def clip_gradients(self) -> None:
        """torch.nn.utils.clip_grad_norm_ for each worker: its total norm over its own slices."""
        grads = [self.params[n].grad for n in self.names]
        norms = torch.stack([torch.linalg.vector_norm(g.reshape(self.count, -1), dim=1)
                             for g in grads], dim=1)
        total = torch.linalg.vector_norm(norms, dim=1)
        scale = torch.clamp(self.max_grad_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *[1] * (g.dim() - 1)))

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def vectors(self) -> torch.Tensor:
        return torch.cat([self.params[n].detach().reshape(self.count, -1) for n in self.names],
                         dim=1)

    def columns(self) -> list[tuple[torch.Tensor, ...]]:
        # one unbind per parameter: K views of its rows without K indexing operations each
        return [self.params[n].detach().reshape(self.count, -1).unbind(0) for n in self.names]

    def mean(self, out: torch.Tensor, accumulator: torch.Tensor) -> torch.Tensor:
        """The K models' mean vector, written into `out`. On a GPU, by one float64 reduction per
        stacked parameter (mean_by_rows): flat.mean_to_vector's K float32-into-float64
        multi-tensor adds would take PyTorch's one-kernel-per-tensor path there, K x tensors
        launches per sync. On a CPU model by model (flat.mean_to_vector), where the float64
        reduction over the K rows is several times slower. Both give the same bits."""
        if out.device.type == "cuda" and self.count > 1:
            return self.mean_by_rows(out, accumulator)
        return mean_to_vector(self.columns(), out, accumulator)

    @torch.no_grad()
    def mean_by_rows(self, out: torch.Tensor, accumulator: torch.Tensor) -> torch.Tensor:
        """mean(), each stacked parameter's K rows summed in float64 by one reduction into its
        part of `accumulator`, then rounded once: one operation per parameter whatever K."""
        sizes = [self.params[name][0].numel() for name in self.names]
        check_mean_size(sum(sizes), out)
        for name, part in zip(self.names, accumulator.split(sizes)):
            torch.sum(self.params[name].detach().reshape(self.count, -1), 0, dtype=torch.float64,
                      out=part)
        return out.copy_(accumulator.div_(self.count))

    @torch.no_grad()
    def load_vector(self, vector: torch.Tensor) -> None:
        offset = 0
        for name in self.names:
            p = self.params[name]
            size = p[0].numel()
            p.copy_(vector[offset:offset + size].view_as(p[0]).unsqueeze(0).expand_as(p))
            offset += size
        if offset != vector.numel():
            raise ValueError(f"vector has {vector.numel()} values, the model {offset}")

    def state(self, k: int) -> dict:
        """Worker k's state in a real worker's layout (its module and optimizer state_dicts)."""
        model = {name: (self.params[name][k].detach().clone(memory_format=torch.contiguous_format)
                        if name in self.params else value.clone())
                 for name, value in self.template.state_dict().items()}
        return {"model": model, "optimizer": self.optimizer.state(k),
                "stream": self.streams[k].get_state()}

    @torch.no_grad()
    def load_states(self, states: list[dict]) -> None:
        for name in self.names:
            self.params[name].copy_(torch.stack([s["model"][name] for s in states]))
        self.optimizer.load([s["optimizer"] for s in states])
        for stream, state in zip(self.streams, states):
            if state["stream"] is not None:
                stream.set_state(state["stream"])


__all__ = ["LoopWorkers", "StackedWorkers", "batch_stats", "can_stack", "correct_frames",
           "make_workers", "predict", "summed"]
