#!/usr/bin/env python3
"""Stand-in GridEngine and Slurm commands for the launcher tests: qsub, sbatch, qstat, squeue,
qdel, scancel. tests/test_launchers.py links this file under those names into a folder it puts
first on PATH, so queue.pl and slurm.pl go through their real submission path.

Like the real schedulers, qsub/sbatch return at once and run the array in the background (a
detached "scheduler" process per job), one task per index with SGE_TASK_ID / SLURM_ARRAY_TASK_ID
set, at most -tc K / %K at a time, output appended to the -o file. `qsub -sync y` runs in the
foreground and returns 1 if a task failed. Every call is recorded in calls.jsonl beside this file;
state/<job>.done marks a finished job for qstat/squeue. STANDIN_SUBMIT_FAILS=1 makes the submit
fail like an unreachable scheduler.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STATE = os.path.join(HERE, "state")


def record(name, argv):
    with open(os.path.join(HERE, "calls.jsonl"), "a") as f:
        f.write(json.dumps({"cmd": name, "argv": argv, "cwd": os.getcwd()}) + "\n")


def new_job_id():
    os.makedirs(STATE, exist_ok=True)
    counter = os.path.join(STATE, "counter")
    job_id = int(open(counter).read()) + 1 if os.path.exists(counter) else 4000
    with open(counter, "w") as f:
        f.write(str(job_id))
    return str(job_id)


def expand_ids(spec):
    """'1-3,7' or '3:5' -> [1, 2, 3, 7] / [3, 4, 5]."""
    ids = []
    for part in spec.split(","):
        a, _, b = part.replace(":", "-").partition("-")
        ids += range(int(a), int(b or a) + 1)
    return ids


def parse_submit(name, argv):
    """-> (script, task ids or None, max concurrent or None, output file, sync)."""
    opts, i = {}, 0
    while i < len(argv) - 1:
        arg = argv[i]
        if arg.startswith("--") and "=" in arg:
            key, value = arg.split("=", 1)
            opts[key] = value
            i += 1
        elif arg in ("-V", "-cwd"):
            i += 1
        elif arg.startswith("-"):
            opts[arg] = argv[i + 1]
            i += 2
        else:
            i += 1
    script = argv[-1]
    if name == "qsub":
        ids = expand_ids(opts["-t"]) if "-t" in opts else None
        limit = int(opts["-tc"]) if "-tc" in opts else None
        return script, ids, limit, opts.get("-o"), opts.get("-sync", "n").startswith("y")
    spec = opts.get("--array")
    limit = None
    if spec and "%" in spec:
        spec, limit = spec.split("%")
        limit = int(limit)
    return script, expand_ids(spec) if spec else None, limit, opts.get("-o"), False


def run_array(name, job_id, script, ids, limit, output):
    """The 'scheduler': run the tasks, at most `limit` at once; return the number that failed."""
    var = "SGE_TASK_ID" if name == "qsub" else "SLURM_ARRAY_TASK_ID"
    out = open(output, "a") if output else subprocess.DEVNULL
    queue = list(ids) if ids is not None else [None]
    running, failed = [], 0
    while queue or running:
        while queue and (limit is None or len(running) < limit):
            task = queue.pop(0)
            env = dict(os.environ, JOB_ID=job_id, SLURM_JOB_ID=job_id)
            env[var] = str(task) if task is not None else "undefined"
            running.append(subprocess.Popen(["bash", script], env=env, stdout=out, stderr=out))
        time.sleep(0.02)
        for proc in [p for p in running if p.poll() is not None]:
            running.remove(proc)
            failed += proc.returncode != 0
    open(os.path.join(STATE, f"{job_id}.done"), "w").close()
    return failed


def submit(name, argv):
    if os.environ.get("STANDIN_SUBMIT_FAILS") == "1":
        print("error: unable to contact the scheduler", file=sys.stderr)
        return 1
    script, ids, limit, output, sync = parse_submit(name, argv)
    job_id = new_job_id()
    if name == "qsub":
        span = f"{ids[0]}-{ids[-1]}:1" if ids else ""
        kind = "job-array" if ids else "job"
        print(f'Your {kind} {job_id}{"." + span if span else ""} ("{os.path.basename(script)}") '
              "has been submitted", flush=True)
    else:
        print(f"Submitted batch job {job_id}", flush=True)
    if sync:
        return 1 if run_array(name, job_id, script, ids, limit, output) else 0
    spec = json.dumps([name, job_id, script, ids, limit, output])
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--run-array", spec],
                            start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(STATE, f"{job_id}.pid"), "w") as f:
        f.write(str(proc.pid))
    return 0


def job_alive(job_id):
    return (os.path.exists(os.path.join(STATE, f"{job_id}.pid"))
            and not os.path.exists(os.path.join(STATE, f"{job_id}.done")))


def cancel(job_id):
    pid = int(open(os.path.join(STATE, f"{job_id}.pid")).read())
    try:
        os.killpg(pid, signal.SIGKILL)  # the scheduler, its job scripts and their commands
    except ProcessLookupError:
        pass
    open(os.path.join(STATE, f"{job_id}.done"), "w").close()
    return 0


def main():
    if sys.argv[1:2] == ["--run-array"]:
        name, job_id, script, ids, limit, output = json.loads(sys.argv[2])
        run_array(name, job_id, script, ids, limit, output)
        return 0
    name, argv = os.path.basename(sys.argv[0]), sys.argv[1:]
    record(name, argv)
    if name in ("qsub", "sbatch"):
        return submit(name, argv)
    job_id = argv[-1]
    if name == "qstat":
        return 0 if job_alive(job_id) else 1
    if name == "squeue":  # like Slurm shortly after the end: exit 0, no lines
        if job_alive(job_id):
            print(f"{job_id}_1 standin job R 0:01 1 node1")
        return 0
    if name in ("qdel", "scancel"):
        return cancel(job_id)
    print(f"launcher_standins.py: unknown command name {name}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
