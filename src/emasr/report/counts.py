"""The report's inputs in two small files, committed beside its RESULTS.md, from which `emasr
report --from-counts DIR` rebuilds every table (and the plots) without the exp dirs:

- `systems.json`: the report's own options (title, notes, rows, replications), then every run
  and GMM system it read: its settings, regime, per-epoch metrics (and the thinned block records
  of the loss curve), and each decode's scored result at the dev-chosen setting (LM weight,
  penalty, the %WER line's counts, failed utterances, the weights swept) with the scoring
  settings its per-utterance counts are given at (`settings`, "LMWT_WIP");
- `utterances.tsv.gz`: one line per (system, set, model, utterance):
  `system set model seed utt speaker chars errors`, tab-separated, a header line first: the
  utterance's speaker (empty where the scoring recorded none), its reference characters and its
  character errors at each of the decode's `settings`, comma-separated (what the bootstrap
  chooses among on dev and reads test at). Kaldi's best-on-test result keeps its CER only.

Counts of version 1 (`system set model seed utt errors chars`: one setting, no speaker) are still
read: their intervals hold each model's setting fixed and resample utterances.

A report can be made of runs whose exp dirs are gone (a fresh checkout of a campaign in pieces):
`merge_earlier` adds the runs of committed counts that are not read from an exp dir, once the
inputs they were trained on (the `inputs:` note: the digests of the network targets and the
training features) are those of the runs read now.

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
import zlib
from collections import defaultdict

import numpy as np

from emasr.io.atomic import atomic_write
from emasr.nnet.training.metrics import TrainingMetrics
from emasr.report.scoring import ScoredDecode, ScoringError, Sweep
from emasr.report.systems import GmmSystem, NetworkRun, TunedDecodes

SYSTEMS = "systems.json"
UTTERANCES = "utterances.tsv.gz"
COLUMNS = ("system", "set", "model", "seed", "utt", "speaker", "chars", "errors")
COLUMNS_V1 = ("system", "set", "model", "seed", "utt", "errors", "chars")
VERSION = 2
UTTERANCE_SETS = ("dev", "test")   # test_best keeps its CER only


def decode_record(decode: ScoredDecode | None, base: str, with_counts: bool) -> dict | None:
    if decode is None:
        return None
    record = dataclasses.asdict(dataclasses.replace(decode, sweep=None))
    record.pop("utterances")
    record.pop("sweep")
    record["path"] = os.path.relpath(decode.path, base)
    sweep = decode.own_sweep() if with_counts else None
    record["settings"] = list(sweep.settings) if sweep is not None else None
    return record


def tuned_record(tuned: TunedDecodes, base: str) -> dict:
    return {s: decode_record(tuned.get(s), base, s in UTTERANCE_SETS)
            for s in ("dev", "test", "test_best")}


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
            sweep = decode.own_sweep() if decode is not None else None
            if sweep is None:
                continue
            lines += [f"{system}\t{set_name}\t{model}\t{seed}\t{utt}\t{speaker}\t{chars}\t"
                      f"{','.join(map(str, errors))}\n"
                      for utt, speaker, chars, errors in zip(sweep.utts, sweep.speakers,
                                                             sweep.chars, sweep.errors.T)]
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


# (system, set, model) -> [(utt, speaker, chars, errors per setting)]
UtteranceCounts = dict[tuple[str, str, str], list[tuple[str, str, int, list[int]]]]


def read_utterances(path: str, version: int) -> UtteranceCounts:
    out: UtteranceCounts = defaultdict(list)
    columns = COLUMNS if version >= 2 else COLUMNS_V1
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            header = f.readline().rstrip("\n").split("\t")
            if tuple(header) != columns:
                raise ScoringError(f"{path}:1: expected the header {' '.join(columns)}, got "
                                   f"{' '.join(header)}")
            for number, line in enumerate(f, 2):
                key, counts = parse_line(line, version, f"{path}:{number}")
                out[key].append(counts)
    except (OSError, EOFError, zlib.error) as err:
        raise ScoringError(f"{path}: not a whole gzip file ({err}); expected the counts `emasr "
                           "report` wrote (a truncated copy?)") from None
    return out


def parse_line(line: str, version: int, where: str):
    parts = line.rstrip("\n").split("\t")
    columns = COLUMNS if version >= 2 else COLUMNS_V1
    try:
        if version >= 2:
            system, set_name, model, _, utt, speaker, chars, errors = parts
            values = [int(e) for e in errors.split(",")]
        else:
            system, set_name, model, _, utt, errors, chars = parts
            speaker, values = "", [int(errors)]
        return (system, set_name, model), (utt, speaker, int(chars), values)
    except ValueError:
        raise ScoringError(f"{where}: expected {len(columns)} tab-separated fields "
                           f"({' '.join(columns)}), got {line.strip()!r}") from None


def read_sweep(record: dict, lines: list[tuple[str, str, int, list[int]]], where: str
               ) -> Sweep | None:
    """A decode's committed counts at its settings (version 1: the record's one setting)."""
    if not lines and record.get("settings"):
        # systems.json says the counts were written: without them its intervals and the claims
        # on it would quietly vanish from the rebuilt report
        raise ScoringError(f"{where}: no per-utterance counts in {UTTERANCES}, though "
                           f"{SYSTEMS} records them at {len(record['settings'])} scoring "
                           "setting(s); expected the counts of every decode it lists (a counts "
                           "file cut short, or of another report?)")
    if not lines:
        return None
    settings = record.get("settings") or [f"{record['lmwt']}_{record['wip']}"]
    bad = next((u for u, _, _, errors in lines if len(errors) != len(settings)), None)
    if bad is not None:
        raise ScoringError(f"{where}: utterance {bad}: expected errors at the {len(settings)} "
                           f"settings of systems.json ({', '.join(settings)})")
    lines = sorted(lines)
    return Sweep(tuple(settings), tuple(u for u, *_ in lines), tuple(s for _, s, _, _ in lines),
                 np.array([n for _, _, n, _ in lines], dtype=np.int64),
                 np.array([e for *_, e in lines], dtype=np.int64).T.reshape(len(settings), -1))


def read_decode(record: dict | None, base: str, lines, where: str) -> ScoredDecode | None:
    """A decode's scored result with its committed counts, checked against its %WER counts."""
    if record is None:
        return None
    fields = {k: v for k, v in record.items() if k != "settings"}
    decode = ScoredDecode(**{**fields, "path": os.path.normpath(os.path.join(base, fields["path"]))})
    decode.sweep = read_sweep(record, lines, where)
    if decode.sweep is not None and decode.setting in decode.sweep.settings:
        decode.utterances = decode.sweep.at(decode.setting)
    if decode.has_utterances:
        errors = sum(e for e, _ in decode.utterances.values())
        chars = sum(n for _, n in decode.utterances.values())
        if (errors, chars) != (decode.errors, decode.total):
            raise ScoringError(
                f"{where}: the counts of {len(decode.utterances)} utterances add up to {errors} "
                f"errors in {chars} characters at LM weight {decode.lmwt}, penalty {decode.wip}, "
                f"but systems.json records {decode.errors} in {decode.total}; expected every "
                "utterance of the decode (a truncated or edited counts file?)")
    return decode


def read_tuned(record: dict, base: str, system: str, model: str, counts: UtteranceCounts,
               path: str) -> TunedDecodes:
    return TunedDecodes(*(read_decode(record[s], base, counts.get((system, s, model), []),
                                      f"{path}: {system} {s} {model}")
                          for s in ("dev", "test", "test_best")))


def read_systems(path: str) -> dict:
    if not os.path.isfile(path):
        raise ScoringError(f"expected file {path} to exist (written by `emasr report` beside "
                           "its RESULTS.md)")
    with open(path, encoding="utf-8") as f:
        try:
            systems = json.load(f)
        except json.JSONDecodeError as err:
            raise ScoringError(f"{path}:{err.lineno}: not JSON ({err.msg}); expected the "
                               "systems `emasr report` wrote") from None
    if systems.get("version") not in (1, VERSION):
        raise ScoringError(f"{path}: version {systems.get('version')!r}, expected 1 or {VERSION}")
    return systems


def read_counts(directory: str) -> tuple[list[NetworkRun], list[GmmSystem], dict]:
    """The networks and GMM systems a report was made of, and its options, from its counts
    directory."""
    systems = read_systems(os.path.join(directory, SYSTEMS))
    path = os.path.join(directory, UTTERANCES)
    counts = read_utterances(path, systems["version"])
    base = os.path.dirname(os.path.abspath(directory))
    networks = []
    for record in systems["networks"]:
        name = record["exp_dir"]
        fields = {k: v for k, v in record.items() if k not in ("metrics", "tuned")}
        fields["exp_dir"] = os.path.normpath(os.path.join(base, name))
        metrics = TrainingMetrics(os.path.join(fields["exp_dir"], "metrics.jsonl"),
                                  record["metrics"]["epochs"], record["metrics"]["blocks"])
        networks.append(NetworkRun(**fields, metrics=metrics, tuned={
            model: read_tuned(t, base, name, model, counts, path)
            for model, t in record["tuned"].items()}))
    gmms = [GmmSystem(os.path.normpath(os.path.join(base, g["exp_dir"])), g["name"],
                      read_tuned(g["tuned"], base, g["exp_dir"], "final", counts, path))
            for g in systems["gmms"]]
    return networks, gmms, systems["report"]


INPUTS_NOTE = "inputs: "   # the note with the digests of the inputs every run trained on


def inputs_note(notes: list[str]) -> str | None:
    return next((n for n in notes if n.startswith(INPUTS_NOTE)), None)


def merge_earlier(directory: str, networks: list[NetworkRun], gmms: list[GmmSystem],
                  notes: list[str]) -> tuple[list[NetworkRun], list[GmmSystem], list[str]]:
    """The runs and GMM systems read from exp dirs, then those of the counts in `directory`
    whose exp dirs were not read (an exp dir read now stands for its committed record), and a
    note that says how many came from there. Refused where the two were trained on other inputs
    (their `inputs:` notes differ)."""
    earlier_networks, earlier_gmms, stored = read_counts(directory)
    before, now = inputs_note(stored["notes"]), inputs_note(notes)
    if before is not None and now is not None and before != now:
        raise ScoringError(f"{os.path.join(directory, SYSTEMS)}: its runs were trained on other "
                           f"inputs than the runs read now ({before[len(INPUTS_NOTE):]}; now "
                           f"{now[len(INPUTS_NOTE):]}); expected the same network targets and "
                           "training features (rebuild them with the recipe stages that made "
                           "the committed runs', or report the two apart)")
    read = {os.path.abspath(r.exp_dir) for r in [*networks, *gmms]}
    added = [r for r in earlier_networks if os.path.abspath(r.exp_dir) not in read]
    added_gmms = [g for g in earlier_gmms if os.path.abspath(g.exp_dir) not in read]
    if not added and not added_gmms:
        return networks, gmms, notes
    note = (f"earlier runs: {len(added)} network run(s) and {len(added_gmms)} GMM system(s) "
            f"whose exp dirs are not here, as recorded in {directory} (their records and "
            "per-utterance counts)")
    return [*networks, *added], [*gmms, *added_gmms], [*notes, note]
