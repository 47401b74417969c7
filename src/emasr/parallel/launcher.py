"""Entry point of utils/run.pl, utils/queue.pl and utils/slurm.pl: parse, pick, run, report.

The three share everything but the running: run.pl runs the jobs here (local.py), queue.pl and
slurm.pl submit one array job and wait for it (grid.py). The report is Kaldi's:
exit 0 only if every job succeeded, else `run.pl: K / N failed, log is in exp/x/log/name.*.log`
on stderr and exit 1.
"""
from __future__ import annotations

import logging
import re
import shutil
import sys

from emasr.parallel.cmdline import (USAGE, LaunchError, LaunchRequest, Task, take_option,
                                   parse_launch_args)
from emasr.parallel.grid import SCHEDULERS, run_grid
from emasr.parallel.schedconf import load_conf
from emasr.parallel.local import run_local
from emasr.log import setup_logging
from emasr.parallel.task import logged_exit_code

LAUNCHERS = ("run.pl", *SCHEDULERS)
log = logging.getLogger(__name__)


def pick_tasks(request: LaunchRequest) -> list[Task]:
    """All tasks, or with `--pick failed` those whose log does not end in `# Ended (code 0)`."""
    tasks = request.all_tasks()
    if request.pick == "failed":
        tasks = [t for t in tasks if logged_exit_code(t.log) != 0]
    return tasks


ERROR_LINE = re.compile(r"error|exception|check failed|abort|traceback|expected|no such",
                        re.IGNORECASE)
MAX_ERROR_LINE = 500


# emasr's own message (click's "Error: ..."), maybe behind torchrun's "[rank0]:" prefix
EMASR_ERROR = re.compile(r"(\[[^\]]*\]:?)?\s*(Error: .*)")
# the lines a multi-line message goes on with: indented, behind the same prefix
CONTINUED = re.compile(r"(\[[^\]]*\]:?)?( +|\t)(\S.*)")


def emasr_error(lines: list[str]) -> str | None:
    """The first `Error: ` line, its indented continuation lines joined to it ("...: a; b"): a
    message that lists what differs (a resumed configuration, a lang dir's problems) reaches the
    console whole."""
    for i, line in enumerate(lines):
        if (match := EMASR_ERROR.fullmatch(line.strip())) is None:
            continue
        parts = [match.group(2)]
        for following in lines[i + 1:]:
            more = CONTINUED.fullmatch(following.rstrip("\n"))
            if more is None or more.group(1) != match.group(1):
                break
            parts.append(more.group(3))
        return parts[0] + " " + "; ".join(parts[1:]) if len(parts) > 1 else parts[0]
    return None


def last_error_line(log: str) -> str | None:
    """The log's first `Error: ` line (emasr's: the cause, where a wrapper such as torchrun adds
    its own traceback after it), else its last line that looks like an error (Kaldi users grep for
    ERROR), else its last line of output; the launcher's own '#' lines are not the job's."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            raw = [line for line in f if line.strip() and not line.startswith("#")]
    except OSError:
        return None
    lines = [line.strip() for line in raw]
    errors = [line for line in lines if ERROR_LINE.search(line)]
    line = emasr_error(raw) or (errors or lines or [None])[-1]
    return line[:MAX_ERROR_LINE] if line else None


def report(request: LaunchRequest, codes: dict[Task, int | None]) -> int:
    """Kaldi's summary on stderr; the launcher's exit status. Tasks not rerun had succeeded."""
    failed = [task for task, code in codes.items() if code != 0]
    if not failed:
        return 0
    # The first failed job's error, so the console says what went wrong, not only where.
    # The console format (docs/reliability.md): the cause as the one Error line, naming the log
    # it was found in; then where the logs are, as a log line.
    error = last_error_line(failed[0].log)
    if error:
        print(f"Error: {failed[0].log}: {error.removeprefix('Error: ')}", file=sys.stderr)
    total = len(request.all_tasks())
    if total == 1:
        task = failed[0]
        status = f" with status {codes[task]}" if codes[task] is not None else ""
        log.error("%s: job failed%s, log is in %s", request.prog, status, task.log)
        if "JOB" in task.log:
            log.error("%s: probably you forgot to put JOB=1:$nj in your script.", request.prog)
    else:
        log.error("%s: %d / %d failed, log is in %s", request.prog, len(failed), total,
                  request.log_pattern())
    return 1


def check_launcher(prog: str, argv: list[str]) -> None:
    """`LAUNCHER [options] --check`: raise LaunchError unless this launcher could run a job here
    with these options (steps check their --cmd this way before they touch anything,
    utils/parse_options.sh). queue.pl and slurm.pl need their config and its submit command."""
    options: dict[str, str] = {}
    args = list(argv)
    while args:
        if len(args) < 2 and not (args[0].startswith("--") and "=" in args[0]):
            raise LaunchError(f"expected options before --check, got '{args[0]}'")
        take_option(prog, args, options, [])
    if prog not in SCHEDULERS:
        return
    scheduler = SCHEDULERS[prog]
    conf = load_conf(options.get("config"), scheduler.default_conf_path, scheduler.builtin_conf)
    conf.map_options(options, ("max_jobs_run",))
    if shutil.which(conf.command[0]) is None:
        kind = "GridEngine" if prog == "queue.pl" else "Slurm"
        raise LaunchError(f"cannot run '{conf.command[0]}' (the submit command of {conf.source}): "
                          f"not on PATH; is this a {kind} cluster? (run.pl runs jobs locally)")


def main(prog: str, argv: list[str]) -> int:
    if argv[:1] in (["--help"], ["-h"]):
        print(USAGE.format(prog=prog))
        return 0
    try:
        if argv[-1:] == ["--check"]:
            check_launcher(prog, argv[:-1])
            return 0
        request = parse_launch_args(prog, argv)
        tasks = pick_tasks(request)
        if not tasks:
            log.info("%s: --pick failed: all %d jobs already succeeded, nothing to rerun", prog,
                     len(request.all_tasks()))
            return 0
        if prog == "run.pl":
            codes = run_local(request, tasks)
        else:
            codes = run_grid(SCHEDULERS[prog], request, tasks)
    except (LaunchError, OSError) as e:  # OSError: e.g. a log directory that cannot be created
        print(f"Error: {prog}: {e}", file=sys.stderr)
        return 1
    return report(request, codes)


def script_main(prog: str) -> None:
    """For the utils/ scripts: `sys.exit(main(prog, sys.argv[1:]))`."""
    if prog not in LAUNCHERS:
        raise SystemExit(f"unknown launcher {prog}; expected one of {', '.join(LAUNCHERS)}")
    setup_logging()
    sys.exit(main(prog, sys.argv[1:]))
