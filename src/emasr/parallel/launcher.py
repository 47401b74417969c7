"""Entry point of utils/run.pl, utils/queue.pl and utils/slurm.pl: parse, pick, run, report.

The three share everything but the running: run.pl runs the jobs here (local.py), queue.pl and
slurm.pl submit one array job and wait for it (grid.py). The report is Kaldi's:
exit 0 only if every job succeeded, else `run.pl: K / N failed, log is in exp/x/log/name.*.log`
on stderr and exit 1.
"""
from __future__ import annotations

import re
import sys

from emasr.parallel.cmdline import USAGE, LaunchError, LaunchRequest, Task, parse_launch_args
from emasr.parallel.grid import SCHEDULERS, run_grid
from emasr.parallel.local import run_local
from emasr.parallel.task import logged_exit_code

LAUNCHERS = ("run.pl", *SCHEDULERS)


def pick_tasks(request: LaunchRequest) -> list[Task]:
    """All tasks, or with `--pick failed` those whose log does not end in `# Ended (code 0)`."""
    tasks = request.all_tasks()
    if request.pick == "failed":
        tasks = [t for t in tasks if logged_exit_code(t.log) != 0]
    return tasks


ERROR_LINE = re.compile(r"error|exception|check failed|abort|traceback|expected|no such",
                        re.IGNORECASE)
MAX_ERROR_LINE = 300


# emasr's own message (click's "Error: ..."), maybe behind torchrun's "[rank0]:" prefix
EMASR_ERROR = re.compile(r"(?:\[[^\]]*\]:?\s*)?(Error: .*)")


def last_error_line(log: str) -> str | None:
    """The log's first `Error: ` line (emasr's: the cause, where a wrapper such as torchrun adds
    its own traceback after it), else its last line that looks like an error (Kaldi users grep for
    ERROR), else its last line of output; the launcher's own '#' lines are not the job's."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    except OSError:
        return None
    own = [m.group(1) for line in lines if (m := EMASR_ERROR.fullmatch(line))]
    errors = [line for line in lines if ERROR_LINE.search(line)]
    line = (own[:1] or errors or lines or [None])[-1]
    return line[:MAX_ERROR_LINE] if line else None


def report(request: LaunchRequest, codes: dict[Task, int | None]) -> int:
    """Kaldi's summary on stderr; the launcher's exit status. Tasks not rerun had succeeded."""
    failed = [task for task, code in codes.items() if code != 0]
    if not failed:
        return 0
    # The first failed job's error, so the console says what went wrong, not only where.
    error = last_error_line(failed[0].log)
    if error:
        print(f"{request.prog}: {failed[0].log}: {error}", file=sys.stderr)
    total = len(request.all_tasks())
    if total == 1:
        task = failed[0]
        status = f" with status {codes[task]}" if codes[task] is not None else ""
        print(f"{request.prog}: job failed{status}, log is in {task.log}", file=sys.stderr)
        if "JOB" in task.log:
            print(f"{request.prog}: probably you forgot to put JOB=1:$nj in your script.",
                  file=sys.stderr)
    else:
        print(f"{request.prog}: {len(failed)} / {total} failed, log is in {request.log_pattern()}",
              file=sys.stderr)
    return 1


def main(prog: str, argv: list[str]) -> int:
    if argv[:1] in (["--help"], ["-h"]):
        print(USAGE.format(prog=prog))
        return 0
    try:
        request = parse_launch_args(prog, argv)
        tasks = pick_tasks(request)
        if not tasks:
            print(f"{prog}: --pick failed: all {len(request.all_tasks())} jobs already succeeded, "
                  "nothing to rerun", file=sys.stderr)
            return 0
        if prog == "run.pl":
            codes = run_local(request, tasks)
        else:
            codes = run_grid(SCHEDULERS[prog], request, tasks)
    except LaunchError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # e.g. a log directory that cannot be created
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
    return report(request, codes)


def script_main(prog: str) -> None:
    """For the utils/ scripts: `sys.exit(main(prog, sys.argv[1:]))`."""
    if prog not in LAUNCHERS:
        raise SystemExit(f"unknown launcher {prog}; expected one of {', '.join(LAUNCHERS)}")
    sys.exit(main(prog, sys.argv[1:]))
