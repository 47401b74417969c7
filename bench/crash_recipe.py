#!/usr/bin/env python3
"""The tiny recipe (`--archs dnn`) killed at random moments, then rerun: does every rerun give the
uninterrupted run's results, with no process of the killed run left running?

    python bench/crash_recipe.py --points 20 --seed 1 --work /tmp/crash [--max-minutes 55]

One uninterrupted run first (its wall time T is the range of the kill moments), then for each
point a fresh copy of the recipe started from nothing, its whole process group SIGKILLed at a
moment drawn uniformly from (0, T) (seeded), every process whose working directory is in the copy
waited for (a survivor is a failure), then the recipe rerun to its end and its RESULTS.md compared
with the uninterrupted run's, less what differs between any two runs (command, machine, wall
times). Prints one line per point and the count of identical reruns against the points. Each
verdict is kept in WORK (`reference.json`, `pointNN.json`), so a run stopped by --max-minutes or
killed goes on where it stopped when started again with the same WORK and --seed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
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


def reference_run(work: Path, seed: int) -> tuple[float, list[str]]:
    """The uninterrupted run: its wall time and comparable results (run once; kept in WORK with
    the seed of the kill moments, so that a rerun with another seed cannot mix its points in)."""
    marker = work / "reference.json"
    if marker.exists():
        done = json.loads(marker.read_text())
        if done["seed"] != seed:
            raise SystemExit(f"{marker}: the points in {work} were drawn with --seed "
                             f"{done['seed']}, not {seed}; use another --work")
        return done["seconds"], done["results"]
    shutil.rmtree(work / "reference", ignore_errors=True)
    (work / "reference").mkdir()
    reference = recipe_copy(work / "reference", "aishell_sim")
    seconds = run_to_end(reference)
    results = comparable((reference / "RESULTS.md").read_text(encoding="utf-8"), "DNN")
    write_json(marker, {"seed": seed, "seconds": seconds, "results": results})
    return seconds, results


def crash_point(work: Path, point: int, moment: float, want: list[str]) -> dict:
    """One kill and rerun from nothing, judged against the uninterrupted run (kept in WORK: a
    point already judged is not run again; one cut off midway is removed and run again)."""
    marker = work / f"point{point:02d}.json"
    if marker.exists():
        return json.loads(marker.read_text())
    shutil.rmtree(work / f"point{point:02d}", ignore_errors=True)
    (work / f"point{point:02d}").mkdir()
    recipe = recipe_copy(work / f"point{point:02d}", "aishell_sim")
    doing = kill_at(recipe, moment)
    run_to_end(recipe)
    got = comparable((recipe / "RESULTS.md").read_text(encoding="utf-8"), "DNN")
    verdict = {"moment": moment, "doing": doing, "identical": got == want}
    write_json(marker, verdict)
    if verdict["identical"]:   # a rerun that differs keeps its files for a look
        shutil.rmtree(work / f"point{point:02d}")
    return verdict


def write_json(path: Path, value) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    tmp.rename(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, required=True,
                        help="a new directory, or one of an earlier run with the same --seed to "
                             "go on from (the points judged there are not run again)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="start no new point after this many minutes (rerun to go on)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    total, want = reference_run(args.work, args.seed)
    print(f"uninterrupted run: {total:.0f} s", flush=True)
    draw = random.Random(args.seed)
    moments = [draw.uniform(0, total) for _ in range(args.points)]
    judged = []
    for point, moment in enumerate(moments):
        if args.max_minutes is not None and time.monotonic() - start > 60 * args.max_minutes \
                and not (args.work / f"point{point:02d}.json").exists():
            print(f"stopped after {args.max_minutes:g} minutes: rerun to go on", flush=True)
            break
        verdict = crash_point(args.work, point, moment, want)
        judged.append(verdict["identical"])
        print(f"point {point + 1}: killed at {moment:.0f} s ({verdict['doing']}); rerun "
              f"{'identical' if verdict['identical'] else 'DIFFERENT'}", flush=True)
    print(f"identical reruns: {sum(judged)} of {len(judged)} points judged ({args.points} asked); "
          "no survivor of any kill")


if __name__ == "__main__":
    main()
