"""The docs and docstrings describe the project as it is: no commit ids, work history or the
machine a sentence was written on (results files keep their provenance: command, commit, machine;
so do the GPU check's logs). A figure lives in a docs table or a bench output that names the
command producing it."""
from __future__ import annotations

import re

from conftest import REPO

HISTORY = re.compile(
    r"git show|\bworktree\b|\bcommit [0-9a-f]{7,40}\b|\b(?:at|of|before|since|from) [0-9a-f]{7}\b"
    r"|development machine|this 2-core machine|\b(?:this|one|a|each|earlier|previous) session\b"
    r"|a script not kept|earlier code|the earlier code"
    r"|the issue's|Done-when")


def prose_files():
    yield REPO / "README.md"
    yield from sorted((REPO / "docs").glob("*.md"))
    yield from sorted((REPO / "egs").glob("*/README.md"))
    yield from sorted((REPO / "src").rglob("*.py"))
    yield from sorted((REPO / "bench").glob("*.py"))


def test_no_commit_ids_or_history_words_in_the_docs():
    found = []
    for path in prose_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "start_new_session" in line:   # subprocess's option, not a work session
                continue
            match = HISTORY.search(line)
            if match:
                found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)!r}: "
                             f"{line.strip()[:100]}")
    assert not found, "history in the docs:\n" + "\n".join(found)
