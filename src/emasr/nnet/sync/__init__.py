"""Synchronization rules for block-synchronous data-parallel training (docs/design.md, "The steps").

Each rule is a small object that knows nothing about processes: the trainer hands it the mean of
the workers' local models (one flat vector, W̄) after every block of tau minibatches; the rule
updates the global model W_g and returns the vector every worker restarts from. The averaged
models (the EMA and its controls, emasr.nnet.averages) follow W_g beside any rule.

RULES is the one registry: a rule is its module plus one entry here, and the entry carries what
the config (its keys in the `sync` section, their check), the trainer (build), the CLI choices,
the recipe's rows and the report's labels and plot colours need.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from emasr.nnet.sync import bmuf, diloco, ma, single
from emasr.nnet.sync.bmuf import BlockMomentum
from emasr.nnet.sync.ma import ModelAveraging
from emasr.nnet.sync.single import NoSync


@dataclass(frozen=True)
class SyncRule:
    name: str                        # sync.strategy, the run's row in the report
    label: str                       # how the report names it (BMUF)
    color: str                       # its plot colour
    build: Callable                  # (sync section, workers) -> the rule object
    options: type | None = None      # its keys in the sync section (a Section dataclass)
    check: Callable | None = None    # (config) -> None, or a ConfigError
    parallel: bool = True            # False: one worker only


RULES: dict[str, SyncRule] = {r.name: r for r in (
    SyncRule("single", "single", "tab:gray", NoSync.from_config, parallel=False),
    SyncRule("ma", "MA", "tab:blue", ModelAveraging.from_config),
    SyncRule("bmuf", "BMUF", "tab:red", BlockMomentum.from_config, bmuf.BmufOptions,
             bmuf.check_options),
    SyncRule("diloco", "DiLoCo", "tab:green", diloco.DiLoCo.from_config, diloco.DilocoOptions,
             diloco.check_options),
)}
STRATEGIES = tuple(RULES)


def make_rule(sync, workers: int):
    """The rule of `sync.strategy` for `workers` workers."""
    return RULES[sync.strategy].build(sync, workers)


__all__ = ["BlockMomentum", "ModelAveraging", "NoSync", "RULES", "STRATEGIES", "SyncRule",
           "make_rule", "bmuf", "diloco", "ma", "single"]
