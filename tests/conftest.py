"""Shared test helpers: paths to the repository and to the real-Kaldi fixtures (read in place)."""
from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = (REPO / ".." / "shared" / "fixtures").resolve()
YESNO = FIXTURES / "kaldi_yesno"

# The tests that interrupt a recipe or a step as Ctrl-C does need their processes to start with
# SIGINT at its default, as from a terminal. A test run started in the background of a script
# (`cmd &`, nohup) inherits SIGINT ignored, its children too, and a shell cannot trap a signal that
# was ignored when it started: those tests would fail there. A handler (not SIG_IGN) here makes
# every child start with the default again (exec resets handled signals, not ignored ones).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def one_torch_thread(monkeypatch):
    """One torch thread per training process (EMASR_NUM_THREADS=1, and torch's setting restored
    afterwards): results do not depend on it, and on a shared 2-core machine oversubscribed
    OpenMP threads make training many times slower."""
    import torch

    monkeypatch.setenv("EMASR_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """One uninterrupted run of the default recipe on the tiny profile, shared by the recipe tests
    (the slowest fixture): (recipe dir, its run.sh result)."""
    from recipe_helpers import recipe_copy

    recipe = recipe_copy(tmp_path_factory.mktemp("tiny"), "aishell_sim")
    return recipe, run_script([str(recipe / "run.sh"), "--profile", "tiny"])


@pytest.fixture(scope="session")
def yesno_run(tmp_path_factory):
    """One run of Kaldi's yesno recipe (egs/yesno/run.sh) on the fixture's recordings, shared by
    the tests that train and decode on it: (recipe dir, its run.sh result)."""
    from recipe_helpers import recipe_copy

    recipe = recipe_copy(tmp_path_factory.mktemp("yesno"), "yesno")
    return recipe, run_script([str(recipe / "run.sh"), str(YESNO / "waves_yesno")],
                              env={"OMP_NUM_THREADS": "1", "EMASR_NUM_THREADS": "1"})


@pytest.fixture
def yesno() -> Path:
    """The Kaldi yesno fixture, written by real Kaldi; tests only read it."""
    if not YESNO.is_dir():
        pytest.fail(f"missing fixture directory {YESNO}: the repository must sit beside shared/")
    return YESNO


def find_process(cmdline_has: list[bytes], environ_has: list[bytes]) -> int | None:
    """The pid of a process whose argv has every word of `cmdline_has` and whose environment has
    every VAR=value of `environ_has` (from /proc), or None."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        if all(w in cmdline for w in cmdline_has) and all(v in environ for v in environ_has):
            return int(pid)
    return None


def run_script(args: list[str], cwd: str | os.PathLike | None = None, env: dict | None = None,
               check: bool = False) -> subprocess.CompletedProcess:
    """Run a shell step with the repository's utils/ and steps/ on PATH, capturing its output."""
    full_env = dict(os.environ)
    full_env["PATH"] = f"{REPO / 'utils'}:{REPO / 'steps'}:{full_env['PATH']}"
    full_env["LC_ALL"] = "C"
    if env:
        full_env.update(env)
    return subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True, check=check)
