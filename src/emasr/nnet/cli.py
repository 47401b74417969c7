"""`emasr train`: the per-process entry point of network training (torchrun starts one per worker,
or one per dist.workers_per_process workers; run alone it is one process)."""
from __future__ import annotations

import logging
import os

import click
import torch

from emasr.nnet import config as configs
from emasr.nnet.sync import RULES

logger = logging.getLogger(__name__)


class RegisteredChoice(click.Choice):
    """A choice among a registry's names as they are when the command runs, so that a rule
    registered after this module was imported is a choice too."""

    def __init__(self, registry: dict) -> None:
        self.registry = registry
        super().__init__(tuple(registry))

    @property
    def choices(self) -> tuple:
        return tuple(self.registry)

    @choices.setter
    def choices(self, value) -> None:
        pass   # click.Choice sets it once; the registry is the list


def pin_threads() -> int:
    """Share the CPU cores among the workers on this node: cores // local workers, at least 1
    (EMASR_NUM_THREADS overrides; torchrun's OMP_NUM_THREADS=1 default is deliberately ignored)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    threads = int(os.environ.get("EMASR_NUM_THREADS", 0)) or max(1, (cores or 1) // local)
    torch.set_num_threads(threads)
    return threads


def half_lives_value(text: str | None) -> str | None:
    """--ema-half-life-frames '30000,90000' (or spaces) -> '[30000, 90000]'; one value stays one."""
    if text is None:
        return None
    values = text.replace(",", " ").split()
    return values[0] if len(values) == 1 else f"[{', '.join(values)}]"


def shortcut_overrides(strategy, block_size, ema_decay, ema_half_life_frames, epochs) -> list[str]:
    pairs = [("sync.strategy", strategy), ("sync.block_size", block_size),
             ("average.ema_decay", ema_decay),
             ("average.ema_half_life_frames", half_lives_value(ema_half_life_frames)),
             ("train.epochs", epochs)]
    return [f"{key}={value}" for key, value in pairs if value is not None]


def config_options(command):
    """The options that make a training's config, shared by `emasr train` and `emasr regime`."""
    options = [
        click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False),
                     help="YAML config (e.g. conf/nnet/dnn.yaml); defaults fill what it leaves "
                          "out."),
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="Override one config value, e.g. --set train.lr=0.2 (repeatable)."),
        click.option("--strategy", type=RegisteredChoice(RULES), default=None,
                     help="Sync rule (sync.strategy)."),
        click.option("--block-size", type=int, default=None, help="tau: minibatches per sync."),
        click.option("--ema-decay", type=float, default=None,
                     help="EMA decay alpha per sync (average.ema_decay)."),
        click.option("--ema-half-life-frames", default=None,
                     help="EMA half-life in training frames, alpha per sync derived from it "
                          "(average.ema_half_life_frames); a list ('30000,90000') keeps one EMA "
                          "each, ema_<frames>.pt."),
        click.option("--epochs", type=int, default=None, help="train.epochs"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def resolve_config(config_path, overrides, strategy, block_size, ema_decay, ema_half_life_frames,
                   epochs) -> configs.Config:
    return configs.resolve(config_path, [*overrides, *shortcut_overrides(
        strategy, block_size, ema_decay, ema_half_life_frames, epochs)])


@click.command("train")
@config_options
@click.option("--resume", is_flag=True, help="Continue from the latest complete checkpoint.")
@click.argument("targets_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("train_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("dev_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("exp_dir", type=click.Path(file_okay=False))
def train_cli(config_path, overrides, strategy, block_size, ema_decay, ema_half_life_frames, epochs,
              resume, targets_dir, train_dir, dev_dir, exp_dir) -> None:
    """Train a DNN or LSTM acoustic model on TARGETS_DIR (pdf targets) and TRAIN_DIR's features,
    evaluating on DEV_DIR every epoch; writes EXP_DIR/{conf.yaml, metrics.jsonl, checkpoints/,
    final.pt, ema.pt}. Run it through steps/nnet/train.sh (torchrun, one process per worker)."""
    from emasr.nnet.workers.comm import CollectiveTimeout, RendezvousError
    from emasr.nnet.data import DataError
    from emasr.nnet.trainer import run

    threads = pin_threads()
    try:
        config = resolve_config(config_path, overrides, strategy, block_size, ema_decay,
                                ema_half_life_frames, epochs)
        logger.info("worker %s: %d threads; strategy %s, tau %d", os.environ.get("RANK", "0"),
                    threads, config.sync.strategy, config.sync.block_size)
        run(config, targets_dir, train_dir, dev_dir, exp_dir, resume)
    except (configs.ConfigError, DataError, RendezvousError, CollectiveTimeout, ValueError,
            FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None


@click.command("regime")
@config_options
@click.option("--num-workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="N: the workers of the training, on all nodes together.")
@click.option("--json", "as_json", is_flag=True, help="Print the regime as regime.json holds it.")
@click.argument("targets_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("train_dir", type=click.Path(exists=True, file_okay=False))
def regime_cli(config_path, overrides, strategy, block_size, ema_decay, ema_half_life_frames,
               epochs, num_workers, as_json, targets_dir, train_dir) -> None:
    """Print the regime a training of N workers on TRAIN_DIR (with TARGETS_DIR's targets) runs
    in, before any training: frames per epoch and per sync, syncs per epoch and in all, the
    frames trained, BMUF's time constant and data rule, each EMA's decay per sync and half-life
    in syncs and epochs, the warm start (train.init_model, checked against the run) (the numbers
    of regime.json, less the hardware). When BMUF's data rule is broken, one warning line goes
    to stderr. Takes `emasr train`'s config options; steps/nnet/train.sh runs it first."""
    import json

    from emasr.nnet.training import regime, warm_start
    from emasr.nnet.data import (DataError, check_target_frames, utterances_with_targets,
                                 validate_targets)
    from emasr.nnet.data.inputs import make_pipeline, open_targets, raw_feature_dim

    try:
        config = resolve_config(config_path, overrides, strategy, block_size, ema_decay,
                                ema_half_life_frames, epochs)
        targets = open_targets(targets_dir)
        utts = utterances_with_targets(train_dir, targets, targets_dir, "training")
        init = warm_start.read(config.train)
        if init is not None:   # refused here, before train.sh starts the workers
            pipeline = make_pipeline(config.features, train_dir)
            warm_start.check(init, config, pipeline.output_dim(raw_feature_dim(train_dir)),
                             targets.num_pdfs, pipeline)
        lengths = validate_targets(targets, utts, targets.num_pdfs, targets_dir)
        check_target_frames(lengths, train_dir, targets, targets_dir, config.features.stack)
        planned = regime.plan(config, num_workers, lengths, None if init is None else init.record())
    except (configs.ConfigError, DataError, ValueError, FileNotFoundError) as err:
        raise click.ClickException(str(err)) from None
    click.echo(json.dumps(planned, indent=1, sort_keys=True) if as_json
               else regime.describe(planned))
    if regime.warning(planned):
        logger.warning("%s", regime.warning(planned))
