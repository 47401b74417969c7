"""Synchronization rules for block-synchronous data-parallel training (docs/design.md, "The steps").

Each rule is a small object that knows nothing about processes: the trainer hands it the mean of
the workers' local models (one flat vector, W̄) after every block of tau minibatches; the rule
updates the global model W_g and returns the vector every worker restarts from. The averaged
models (the EMA and its controls, emasr.nnet.averages) follow W_g beside any rule.

RULES is the one registry: a rule is its module plus one `register(SyncRule(...))`, and the entry
answers every question the rest of the toolkit asks about a rule: its keys in the `sync` section
and their check (the config), how to build it (the trainer), the CLI's choices, the keys a tuning
grid may search and the tags of their run dirs (emasr.nnet.config.tuning), what it adds to
regime.json (emasr.nnet.training.regime), whether it trains several workers and has a warm-up
(the averaged models), and the report's label, plot colour and comparisons. No code outside this
package tests a rule's name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from emasr.nnet.sync import bmuf, diloco, ma, single
from emasr.nnet.sync.bmuf import BlockMomentum
from emasr.nnet.sync.ma import ModelAveraging
from emasr.nnet.sync.single import NoSync


@dataclass(frozen=True, eq=False)
class SyncRule:
    """A rule's registry entry."""
    name: str                        # sync.strategy, the run's row in the report
    label: str                       # how the report names it (BMUF)
    color: str                       # its plot colour
    build: Callable                  # (sync section, workers) -> the rule object
    options: type | None = None      # its keys in the sync section (a Section dataclass)
    check: Callable | None = None    # (config) -> None, or a ConfigError
    parallel: bool = True            # False: one worker only (the report's one-worker row, N = 1)
    # the keys a tuning grid may search for it, beyond the learning rate and tau that every rule
    # reads -> the tag that names a run dir by its value (`sync.block_momentum` -> `_eta0.75`)
    tuned: dict[str, str] = field(default_factory=dict)
    # what it adds to regime.json: key -> (sync section, workers) -> the value as the run used it
    # (every regime.json has every registered rule's keys, null where another rule trained; a
    # `block_momentum` also gets BMUF's data rule: the momentum filter's time constant)
    regime: dict[str, Callable] = field(default_factory=dict)
    # of those, what the report's regime table shows: (key, column heading, format spec)
    regime_columns: tuple[tuple[str, str, str], ...] = ()
    warmup: Callable | None = None   # (sync section) -> its warm-up syncs (None: it has none)
    reference: bool = False          # the rule the report compares the others with (its
                                     # "test vs" column, speed-up) and whose parity with one
                                     # worker defines the paper's regime: one rule
    compared_with: tuple[str, ...] = ()   # the rules whose global model the report compares
                                     # this one's with (A against it, B), at each worker count
    rate_tuned: bool = False         # a claim about it is judged only where its learning rate
                                     # (train.lr or sync.lr_times_workers) was searched on dev


RULES: dict[str, SyncRule] = {}


def register(rule: SyncRule) -> SyncRule:
    """Add `rule` to RULES (a rule's module plus this call is the whole of a new rule). Refused:
    a name already taken, or a tuned key or tag that another rule gives another meaning."""
    if rule.name in RULES:
        raise ValueError(f"sync rule '{rule.name}' is already registered")
    for other in RULES.values():
        for key, tag in rule.tuned.items():
            if other.tuned.get(key, tag) != tag:
                raise ValueError(f"sync rule '{rule.name}': {key} has the tag '{tag}', "
                                 f"'{other.name}' gives it '{other.tuned[key]}'")
            clash = next((k for k, t in other.tuned.items() if t == tag and k != key), None)
            if clash:
                raise ValueError(f"sync rule '{rule.name}': the tag '{tag}' of {key} already "
                                 f"names {clash} ('{other.name}')")
    if rule.reference and any(r.reference for r in RULES.values()):
        raise ValueError(f"sync rule '{rule.name}': the reference rule is "
                         f"'{reference_rule()}' already")
    RULES[rule.name] = rule
    return rule


def unregister(name: str) -> None:
    """Remove a rule registered by `register` (a test's toy rule)."""
    del RULES[name]


def one_worker_rule() -> str:
    """The rule of one worker (the report's N = 1 row every parallel rule is compared with)."""
    return next(r.name for r in RULES.values() if not r.parallel)


def reference_rule() -> str:
    """The rule the report compares the others with (RULES' `reference` entry)."""
    return next(r.name for r in RULES.values() if r.reference)


def parallel_rules() -> list[str]:
    return [r.name for r in RULES.values() if r.parallel]


def regime_settings(sync, workers: int) -> dict:
    """What the run's rule adds to regime.json, beside the other rules' keys at null."""
    keys = {key: None for rule in RULES.values() for key in rule.regime}
    own = RULES[sync.strategy].regime
    return {**keys, **{key: value(sync, workers) for key, value in own.items()}}


def regime_columns() -> list[tuple[str, str, str]]:
    """Every registered rule's columns of the report's regime table, in the order of RULES."""
    columns = {c[0]: c for rule in RULES.values() for c in rule.regime_columns}
    return list(columns.values())


def warmup_syncs(sync) -> int:
    """The syncs of the run's rule's warm-up (0: the rule has none)."""
    warmup = RULES[sync.strategy].warmup
    return 0 if warmup is None else warmup(sync)


def make_rule(sync, workers: int):
    """The rule of `sync.strategy` for `workers` workers."""
    return RULES[sync.strategy].build(sync, workers)


register(SyncRule("single", "single", "tab:gray", NoSync.from_config, parallel=False))
register(SyncRule("ma", "MA", "tab:blue", ModelAveraging.from_config, rate_tuned=True))
register(SyncRule("bmuf", "BMUF", "tab:red", BlockMomentum.from_config, bmuf.BmufOptions,
                  bmuf.check_options, tuned=bmuf.TUNED, regime=bmuf.REGIME,
                  regime_columns=(("block_momentum", "block momentum", ".4g"),
                                  ("block_lr", "block lr", "g")),
                  warmup=bmuf.warmup_syncs, reference=True, compared_with=("ma", "single")))
register(SyncRule("diloco", "DiLoCo", "tab:green", diloco.DiLoCo.from_config,
                  diloco.DilocoOptions, diloco.check_options, tuned=diloco.TUNED,
                  compared_with=("single", "bmuf")))

__all__ = ["BlockMomentum", "ModelAveraging", "NoSync", "RULES", "SyncRule", "make_rule",
           "one_worker_rule", "parallel_rules", "reference_rule", "regime_columns",
           "regime_settings", "register",
           "unregister", "warmup_syncs", "bmuf", "diloco", "ma", "single"]
