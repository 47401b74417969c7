#!/usr/bin/env python
"""Training speed checks, each a ratio against a reference measured in the same run:

(a) the trainer's frames/s against a minimal hand-written PyTorch loop (same model, same data
    already in memory, same minibatch size and optimizer); target >= 90%;
(b) one EMA update against one training block; target < 1%; and each registered averaged model's
    update and sync rule's step (BMUF's at 8 workers), alone on the model's vector, against one
    block;
(c) one sync (flatten + all-reduce + rule + unflatten) against one block, from a 2-worker run;
(d) speed-up against the number of workers (--workers 1,2,4,8): total training frames/s of N
    workers over 1 worker, the same data (one epoch) split among them, --threads per worker.
(e) virtual workers (--virtual K): K BMUF workers in one process (dist.workers_per_process=K,
    one batched computation, min(K x --threads, cores) threads) against K worker processes and
    against 1 worker, the same frames (one epoch per run, alternated for --repeats rounds).
(f) how K workers compute in one process (--batching K): one minibatch step of K DNNs stacked
    (batched matmuls, emasr.nnet.workers.StackedWorkers) against a loop over K (LoopWorkers) and
    one worker; for the LSTMP (1x256, proj 128, 32 chunks of 32 frames), where vmap has no batching
    rule for nn.LSTM, a hand-written LSTMP cell under vmap against a loop over K nn.LSTMs.
(g) the resident data path (--resident): the trainer with data.loader=resident (the shard in one
    tensor on the device, minibatches by index gathers; --resident-dtype; --resident-part-frames N:
    in parts of N frames, each loaded while the one before it trains) against the trainer with
    the stream loader (a) and against the hand-written loop, alternated in the same run as (a);
    with --resident the workers of (d), (e) and (h) read through it too.
(h) virtual workers against K (--virtual-sweep 1,2,4,8): one process of K workers, frames/s
    against K x one worker's, and TFLOP/s done (6 x parameters per frame).
(i) host work against K (--host-operations 1,8,32): tensor operations per training step of one
    process of K virtual workers with the resident loader (data, step, sync), and of them those
    that compute (not views or allocations), each a kernel launch on a GPU.

--precision bf16 and --tf32 apply to the trainers and the hand-written loop alike (train.precision,
train.tf32; the loop under the same autocast). --compile MODE compiles the trainers' and workers'
steps (train.compile in train.compile_mode; reduce-overhead replays CUDA graphs), not the
hand-written loop's; the first epoch compiles, which (h) does not time (its second epoch) and (a)
and (g) take as one of their rounds (use --repeats 2 or more; their ratios are over the best).

--device cuda runs all of it on the GPU (the hand-written loop too, its data already there); with
more workers than GPUs the workers share them through gloo (dist.device, dist.backend).

Usage: python bench/train.py [--workers 1,2] [--virtual 8] [--virtual-sweep 1,2,4,8] [--resident]
                           [--host-operations 1,8,32]
                           [--utts 64] [--hidden 256] [--layers 4] [--tau 4] [--device cpu|cuda]
                           [--precision fp32|bf16] [--tf32] [--compile default|reduce-overhead]
                           [--json speedup.json]
                           (--json for `emasr report --bench`)
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from nnet_synthetic import make_corpus, write_targets  # noqa: E402

from emasr.nnet import config as configs  # noqa: E402
from emasr.nnet.averages import build_averagers  # noqa: E402
from emasr.nnet.workers.flat import model_to_vector  # noqa: E402
from emasr.nnet.models import build_model  # noqa: E402
from emasr.nnet.workers.precision import COMPILE_MODES, PRECISIONS, autocast  # noqa: E402
from emasr.nnet.data.resident import RESIDENT_DTYPES  # noqa: E402
from emasr.nnet.sync import RULES, make_rule  # noqa: E402
from emasr.nnet.trainer import Trainer  # noqa: E402


def make_data(root: str, utts: int, dim: int, pdfs: int):
    labels = make_corpus(root, "train", speakers=max(1, utts // 8), utts_per_speaker=8, dim=dim,
                         num_pdfs=pdfs, min_frames=300, max_frames=600)
    labels.update(make_corpus(root, "dev", 1, 4, dim=dim, num_pdfs=pdfs, seed=5))
    return (write_targets(root, labels, num_pdfs=pdfs), os.path.join(root, "train"),
            os.path.join(root, "dev"))


def overrides(args) -> list[str]:
    return [f"model.hidden_layers={args.layers}", f"model.hidden_dim={args.hidden}",
            "features.splice=2", f"data.minibatch_frames={args.batch}",
            "data.shuffle_buffer_frames=2048", f"sync.block_size={args.tau}", "train.epochs=1",
            "train.schedule=constant", "train.lr=0.02", "sync.strategy=single",
            f"dist.device={args.device}", f"train.precision={args.precision}",
            f"train.tf32={'true' if args.tf32 else 'false'}",
            f"train.compile={'true' if args.compile else 'false'}",
            f"train.compile_mode={args.compile or 'default'}"]


def resident_overrides(args) -> list[str]:
    return [*overrides(args), "data.loader=resident", f"data.resident_dtype={args.resident_dtype}",
            f"data.resident_part_frames={args.resident_part_frames}"]


def worker_overrides(args) -> list[str]:
    """(d), (e) and (h): their workers read through the resident data path under --resident."""
    return resident_overrides(args) if args.resident else overrides(args)


def make_trainer(problem, exp, args, options=None) -> Trainer:
    trainer = Trainer(configs.resolve(None, overrides(args) if options is None else options),
                      *problem, exp)
    trainer.setup()
    os.makedirs(exp, exist_ok=True)
    return trainer


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":   # GPU work is asynchronous: wait for it before reading the clock
        torch.cuda.synchronize(device)


def trainer_fps(trainer: Trainer, epoch: int) -> float:
    """Frames/s of one epoch of the trainer's own loop (data streaming, blocks, syncs). A shard
    in parts loads the next epoch's first part from its last part on; that load is waited for
    and timed here, as if no dev evaluation hid it (and so that it does not run into the
    measurement after this one)."""
    frames_before = trainer.counters["frames"]
    start = time.perf_counter()
    trainer.run_epoch(epoch, 0)
    for data in trainer.shards:
        if getattr(data, "ahead", None) is not None:
            data.ahead[1].result()
    synchronize(trainer.device)
    return (trainer.counters["frames"] - frames_before) / (time.perf_counter() - start)


def hand_loop(trainer: Trainer, args) -> float:
    """Frames/s of a bare loop over the same frames (loaded into memory first, not timed)."""
    feats, labels = [], []
    for _, x, y in trainer.train_source.utterances(trainer.shards[0].utts):
        feats.append(x)
        labels.append(y)
    device = trainer.device
    x_all = torch.from_numpy(np.concatenate(feats)).to(device)
    y_all = torch.from_numpy(np.concatenate(labels)).to(device)
    torch.manual_seed(1)
    model = build_model(trainer.config.model, trainer.input_dim, trainer.num_pdfs).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    order = torch.randperm(len(y_all), device=device)
    frames = int(trainer.counters["frames"] / trainer.counters["syncs"]) * trainer.counters["syncs"]
    frames = min(frames, len(order))   # about the frames one trainer epoch trains
    start = time.perf_counter()
    for i in range(0, frames, args.batch):
        take = order[i:i + args.batch]
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, args.precision):
            loss = F.nll_loss(model(x_all[take]), y_all[take])
        loss.backward()
        optimizer.step()
    synchronize(device)
    return frames / (time.perf_counter() - start)


def paired(ours: list[float], loop: list[float]) -> str:
    """The median and range of the per-round ratios: each round runs both back to back, so a
    slow spell of a shared machine (runs here vary by +-10%) hits both sides of a ratio alike,
    where the ratio of the two bests may pair a lucky round of one with an unlucky one of the
    other."""
    ratios = [100 * a / b for a, b in zip(ours, loop)]
    return (f"per round: median {np.median(ratios):.1f}% "
            f"[{min(ratios):.1f}, {max(ratios):.1f}] over {len(ratios)} rounds")


def seconds_per_call(call, device: torch.device, reps: int = 200) -> float:
    call()   # the first call may allocate what the others reuse
    start = time.perf_counter()
    for _ in range(reps):
        call()
    synchronize(device)
    return (time.perf_counter() - start) / reps


def averager_costs(trainer: Trainer) -> dict[str, float]:
    """Seconds per sync of each registered averaged model's update on this model's vector."""
    vector = model_to_vector(trainer.model)
    config = configs.resolve(None, ["average.ema_decay=0.99", "average.cumulative_start=0.0",
                                    "average.last_k=2"])
    averagers = build_averagers(config, 1)
    return {name: seconds_per_call(lambda a=averager: a.update(vector), vector.device)
            for name, averager in averagers.items()}


def rule_costs(trainer: Trainer) -> dict[str, float]:
    """Seconds per step of each registered sync rule on this model's vector (as after an
    all-reduce: the rule alone, in the process, no communication)."""
    vector = model_to_vector(trainer.model)
    average = vector + 1e-3
    costs = {}
    for strategy, registered in RULES.items():
        config = configs.resolve(None, [f"sync.strategy={strategy}"])
        rule = make_rule(config.sync, 8 if registered.parallel else 1)
        rule.start(vector)
        costs[strategy] = seconds_per_call(lambda r=rule: r.step(average), vector.device)
    return costs


def against_block(costs: dict[str, float], block: float) -> str:
    """'name ms (share of a block)' for each timed piece."""
    return ", ".join(f"{name} {1e3 * seconds:.3f} ms ({100 * seconds / block:.2f}%)"
                     for name, seconds in costs.items())


def run_workers(problem, exp, processes: int, args, strategy: str, per_process: int = 1,
                threads: int | None = None, epochs: int = 1) -> dict:
    """The last epoch's record of a torchrun training (its totals count every epoch)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
           str(processes), "--module", "emasr.cli", "train",
           *sum((["--set", o] for o in worker_overrides(args)), []), "--strategy", strategy,
           "--set", f"dist.workers_per_process={per_process}", "--set", f"train.epochs={epochs}",
           *problem, exp]
    env = dict(os.environ, EMASR_NUM_THREADS=str(threads or args.threads))
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{processes} x {per_process} workers failed:\n{result.stderr[-3000:]}")
    with open(os.path.join(exp, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if '"epoch"' in line and '"type": "epoch"' in line][-1]


def best_seconds(step, repeats: int = 3, calls: int = 3) -> float:
    step()   # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            step()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def lstmp_cell(params: dict, x: torch.Tensor) -> torch.Tensor:
    """One LSTMP layer written out step by step (what vmap can batch, unlike nn.LSTM)."""
    batch, proj = x.shape[0], params["w_hr"].shape[0]
    h = x.new_zeros(batch, proj)
    c = x.new_zeros(batch, params["w_hr"].shape[1])
    gates_x = x @ params["w_ih"].T + params["b"]
    outs = []
    for t in range(x.shape[1]):
        i, f, g, o = (gates_x[:, t] + h @ params["w_hh"].T).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = (torch.sigmoid(o) * torch.tanh(c)) @ params["w_hr"].T
        outs.append(h)
    return torch.stack(outs, 1)


def batching(args, input_dim: int) -> None:
    """(f): seconds per step of K workers, batched against a loop, on this process's threads."""
    from torch.func import vmap

    from emasr.nnet.workers import LoopWorkers, StackedWorkers

    k, device = args.batching, torch.device(args.device)
    c = configs.resolve(None, overrides(args))
    model = build_model(c.model, input_dim, args.pdfs).to(device)
    batches = [(torch.randn(args.batch, input_dim, device=device),
                torch.randint(0, args.pdfs, (args.batch,), device=device)) for _ in range(k)]

    def sgd(params):
        return torch.optim.SGD(params, lr=0.01, momentum=0.9)

    stacked = StackedWorkers(model, sgd, list(range(k)), device, 0.0)
    loop = LoopWorkers(model, sgd, list(range(k)), device, 0.0, c.data)
    one = LoopWorkers(model, sgd, [0], device, 0.0, c.data)
    times = [best_seconds(lambda w=w, b=b: (w.step(b), synchronize(device)))
             for w, b in ((stacked, batches), (loop, batches), (one, batches[:1]))]
    print(f"(f) DNN {args.layers}x{args.hidden}, {k} workers, one step: stacked "
          f"{1e3 * times[0]:.1f} ms, loop {1e3 * times[1]:.1f} ms, one worker "
          f"{1e3 * times[2]:.1f} ms")
    hidden, proj, chunks, frames = 256, 128, 32, 32
    x = torch.randn(k, chunks, frames, input_dim // 5, device=device)
    params = {"w_ih": torch.randn(k, 4 * hidden, x.shape[-1]),
              "w_hh": torch.randn(k, 4 * hidden, proj),
              "b": torch.zeros(k, 4 * hidden), "w_hr": torch.randn(k, proj, hidden)}
    params = {n: (0.05 * p).to(device).requires_grad_() for n, p in params.items()}
    lstms = [torch.nn.LSTM(x.shape[-1], hidden, batch_first=True, proj_size=proj).to(device)
             for _ in range(k)]
    times = [best_seconds(lambda: (vmap(lstmp_cell)(params, x).sum().backward(),
                                   synchronize(device)), calls=1),
             best_seconds(lambda: ([m(x[0])[0].sum().backward() for m in lstms],
                                   synchronize(device)), calls=1),
             best_seconds(lambda: (lstms[0](x[0])[0].sum().backward(), synchronize(device)),
                          calls=1)]
    print(f"    LSTMP 1x{hidden} proj {proj}, {chunks} chunks of {frames}: hand-written cell under "
          f"vmap {1e3 * times[0]:.0f} ms, loop over nn.LSTM {1e3 * times[1]:.0f} ms, one "
          f"{1e3 * times[2]:.0f} ms (forward and backward)")


def virtual_workers(problem, root: str, args) -> None:
    """(e): K workers batched in one process against K processes and 1 worker, one epoch each,
    the configurations alternated for --repeats rounds (one epoch of one configuration varies by
    tens of percent on a shared machine; a round's ratios pair runs made side by side)."""
    k = args.virtual
    threads = min(k * args.threads, os.cpu_count() or 1)
    runs = {"virtual": (1, "bmuf", k, threads), "processes": (k, "bmuf", 1, args.threads),
            "one": (1, "single", 1, args.threads)}
    if threads != args.threads:   # one worker given the cores the virtual workers had
        runs["one_as_many_threads"] = (1, "single", 1, threads)
    fps = {name: [] for name in runs}
    for round_ in range(args.repeats):
        for name, (processes, strategy, per_process, n_threads) in runs.items():
            r = run_workers(problem, os.path.join(root, f"exp_e{round_}_{name}"), processes, args,
                            strategy, per_process=per_process, threads=n_threads)
            fps[name].append(r["frames"] / r["seconds_train"])
    against = [("processes", f"{k} processes ({args.threads} thread(s) each)"),
               ("one", f"1 worker ({args.threads} thread(s))")]
    if "one_as_many_threads" in fps:
        against.append(("one_as_many_threads", f"1 worker ({threads} threads)"))
    print(f"(e) {k} virtual workers in 1 process ({threads} threads), best "
          f"{max(fps['virtual']):.0f} frames/s (one epoch per run)")
    for name, label in against:
        print(f"    against {label}, best {max(fps[name]):.0f}: "
              f"{max(fps['virtual']) / max(fps[name]):.2f}x; {paired(fps['virtual'], fps[name])}")


def virtual_sweep(problem, root: str, args, parameters: int) -> None:
    """(h): one process of K virtual workers (BMUF; K = 1: one worker) for each K of
    --virtual-sweep, two epochs each, frames/s of the second (the first loads a resident shard),
    against K x one worker's, and the arithmetic done: a DNN's training frame costs about
    6 x parameters FLOP (forward 2, backward 4: gradients of inputs and weights)."""
    print("(h)       K  frames/s  vs K x one worker  TFLOP/s (6 x parameters per frame)")
    one = None
    for k in [int(k) for k in args.virtual_sweep.split(",")]:
        exp = os.path.join(root, f"exp_sweep_{k}")
        last = run_workers(problem, exp, 1, args, "single" if k == 1 else "bmuf", per_process=k,
                           epochs=2)
        with open(os.path.join(exp, "metrics.jsonl")) as f:
            first = [json.loads(line) for line in f if '"type": "epoch"' in line][0]
        fps = (last["frames"] - first["frames"]) / (last["seconds_train"] - first["seconds_train"])
        one = one or fps / k
        tflops = 6 * parameters * fps / 1e12
        print(f"    {k:7d}  {fps:8.0f}  {fps / (k * one):17.2f}  {tflops:7.3f}")


# operations that are not views but compute nothing: no kernel on a GPU either
NO_KERNEL = {"_unsafe_view", "empty", "empty_like", "empty_strided", "new_empty",
             "new_empty_strided", "resize_", "lift_fresh"}


def launches_kernel(func) -> bool:
    """Whether an operation computes (a kernel launch on a GPU): not a view (view, transpose,
    detach, expand, ...), an allocation or a profiler mark."""
    return not (func.is_view or func.namespace == "profiler"
                or func.name().split("::")[-1].split(".")[0] in NO_KERNEL)


class OperationCount(TorchDispatchMode):
    """Counts the tensor operations dispatched to a device (after autograd, so the backward's
    too), each charged to the part of the trainer that is running (`part`): all of them
    (`counts`, host work per operation) and those that compute (`kernels`)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter = collections.Counter()
        self.kernels: collections.Counter = collections.Counter()
        self.part = "other"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[self.part] += 1
        self.kernels[self.part] += launches_kernel(func)
        return func(*args, **(kwargs or {}))

    def charge(self, obj, method: str, part: str) -> None:
        """Charge the operations of obj.method to `part` (the instance's method, wrapped)."""
        call = getattr(obj, method)

        def charged(*a, **k):
            outer, self.part = self.part, part
            try:
                return call(*a, **k)
            finally:
                self.part = outer
        setattr(obj, method, charged)


def host_operations(root: str, args) -> None:
    """(i): tensor operations per training step of one process of K virtual workers (BMUF, the
    resident loader), by part, over the second epoch, and of them those that compute: each of
    those is a kernel launch on a GPU, where launches rather than arithmetic bound small steps,
    and every operation (views too) costs the host a dispatch. The counts say how the host's
    work grows with K on any machine. Each worker gets 24 utterances (about 14 minibatches an
    epoch; the steps of its full blocks are counted)."""
    print("(i)       K  per step: data  step  sync  other  (tensor operations dispatched; "
          "in brackets those that compute, each a kernel launch on a GPU)")
    for k in [int(k) for k in args.host_operations.split(",")]:
        problem = make_data(os.path.join(root, f"ops_{k}"), 24 * k, args.dim, args.pdfs)
        options = [*resident_overrides(args), f"dist.workers_per_process={k}",
                   f"sync.strategy={'single' if k == 1 else 'bmuf'}"]
        trainer = make_trainer(problem, os.path.join(root, f"exp_ops_{k}"), args, options)
        trainer.run_epoch(0, 0)   # loads the shards
        count = OperationCount()
        for data in [*trainer.shards, *([trainer.group.joint] if trainer.group else [])]:
            count.charge(data, "examples_of", "data")
        count.charge(trainer.local, "step", "step")
        count.charge(trainer, "sync", "sync")
        syncs = trainer.counters["syncs"]
        with count:
            trainer.run_epoch(1, 0)
        steps = (trainer.counters["syncs"] - syncs) * args.tau
        parts = [f"{count.counts[part] / steps:4.0f} [{count.kernels[part] / steps:3.0f}]"
                 for part in ("data", "step", "sync", "other")]
        print(f"    {k:7d}  {'  '.join(parts)}   ({steps} steps)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--workers", default="1,2",
                        help="worker counts for the speed-up curve ('': none, no (c) or (d))")
    parser.add_argument("--virtual", type=int, default=0,
                        help="(e): K virtual workers in one process against K processes and 1")
    parser.add_argument("--virtual-sweep", default="",
                        help="(h): K virtual workers in one process for each K, e.g. 1,2,4,8")
    parser.add_argument("--host-operations", default="",
                        help="(i): K list, e.g. 1,8,32: tensor operations per step of K workers")
    parser.add_argument("--batching", type=int, default=0,
                        help="(f): one step of K workers batched (vmap) against a loop")
    parser.add_argument("--utts", type=int, default=128)
    parser.add_argument("--dim", type=int, default=40)
    parser.add_argument("--pdfs", type=int, default=200)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--tau", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=7,
                        help="rounds of (a) and (g), alternated; best and per-round ratios")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the trainer, the hand-written loop and the workers run")
    parser.add_argument("--resident", action="store_true",
                        help="(g): the trainer with the resident loader against (a)'s two")
    parser.add_argument("--resident-dtype", choices=RESIDENT_DTYPES, default="float32",
                        help="(g): data.resident_dtype")
    parser.add_argument("--resident-part-frames", type=int, default=0,
                        help="(g): data.resident_part_frames (0: the whole shard held)")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="train.precision of the trainers and the hand-written loop")
    parser.add_argument("--tf32", action="store_true", help="train.tf32 (CUDA)")
    parser.add_argument("--compile", choices=("", *COMPILE_MODES), default="",
                        help="train.compile_mode of the trainers and workers ('': eager)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per worker (and for (a)); 1 keeps workers independent")
    parser.add_argument("--json", default=None,
                        help="also write (d) here as [{workers, frames_per_second}] for "
                             "`emasr report --bench`")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="bench_train.") as root:
        problem = make_data(root, args.utts, args.dim, args.pdfs)
        trainer = make_trainer(problem, os.path.join(root, "exp_a"), args)
        if args.resident:
            resident = make_trainer(problem, os.path.join(root, "exp_g"), args,
                                    resident_overrides(args))
            start = time.perf_counter()
            resident.shards[0].load()   # once per run (timed apart from the epochs)
            synchronize(resident.device)
            load_seconds = time.perf_counter() - start
        # alternate them and keep each one's best, so load from other processes hits all
        ours, loop, gathered = [], [], []
        for round_ in range(args.repeats):   # each round the next epoch (its own order)
            ours.append(trainer_fps(trainer, round_))
            loop.append(hand_loop(trainer, args))
            if args.resident:
                gathered.append(trainer_fps(resident, round_))
        name = torch.cuda.get_device_name(trainer.device) if args.device == "cuda" else None
        print(f"device: {trainer.device}" + (f" ({name})" if name else ""))
        print(f"model: DNN {args.layers}x{args.hidden}, input {trainer.input_dim}, "
              f"{trainer.num_pdfs} pdfs, {model_to_vector(trainer.model).numel()} parameters; "
              f"{int(trainer.counters['frames'] / args.repeats)} frames per epoch, minibatch "
              f"{args.batch}, tau {args.tau}, {torch.get_num_threads()} threads, {args.repeats} "
              f"alternated rounds")
        print(f"(a) trainer {max(ours):.0f} frames/s, hand-written loop {max(loop):.0f} frames/s: "
              f"{100 * max(ours) / max(loop):.1f}% (target >= 90%); {paired(ours, loop)}")
        if args.resident:
            store = resident.shards[0]
            held = (f"in parts of at most {args.resident_part_frames} frames, each loaded while "
                    "the one before it trains" if args.resident_part_frames else
                    f"{store.dtype}, on {store.store}; loaded in {load_seconds:.2f} s")
            print(f"(g) resident trainer ({held}) {max(gathered):.0f} frames/s: "
                  f"{max(gathered) / max(ours):.2f}x the stream trainer, "
                  f"{100 * max(gathered) / max(loop):.1f}% of the hand-written loop; "
                  f"{paired(gathered, loop)}")
        block = trainer.counters["seconds_compute"] / trainer.counters["syncs"]
        averaging = averager_costs(trainer)
        ema = averaging["ema"]
        print(f"(b) EMA update {1e3 * ema:.3f} ms, training block {1e3 * block:.1f} ms: "
              f"{100 * ema / block:.3f}% (target < 1%)")
        print(f"    averaged models' update per sync: {against_block(averaging, block)}")
        print("    sync rule step (8 workers' rules, no all-reduce): "
              f"{against_block(rule_costs(trainer), block)}")
        results = {}
        for n in [int(w) for w in args.workers.split(",") if w]:
            strategy = "single" if n == 1 else "bmuf"
            results[n] = run_workers(problem, os.path.join(root, f"exp_{n}"), n, args, strategy)
        if 2 in results:
            r = results[2]
            print(f"(c) 2 workers: sync (all-reduce) {1e3 * r['seconds_comm'] / r['syncs']:.2f} ms, "
                  f"block {1e3 * r['seconds_compute'] / r['syncs']:.1f} ms: "
                  f"{100 * r['seconds_comm'] / r['seconds_compute']:.1f}%; "
                  f"{r['bytes_reduced'] / r['syncs'] / 1e6:.2f} MB per sync per worker")
        curve = [{"workers": n, "frames_per_second": r["frames"] / r["seconds_train"]}
                 for n, r in results.items()]
        if curve:
            base = min(curve, key=lambda point: point["workers"])["frames_per_second"]
            print("(d) workers  frames/s  speed-up  (all workers together, one epoch)")
            for point in curve:
                fps = point["frames_per_second"]
                print(f"    {point['workers']:7d}  {fps:8.0f}  {fps / base:8.2f}")
        if args.virtual:
            virtual_workers(problem, root, args)
        if args.virtual_sweep:
            virtual_sweep(problem, root, args, model_to_vector(trainer.model).numel())
        if args.batching:
            batching(args, trainer.input_dim)
        if args.host_operations:
            host_operations(root, args)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(curve, f, indent=1)


if __name__ == "__main__":
    main()
