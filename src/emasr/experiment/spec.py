"""An experiment spec: one YAML file that says what an experiment trains, decodes and reports.

    title: "Results: tiny profile"   # the report's title
    results: RESULTS.md              # the report (plots/ and counts/ beside it)
    archs:                           # architecture (emasr.nnet.models.ARCHITECTURES) -> its
      dnn:                           # config file and overrides
        config: conf/nnet/dnn.yaml
        overrides: [model.hidden_layers=2]
    rows: [single, single+ema, bmuf, bmuf+ema]   # the table's rows: a sync rule, optionally
                                     # +<averaged model>; one training serves a rule's rows
    workers: [2]                     # N of the parallel rules' runs (a one-worker rule: 1)
    workers_per_process: 1           # K: the parallel runs' workers, K to a process
    nodes: 1                         # M: the parallel runs' nodes, N / M workers on each
    seeds: [1]
    epochs: 12                       # null: the configs'
    epoch_choice: null               # train.final_epoch of every run (null: the configs')
    block_size: 4                    # tau (null: the configs')
    grid: {ma: [{train.lr: [0.1, 0.4]}]}   # settings searched on dev per rule (emasr.nnet.config.tuning)
    grid_seed: null                  # search the grid on this seed only
    warm_start_epochs: null          # parallel runs start from the one-worker run after epoch k
    earlier_counts: null             # committed counts (a report's counts/) whose runs count as
                                     # trained where their dirs are not here: a campaign in
                                     # pieces resumed on a fresh checkout (docs/experiment.md)
    averages: {ema: 1500, avg: 0.5, lastk: 4}   # averaged model -> its value (the registry's key)
    overrides: []                    # config overrides of every run
    rule_overrides: {ma: [sync.lr_times_workers=true]}   # of one rule's runs
    rule_epochs: {ma: 16}            # a rule's runs train this many epochs instead of `epochs`
    train_opts: ""                   # extra options of steps/nnet/train.sh (--torchrun-opts)
    decode: {opts: "--acwt 0.5", scoring_opts: "--min-lmwt 1", controls_at: null}

Types are checked at load, as the training config's are (emasr.nnet.sections): an unknown key or
a value of the wrong type is an error naming the file and the key's path. `--set key.path=value`
overrides any key (a YAML value; a list may be given as words, "1 2 3" or "0.5,0.75"), and
`--set key.path+=words` appends to a list of overrides (archs.dnn.overrides+=train.lr=0.2), and
`--set archs='dnn'` keeps only the architectures named. What no
type can say (names from the registries, impossible combinations) is emasr.experiment.checks'.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import yaml

from emasr.nnet.averages import AVERAGED_MODELS
from emasr.nnet.sections import ConfigError, Section, checked


class SpecError(ValueError):
    """A spec is wrong; the message names its file and the key."""


@dataclass
class ArchSpec(Section):
    config: str = ""                     # the architecture's config file (required)
    overrides: list[str] = field(default_factory=list)


@dataclass
class DecodeSpec(Section):
    opts: str = ""                       # steps/nnet/decode.sh beams and --acwt
    scoring_opts: str = ""               # local/score.sh's LM weights and penalties
    controls_at: list[int] | None = None   # worker counts whose control rows are decoded
                                         # (null: all; the others: dev frame accuracy only)


@dataclass
class Scalars(Section):
    """The spec's keys that are one value or a list of values."""
    title: str = "Results"
    results: str = "RESULTS.md"
    rows: list[str] = field(default_factory=list)
    workers: list[int] = field(default_factory=lambda: [2])
    workers_per_process: int = 1
    nodes: int = 1
    seeds: list[int] = field(default_factory=lambda: [1])
    epochs: int | None = None
    epoch_choice: str | None = None
    block_size: int | None = None
    grid_seed: int | None = None
    warm_start_epochs: int | None = None
    earlier_counts: str | None = None
    overrides: list[str] = field(default_factory=list)
    train_opts: str = ""                 # extra options of steps/nnet/train.sh (--torchrun-opts)


MAPPINGS = ("archs", "grid", "averages", "rule_overrides", "rule_epochs", "decode")


@dataclass
class Spec:
    path: str
    scalars: Scalars
    archs: dict[str, ArchSpec]
    grid: dict[str, list[dict[str, list]]]
    averages: dict[str, Any]
    rule_overrides: dict[str, list[str]]
    rule_epochs: dict[str, int]
    decode: DecodeSpec

    def __getattr__(self, name: str):
        # spec.rows, spec.seeds ...: the scalar keys read as the spec's own
        if name.startswith("__") or name == "scalars":
            raise AttributeError(name)
        return getattr(self.scalars, name)

    def to_dict(self) -> dict:
        """The spec as a mapping, every key at its value (what `emasr experiment show` writes)."""
        return {**self.scalars.to_dict(),
                "archs": {name: a.to_dict() for name, a in self.archs.items()},
                "grid": self.grid, "averages": self.averages,
                "rule_overrides": self.rule_overrides, "rule_epochs": self.rule_epochs,
                "decode": self.decode.to_dict()}

    def epochs_of(self, rule: str) -> int | None:
        """The epochs a rule's runs train (None: the configs')."""
        return self.rule_epochs.get(rule, self.epochs)


def words(value: Any, annotation) -> Any:
    """A list given as one string ("1 2 3", "0.5,0.75"; an override list by spaces only) -> its
    words, as a shell option gives them; one value of a list field -> a list of it, except where
    the field also takes one value (a half-life, or a list of them)."""
    union = isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union
    kinds = typing.get_args(annotation) if union else (annotation,)
    element = next((typing.get_args(k)[0] for k in kinds if typing.get_origin(k) is list), None)
    if element is None or value is None or isinstance(value, list):
        return value
    items = [value]
    if isinstance(value, str):
        items = (value if element is str else value.replace(",", " ")).split()
    one_value = any(typing.get_origin(k) is not list and k is not type(None) for k in kinds)
    return items[0] if len(items) == 1 and one_value else items


def typed(cls: type, values: Any, where: str):
    """A Section dataclass from a mapping, its list fields also taken as words."""
    if isinstance(values, dict):
        hints = typing.get_type_hints(cls)
        values = {k: words(v, hints[k]) if k in hints else v for k, v in values.items()}
    return cls.build(values if values is not None else {}, where)


def mapping(values: Any, where: str) -> dict:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"'{where}' must be a mapping, got {values!r}")
    return values


def build_archs(values: Any) -> dict[str, ArchSpec]:
    archs = {str(name): typed(ArchSpec, v, f"archs.{name}")
             for name, v in mapping(values, "archs").items()}
    for name, arch in archs.items():
        if not arch.config:
            raise ConfigError(f"'archs.{name}.config' must name the architecture's config file")
    return archs


def build_grid(values: Any) -> dict[str, list[dict[str, list]]]:
    """rule -> entries, each {key: [values]}; the text of `--grid` ("ma: train.lr=0.1,0.4; bmuf:
    ...", emasr.nnet.config.tuning) is taken too, read once here."""
    if isinstance(values, str):
        values = grid_from_text(values)
    grid = {}
    for rule, entries in mapping(values, "grid").items():
        if not isinstance(entries, list):
            entries = [entries]
        grid[str(rule)] = []
        for i, entry in enumerate(entries):
            where = f"grid.{rule}[{i}]"
            entry = mapping(entry, where)
            if not entry:
                raise ConfigError(f"'{where}' names no setting")
            grid[str(rule)].append({str(k): v if isinstance(v, list) else [v]
                                    for k, v in entry.items()})
    return grid


def grid_from_text(text: str) -> dict[str, list[dict[str, list]]]:
    grid: dict[str, list] = {}
    for part in filter(str.strip, text.split(";")):
        rule, colon, settings = part.partition(":")
        if not colon:
            raise ConfigError(f"'grid': '{part.strip()}' is not '<rule>: key=v,v ...'")
        entry = {}
        for item in settings.split():
            key, eq, vals = item.partition("=")
            if not eq:
                raise ConfigError(f"'grid': '{item}' of '{part.strip()}' is not key=v[,v...]")
            entry[key] = vals.split(",")   # as written: the text names the run dirs
        grid.setdefault(rule.strip(), []).append(entry)
    return grid


def build_averages(values: Any) -> dict[str, Any]:
    """averaged model -> its value, of the type of its registry entry's key in the `average`
    section (kept as written, 1500 not 1500.0: it is the text of the run's override)."""
    out = {}
    for name, value in mapping(values, "averages").items():
        if name not in AVERAGED_MODELS:
            raise ConfigError(f"unknown key 'averages.{name}'; known: "
                              f"{', '.join(AVERAGED_MODELS)} (emasr.nnet.averages)")
        model = AVERAGED_MODELS[name]
        annotation = typing.get_type_hints(model.options)[model.key]
        value = words(value, annotation)
        if isinstance(value, list):
            value = [yaml.safe_load(v) if isinstance(v, str) else v for v in value]
        checked(value, annotation, f"averages.{name}")
        out[name] = value
    return out


def build_rule_overrides(values: Any) -> dict[str, list[str]]:
    return {str(rule): checked(words(v, list[str]), list[str], f"rule_overrides.{rule}")
            for rule, v in mapping(values, "rule_overrides").items()}


def build_rule_epochs(values: Any) -> dict[str, int]:
    return {str(rule): checked(v, int, f"rule_epochs.{rule}")
            for rule, v in mapping(values, "rule_epochs").items()}


def build(values: dict, path: str) -> Spec:
    """A Spec from a mapping; a ConfigError names the key, a SpecError the file too."""
    try:
        values = mapping(values, "the spec")
        known = {f.name for f in dataclasses.fields(Scalars)} | set(MAPPINGS)
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"unknown key '{unknown[0]}'; known: {', '.join(sorted(known))}")
        scalars = typed(Scalars, {k: v for k, v in values.items() if k not in MAPPINGS}, "spec")
        return Spec(path, scalars, build_archs(values.get("archs")),
                    build_grid(values.get("grid")), build_averages(values.get("averages")),
                    build_rule_overrides(values.get("rule_overrides")),
                    build_rule_epochs(values.get("rule_epochs")),
                    typed(DecodeSpec, values.get("decode"), "decode"))
    except ConfigError as err:
        raise SpecError(f"{path}: {str(err).replace(chr(39) + 'spec.', chr(39))}") from None


def set_key(values: dict, item: str) -> None:
    """Apply one `key.path=value` to the loaded mapping (a YAML value)."""
    key, eq, text = item.partition("=")
    if not eq or not key:
        raise ConfigError(f"--set '{item}': expected key.path=value")
    append = key.endswith("+")          # key+=words: appended to the key's list
    node = values
    parts = key.rstrip("+").split(".")
    if parts[0] == "grid" and len(parts) > 2:   # a grid's keys hold dots: grid.<rule>=...
        parts = parts[:2]
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set '{item}': '{part}' is not a mapping")
    if parts == ["archs"] and not text.lstrip().startswith("{"):
        values["archs"] = kept_archs(values.get("archs"), text)
    elif append:
        before = node.get(parts[-1]) or []
        node[parts[-1]] = words(before, list[str]) + words(text, list[str])
    else:
        node[parts[-1]] = set_value(parts, text)


def kept_archs(archs: Any, text: str) -> dict:
    """`--set archs='dnn'`: the spec's architectures named, in that order (their configs and
    overrides as the spec has them)."""
    archs = archs if isinstance(archs, dict) else {}
    for name in text.replace(",", " ").split():
        if name not in archs:
            raise ConfigError(f"--set archs='{text}': the spec has no architecture '{name}' "
                              f"(it has {', '.join(archs) or 'none'}); add one with "
                              f"--set archs.{name}.config=FILE")
    return {name: archs[name] for name in text.replace(",", " ").split()}


def annotation_of(parts: list[str]):
    """The type of the key at `parts` when a section dataclass declares it (None otherwise)."""
    section = {1: Scalars, 2: DecodeSpec if parts[0] == "decode" else None,
               3: ArchSpec if parts[0] == "archs" else None}.get(len(parts))
    hints = typing.get_type_hints(section) if section else {}
    return hints.get(parts[-1])


def set_value(parts: list[str], text: str) -> Any:
    """A `--set` value: a YAML value, except where the key takes text (a title, decode options:
    "Results: tiny" is no mapping there) or YAML reads a mapping where none is expected."""
    if annotation_of(parts) in (str, str | None) or text == "":
        return text
    if parts == ["grid"] and not text.lstrip().startswith("{"):
        return text   # emasr tuning-grid's text: "ma: train.lr=0.1,0.4; bmuf: ..."
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    mapping_key = parts[0] in MAPPINGS and len(parts) <= (2 if parts[0] == "archs" else 1)
    return text if isinstance(value, dict) and not mapping_key else value


def read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            values = yaml.safe_load(f) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise SpecError(f"{path}: cannot read the spec: {' '.join(str(err).split())}") from None
    if not isinstance(values, dict):
        raise SpecError(f"{path}: expected a YAML mapping at the top level")
    return values


def load(path: str, sets: typing.Iterable[str] = ()) -> Spec:
    """The spec of a file, each `--set key.path=value` applied over it."""
    values = read(path)
    for item in sets:
        try:
            set_key(values, item)
        except ConfigError as err:
            raise SpecError(f"{path}: {' '.join(str(err).split())}") from None
    return build(values, path)


def value_text(value: Any) -> str:
    """A typed value as an override's text: 0.5, true, null, [30000,90000]."""
    if isinstance(value, list):
        return "[" + ",".join(value_text(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    return str(value)
