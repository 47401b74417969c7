"""A spec's rows: the report's table rows, each a sync rule optionally with an averaged model
(`bmuf+ema`), read through the registries (emasr.report.systems.parse_label); the rules they train
(one training serves every row of its rule)."""
from __future__ import annotations

from emasr.experiment.spec import Spec, SpecError
from emasr.report.systems import parse_label


def fail(spec: Spec, key: str, message: str):
    raise SpecError(f"{spec.path}: {key}: {message}")


def rows(spec: Spec) -> list[tuple[str, str]]:
    """The rows as (sync rule, model): ('bmuf', 'ema'), ('ma', 'final')."""
    if not spec.rows:
        fail(spec, "rows", "expected the table's rows (a sync rule, optionally +<averaged model>)")
    out = []
    for i, label in enumerate(spec.rows):
        try:
            out.append(parse_label(label))
        except ValueError as err:
            fail(spec, f"rows[{i}]", str(err))
    return out


def trained_rules(spec: Spec) -> list[str]:
    """The sync rules the rows train, in the rows' order (one run serves a rule's rows)."""
    return list(dict.fromkeys(rule for rule, _ in rows(spec)))
