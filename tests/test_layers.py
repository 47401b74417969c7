"""The package's architecture, as pyproject.toml's import-linter contracts state it: a module
imports only from its own layer or below (docs/design.md, "Package map"), and no import cycle."""
from __future__ import annotations

import shutil
import subprocess

from conftest import REPO


def test_imports_follow_the_layers_and_make_no_cycle():
    lint = shutil.which("lint-imports")
    assert lint, "lint-imports (the import-linter package, a test dependency) is not installed"
    result = subprocess.run([lint, "--no-cache"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Contracts: 3 kept, 0 broken." in result.stdout
