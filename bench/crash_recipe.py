#!/usr/bin/env python3
"""The tiny recipe (`--archs dnn`) killed at random moments, then rerun: does every rerun give the
uninterrupted run's results, with no process of the killed run left running?

    python bench/crash_recipe.py --points 20 --seed 1 --work /tmp/crash

One uninterrupted run first (its wall time T is the range of the kill moments), then for each
point a fresh copy of the recipe started from nothing, its whole process group SIGKILLed at a
moment drawn uniformly from (0, T) (seeded), every process whose working directory is in the copy
waited for (a survivor is a failure), then the recipe rerun to its end and its RESULTS.md compared
with the uninterrupted run's, less what differs between any two runs (command, machine, wall
times). Prints one line per point and the count of identical reruns against the points.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from recipe_helpers import recipe_copy  # noqa: E402
from test_recipe_tiny import comparable, processes_in  # noqa: E402

ARGS = ["--profile", "tiny", "--archs", "dnn"]


def run_to_end(recipe: Path) -> float:
    start = time.monotonic()
    with open(recipe / "rerun.log", "a") as out:
        code = subprocess.call([str(recipe / "run.sh"), *ARGS], cwd=recipe, stdout=out,
                               stderr=subprocess.STDOUT)
    if code != 0:
        raise SystemExit(f"{recipe}: run.sh failed (exit {code}); see {recipe}/rerun.log")
    return time.monotonic() - start


def kill_at(recipe: Path, moment: float) -> str:
    """Start the recipe, SIGKILL its process group after `moment` s; what it was doing then."""
    with open(recipe / "killed.log", "w") as out:
        proc = subprocess.Popen([str(recipe / "run.sh"), *ARGS], cwd=recipe, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        proc.wait(timeout=moment)
        return "finished before the kill"
    except subprocess.TimeoutExpired:
        pass
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 120
    while survivors := processes_in(recipe):
        if time.monotonic() > deadline:
            raise SystemExit(f"{recipe}: processes survived the kill: {survivors}")
        time.sleep(0.5)
    lines = (recipe / "killed.log").read_text().splitlines()
    doing = [line for line in lines if "running:" in line or " stage " in line]
    return doing[-1].split(" INFO ", 1)[-1][:100] if doing else "(before the first stage)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, required=True, help="an empty or new directory")
    args = parser.parse_args()
    reference = recipe_copy(args.work / "reference", "aishell_sim")
    total = run_to_end(reference)
    want = comparable((reference / "RESULTS.md").read_text(encoding="utf-8"), "DNN")
    print(f"uninterrupted run: {total:.0f} s", flush=True)
    draw = random.Random(args.seed)
    same = 0
    for point in range(args.points):
        moment = draw.uniform(0, total)
        recipe = recipe_copy(args.work / f"point{point:02d}", "aishell_sim")
        doing = kill_at(recipe, moment)
        run_to_end(recipe)
        got = comparable((recipe / "RESULTS.md").read_text(encoding="utf-8"), "DNN")
        same += got == want
        print(f"point {point + 1}: killed at {moment:.0f} s ({doing}); rerun "
              f"{'identical' if got == want else 'DIFFERENT'}", flush=True)
    print(f"identical reruns: {same} of {args.points}; no survivor of any kill")


if __name__ == "__main__":
    main()
