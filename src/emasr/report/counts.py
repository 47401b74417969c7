"""The report's inputs in two small files, committed beside its RESULTS.md, from which `emasr
report --from-counts DIR` rebuilds every table (and the plots) without the exp dirs:

- `systems.json`: the report's own options (title, notes, rows, replications), then every run
  and GMM system it read: its settings, regime, per-epoch metrics (and the thinned block records
  of the loss curve), and each decode's scored result at the dev-chosen setting (LM weight,
  penalty, the %WER line's counts, failed utterances, the weights swept);
- `utterances.tsv.gz`: one line per (system, set, model, utterance) at that setting:
  `system set model seed utt errors chars` (character errors of the best path and reference
  characters), tab-separated, a header line first. Kaldi's best-on-test result keeps its CER only.

Paths are stored relative to the report's directory (the parent of the counts directory), so a
rebuilt report beside the committed one names the same runs. gzip's header carries no time, so
the same inputs give the same bytes.
"""
from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
from collections import defaultdict

from emasr.io.atomic import atomic_write
from emasr.nnet.metrics import TrainingMetrics
from emasr.report.scoring import ScoredDecode, ScoringError
from emasr.report.systems import GmmSystem, NetworkRun, TunedDecodes

SYSTEMS = "systems.json"
UTTERANCES = "utterances.tsv.gz"
COLUMNS = ("system", "set", "model", "seed", "utt", "errors", "chars")
VERSION = 1
UTTERANCE_SETS = ("dev", "test")   # test_best keeps its CER only


def decode_record(decode: ScoredDecode | None, base: str) -> dict | None:
    if decode is None:
        return None
    record = dataclasses.asdict(decode)
    record.pop("utterances")
    record["path"] = os.path.relpath(decode.path, base)
    return record


def tuned_record(tuned: TunedDecodes, base: str) -> dict:
    return {s: decode_record(tuned.get(s), base) for s in ("dev", "test", "test_best")}


def network_record(run: NetworkRun, base: str) -> dict:
    record = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)
              if f.name not in ("metrics", "tuned")}
    record["exp_dir"] = os.path.relpath(run.exp_dir, base)
    record["metrics"] = {"epochs": run.metrics.epochs, "blocks": run.metrics.blocks}
    record["tuned"] = {model: tuned_record(t, base) for model, t in run.tuned.items()}
    return record


def utterance_lines(system: str, seed: int, tuned: dict[str, TunedDecodes]) -> list[str]:
    lines = []
    for model, decodes in tuned.items():
        for set_name in UTTERANCE_SETS:
            decode = decodes.get(set_name)
            if decode is None:
                continue
            lines += [f"{system}\t{set_name}\t{model}\t{seed}\t{utt}\t{errors}\t{chars}\n"
                      for utt, (errors, chars) in sorted(decode.utterances.items())]
    return lines


def write_counts(directory: str, networks: list[NetworkRun], gmms: list[GmmSystem],
                 options: dict) -> None:
    """systems.json and utterances.tsv.gz in `directory` (each written whole, then renamed);
    `options`: the report's title, notes, archs, labels and replications."""
    base = os.path.dirname(os.path.abspath(directory))
    systems = {"version": VERSION, "report": options,
               "networks": [network_record(r, base) for r in networks],
               "gmms": [{"exp_dir": os.path.relpath(g.exp_dir, base), "name": g.name,
                         "tuned": tuned_record(g.tuned, base)} for g in gmms]}
    lines = ["\t".join(COLUMNS) + "\n"]
    for run, record in zip(networks, systems["networks"]):
        lines += utterance_lines(record["exp_dir"], run.seed, run.tuned)
    for gmm, record in zip(gmms, systems["gmms"]):
        lines += utterance_lines(record["exp_dir"], 0, {"final": gmm.tuned})
    os.makedirs(directory, exist_ok=True)
    with atomic_write(os.path.join(directory, SYSTEMS)) as f:
        json.dump(systems, f, indent=1, sort_keys=True)
        f.write("\n")
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as gz:
        gz.write("".join(lines).encode("utf-8"))
    with atomic_write(os.path.join(directory, UTTERANCES), mode="wb") as f:
        f.write(buffer.getvalue())


def read_utterances(path: str) -> dict[tuple[str, str, str], dict[str, tuple[int, int]]]:
    """(system, set, model) -> utt -> (errors, chars)."""
    out: dict[tuple[str, str, str], dict[str, tuple[int, int]]] = defaultdict(dict)
    with gzip.open(path, "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if tuple(header) != COLUMNS:
            raise ScoringError(f"{path}:1: expected the header {' '.join(COLUMNS)}, got "
                               f"{' '.join(header)}")
        for number, line in enumerate(f, 2):
            parts = line.rstrip("\n").split("\t")
            try:
                system, set_name, model, _, utt, errors, chars = parts
                out[(system, set_name, model)][utt] = (int(errors), int(chars))
            except ValueError:
                raise ScoringError(f"{path}:{number}: expected {len(COLUMNS)} tab-separated "
                                   f"fields ({' '.join(COLUMNS)}), got {line.strip()!r}") from None
    return out


def read_decode(record: dict | None, base: str,
                utterances: dict[str, tuple[int, int]]) -> ScoredDecode | None:
    if record is None:
        return None
    return ScoredDecode(**{**record, "path": os.path.normpath(os.path.join(base, record["path"])),
                           "utterances": utterances})


def read_tuned(record: dict, base: str, system: str, model: str, utterances) -> TunedDecodes:
    return TunedDecodes(*(read_decode(record[s], base, utterances.get((system, s, model), {}))
                          for s in ("dev", "test", "test_best")))


def read_counts(directory: str) -> tuple[list[NetworkRun], list[GmmSystem], dict]:
    """The networks and GMM systems a report was made of, and its options, from its counts
    directory."""
    path = os.path.join(directory, SYSTEMS)
    if not os.path.isfile(path):
        raise ScoringError(f"expected file {path} to exist (written by `emasr report` beside "
                           "its RESULTS.md)")
    with open(path, encoding="utf-8") as f:
        systems = json.load(f)
    if systems.get("version") != VERSION:
        raise ScoringError(f"{path}: version {systems.get('version')!r}, expected {VERSION}")
    utterances = read_utterances(os.path.join(directory, UTTERANCES))
    base = os.path.dirname(os.path.abspath(directory))
    networks = []
    for record in systems["networks"]:
        name = record["exp_dir"]
        fields = {k: v for k, v in record.items() if k not in ("metrics", "tuned")}
        fields["exp_dir"] = os.path.normpath(os.path.join(base, name))
        metrics = TrainingMetrics(os.path.join(fields["exp_dir"], "metrics.jsonl"),
                                  record["metrics"]["epochs"], record["metrics"]["blocks"])
        networks.append(NetworkRun(**fields, metrics=metrics, tuned={
            model: read_tuned(t, base, name, model, utterances)
            for model, t in record["tuned"].items()}))
    gmms = [GmmSystem(os.path.normpath(os.path.join(base, g["exp_dir"])), g["name"],
                      read_tuned(g["tuned"], base, g["exp_dir"], "final", utterances))
            for g in systems["gmms"]]
    return networks, gmms, systems["report"]
