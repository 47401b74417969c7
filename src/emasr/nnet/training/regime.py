"""The regime a training runs in: how much data a sync covers, how many syncs a run gets, and
whether the data are enough for BMUF with these settings.

BMUF's authors (Chen and Huo 2016; CNTK's documentation of its block momentum) tie block momentum
eta to the data: the momentum filter's time constant is -(frames per sync) / ln(eta) frames, about
N x (frames per sync) at eta = 1 - 1/N, and the unique training data should hold at least that
time constant times N (about frames-per-sync x N^2). Below it BMUF-N falls behind one worker, and
a comparison of the EMA against BMUF says nothing about the regime the paper assumed. Every
training writes `regime.json` into its exp dir (the report reads it), and `emasr regime` (which
steps/nnet/train.sh runs before it starts the workers) prints the same numbers from the targets'
lengths alone, with the warning line when the rule is broken, before any training.

Each EMA's decay per sync and half-life in syncs and epochs are here too: at N = 8 a half-life of
a fixed number of frames is a few syncs.

Every worker trains every minibatch of its shard each epoch (the last block of an epoch is as
long as the longest shard's remainder: emasr.nnet.trainer.blocks), so an epoch trains all its
frames at any number of workers: `frames_trained_per_epoch` is the data's frames and `frames_trained_total`
adds up the run's epochs, a warm start's (emasr.nnet.training.warm_start; `init_model`)
included, which is
what compares one run's data with another's.
"""
from __future__ import annotations

import json
import math
import os

from emasr.io.atomic import atomic_write
from emasr.nnet.averages import build_averagers, ema_decays
from emasr.nnet.data import shard
from emasr.nnet.sync import regime_settings

REGIME_FILE = "regime.json"


def data_rule(eta: float | None, frames_per_sync: int, workers: int,
              frames_per_epoch: int) -> dict:
    """BMUF's filter time constant (frames) and the data it asks for (time constant x N)."""
    if eta is None or eta <= 0.0:
        return {"time_constant_frames": None, "data_rule_frames": None, "data_rule_met": None}
    time_constant = -frames_per_sync / math.log(eta)
    needed = time_constant * workers
    return {"time_constant_frames": time_constant, "data_rule_frames": needed,
            "data_rule_met": frames_per_epoch >= needed}


def ema_regime(name: str, decay: float, frames_per_sync: int, frames_per_epoch: int) -> dict:
    """An EMA's decay per sync and its half-life in frames, syncs and epochs."""
    half_life_syncs = math.log(0.5) / math.log(decay) if 0.0 < decay < 1.0 else 0.0
    half_life_frames = half_life_syncs * frames_per_sync
    return {"name": name, "decay_per_sync": decay, "half_life_frames": half_life_frames,
            "half_life_syncs": half_life_syncs,
            "half_life_epochs": half_life_frames / frames_per_epoch if frames_per_epoch else None}


def compute(config, workers: int, frames_per_epoch: int, emas: dict[str, float] | None = None,
            hardware: dict | None = None, syncs_per_epoch: int | None = None,
            init: dict | None = None) -> dict:
    """The regime of `config` trained by `workers` workers on `frames_per_epoch` target frames
    (all workers together); `emas`: EMA model name -> decay per sync; `syncs_per_epoch`: as the
    shards give them (the longest shard's minibatches over tau, its last block short; default:
    the epoch's frames over frames per sync, rounded up); `init`: the warm start's record
    (emasr.nnet.training.warm_start.InitModel.record), whose epochs this run does not train
    again."""
    sync, train = config.sync, config.train
    per_batch = config.architecture.mode.minibatch_frames(config.data)
    per_sync = frames_per_sync(config, workers)
    if syncs_per_epoch is None:
        syncs_per_epoch = -(-frames_per_epoch // per_sync)
    trained_here = train.epochs - (init["epochs"] if init else 0)
    # what the rule's registry entry adds (BMUF: eta, zeta, the warm-up); its block momentum, where
    # it has one, is what the data rule is computed from
    settings = regime_settings(sync, workers)
    eta = settings.get("block_momentum")
    per_process = config.dist.workers_per_process
    regime = {
        "strategy": sync.strategy, "workers": workers, "workers_per_process": per_process,
        "processes": max(1, workers // per_process), "seed": train.init_seed,
        "data_seed": config.data.seed, "epochs": train.epochs,
        "frames_per_epoch": int(frames_per_epoch), "minibatch_frames": per_batch,
        "tau": sync.block_size, "frames_per_sync": per_sync,
        # this run's syncs (a warm start's epochs are not synced again)
        "syncs_per_epoch": syncs_per_epoch, "syncs_total": syncs_per_epoch * trained_here,
        # every frame of every epoch, the warm start's epochs counted at this run's frames
        "frames_trained_per_epoch": int(frames_per_epoch),
        "frames_trained_total": int(frames_per_epoch) * train.epochs,
        "init_model": init,
        **settings,
        **data_rule(eta, per_sync, workers, frames_per_epoch),
        "emas": [ema_regime(name, decay, per_sync, frames_per_epoch)
                 for name, decay in (emas or {}).items()],
    }
    if hardware is not None:
        regime["hardware"] = hardware
    return regime


def frames_per_sync(config, workers: int) -> int:
    """The frames one sync covers: minibatch frames x tau x N."""
    per_batch = config.architecture.mode.minibatch_frames(config.data)
    return per_batch * config.sync.block_size * workers


def shard_syncs(config, lengths: list[int]) -> int:
    """The syncs a worker's shard of utterances (`lengths`: target frames each) takes in an
    epoch: its minibatches over tau, a last block short. An epoch's syncs are the most of any
    shard (a shard that has run out sits the last ones out)."""
    return -(-config.architecture.mode.minibatches(lengths, config.data) //
             config.sync.block_size)


def plan(config, workers: int, lengths: dict[str, int], init: dict | None = None) -> dict:
    """The regime `workers` workers will train in on the utterances of `lengths` (utterance ->
    target frames, every training utterance with targets), from the shards the trainer deals
    them: regime.json's numbers, less the hardware, before any training (`init`: the warm
    start's record)."""
    utts = sorted(lengths)
    shards = [shard(utts, config.data.seed, g, workers) for g in range(workers)]
    syncs = max(shard_syncs(config, [lengths[u] for u in part]) for part in shards)
    averagers = build_averagers(config, frames_per_sync(config, workers))
    return compute(config, workers, sum(lengths.values()), ema_decays(averagers),
                   syncs_per_epoch=syncs, init=init)


def describe(regime: dict) -> str:
    """One line: the numbers a reader of a log needs."""
    init = regime.get("init_model")
    epochs = regime["epochs"] - (init["epochs"] if init else 0)
    text = (f"{regime['workers']} worker(s), {regime['frames_per_epoch']} frames per epoch, "
            f"{regime['frames_per_sync']} per sync (minibatch {regime['minibatch_frames']} x tau "
            f"{regime['tau']} x N {regime['workers']}), {regime['syncs_per_epoch']} syncs per "
            f"epoch, {regime['syncs_total']} in {epochs} epochs")
    if init:
        text += (f" after {init['epochs']} epoch(s) of the warm start {init['path']}, "
                 f"{regime['frames_trained_total']} frames trained in all")
    if regime.get("block_momentum") is not None:
        text += f"; block momentum {regime['block_momentum']:.4g}"
    for ema in regime["emas"]:
        text += (f"; {ema['name']}: decay {ema['decay_per_sync']:.4g} per sync, half-life "
                 f"{ema['half_life_syncs']:.3g} syncs = {ema['half_life_epochs']:.3g} epochs")
    return text


def warning(regime: dict) -> str | None:
    """The one warning line when BMUF's data rule is broken (None when it holds or is moot)."""
    if regime["data_rule_met"] is not False:
        return None
    share = regime["frames_per_epoch"] / regime["data_rule_frames"]
    return (f"BMUF's data rule is not met: an epoch has {regime['frames_per_epoch']} frames, "
            f"{share:.2f}x the {regime['data_rule_frames']:.0f} that block momentum "
            f"{regime['block_momentum']:.4g} at {regime['workers']} workers asks for (time "
            f"constant {regime['time_constant_frames']:.0f} frames x N); expect BMUF behind one "
            "worker: fewer frames per sync (smaller tau or minibatch), a lower block momentum, "
            "or more data")


def write(regime: dict, exp_dir: str) -> str:
    path = os.path.join(exp_dir, REGIME_FILE)
    with atomic_write(path) as f:
        json.dump(regime, f, indent=1, sort_keys=True)
        f.write("\n")
    return path


def read(exp_dir: str) -> dict | None:
    path = os.path.join(exp_dir, REGIME_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not a JSON object ({err.msg} at line {err.lineno})") \
                from None


def hardware(device) -> dict:
    """What this node gave the run: the report's speed-up verdict needs to know whether each
    worker had a device of its own."""
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    return {"device": device.type, "gpus_per_node": gpus,
            "gpu_name": torch.cuda.get_device_name(device) if gpus else None,
            "cpu_cores": cores, "threads_per_process": torch.get_num_threads(),
            "processes_per_node": local,
            "nodes": max(1, int(os.environ.get("WORLD_SIZE", "1")) // local)}


def own_devices(regime: dict) -> bool:
    """Whether every worker of the run had an accelerator of its own (one worker per process,
    at least as many GPUs on each node as processes): the only setting where N workers can show
    an N-fold speed-up over one."""
    hw = regime.get("hardware") or {}
    return (hw.get("device") == "cuda" and regime.get("workers_per_process") == 1
            and hw.get("gpus_per_node", 0) >= hw.get("processes_per_node", 1))
