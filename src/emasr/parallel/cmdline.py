"""The launchers' command line, parsed by Kaldi's rules (run.pl, queue.pl, slurm.pl all share them).

    LAUNCHER [options] [JOB=1:N] LOG COMMAND...

Options come before the log file, and `JOB=1:N` may sit before, between or after them:
`--name value` (or `--name=value`) is a launcher option (`--mem 4G` -> options["mem"] = "4G");
`-tc K` is GridEngine's spelling of `--max-jobs-run K`; any other `-x value` (and `-V`,
`-pe smp 4`, `-sync y`) is a scheduler option that queue.pl/slurm.pl pass through unchanged.
The array variable may have any name and any positive start (`TASK=3:5`); every occurrence of the
name in the log path and the command is replaced by the task number, as Kaldi does.

This module is imported by the stdlib-only launcher scripts in utils/: it must not import numpy,
click or anything else outside the standard library.
"""
from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass, field

USAGE = """Usage: {prog} [options] [JOB=1:N] <log-file> <command> [<args>...]
 e.g.: {prog} JOB=1:4 exp/foo/log/bar.JOB.log some-program --opt JOB
Runs the command once per value of JOB (replaced in the log name and the command); stdout and
stderr go to the log file. Exit status 0 only if every job succeeded.
Options:
  --max-jobs-run K   at most K jobs at once (run.pl default: the number of CPUs)
  --mem 4G, --gpu N, --num-threads T, --time T
                     resources (mapped through conf/queue.conf or conf/slurm.conf by queue.pl and
                     slurm.pl; accepted and ignored by run.pl, except --num-threads for the log)
  --pick failed|all  failed: rerun only the jobs whose log lacks '# Ended (code 0)'
  --config FILE      scheduler config (queue.pl, slurm.pl; default conf/queue.conf or
                     conf/slurm.conf when present, else a built-in default)
A command given as one quoted word is run as a bash command line: "prog a | prog2 > out"."""

ARRAY_SPEC = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\d+)(?::(\d+))?$")
LOOKS_LIKE_ARRAY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=[^/]*:[^/]*$")  # JOB=a:b, JOB=1:
PICK_CHOICES = ("all", "failed")


class LaunchError(Exception):
    """A usage or launch failure; the launcher prints `prog: message` and exits 1."""


@dataclass(frozen=True)
class JobArray:
    """`JOB=1:N`: the variable name and the inclusive range of task numbers."""

    name: str
    start: int
    end: int

    @property
    def ids(self) -> range:
        return range(self.start, self.end + 1)

    def substitute(self, text: str, task_id: int | str) -> str:
        """Replace every occurrence of the variable name, as Kaldi's `s/$jobname/$jobid/g`."""
        return text.replace(self.name, str(task_id))


@dataclass(frozen=True)
class Task:
    """One job of a launch: its number (None outside an array), command line and log file."""

    id: int | None
    command: str
    log: str


@dataclass
class LaunchRequest:
    prog: str
    log_template: str
    command: str
    array: JobArray | None = None
    options: dict[str, str] = field(default_factory=dict)
    scheduler_args: list[str] = field(default_factory=list)
    sync: bool = False

    @property
    def num_threads(self) -> int:
        return positive_int(self.options.get("num_threads", "1"), "--num-threads")

    @property
    def pick(self) -> str:
        pick = self.options.get("pick", "all")
        if pick not in PICK_CHOICES:
            raise LaunchError(f"--pick must be one of {'|'.join(PICK_CHOICES)}, got '{pick}'")
        return pick

    def all_tasks(self) -> list[Task]:
        if self.array is None:
            return [Task(None, self.command, self.log_template)]
        sub = self.array.substitute
        return [Task(i, sub(self.command, i), sub(self.log_template, i)) for i in self.array.ids]

    def log_pattern(self) -> str:
        """The log name with the variable as `*`, for the failure summary."""
        return self.array.substitute(self.log_template, "*") if self.array else self.log_template


def parse_launch_args(prog: str, argv: list[str]) -> LaunchRequest:
    args = list(argv)
    options: dict[str, str] = {}
    scheduler_args: list[str] = []
    sync = False
    array = None
    # Two passes, as Kaldi: JOB=1:N may come before or after the options.
    for _ in range(2):
        while len(args) >= 2 and args[0].startswith("-"):
            sync |= take_option(prog, args, options, scheduler_args)
        if args and ARRAY_SPEC.match(args[0]):
            array = _parse_array(args.pop(0))
        elif args and LOOKS_LIKE_ARRAY.match(args[0]):
            # Kaldi only warns and then takes it for the log file: a file named 'JOB=a:b'.
            raise LaunchError(f"bad job range '{args[0]}': expected NAME=START:END with "
                              "positive integers, e.g. JOB=1:4")
    if len(args) < 2:
        raise LaunchError("expected a log file and a command\n" + USAGE.format(prog=prog))
    log, words = args[0], args[1:]
    if array is not None and array.name not in log and array.end > array.start:
        raise LaunchError("you are trying to run a parallel job but you are putting the output "
                          f"into just one log file ({log})")
    request = LaunchRequest(prog, log, shell_command(words), array, options, scheduler_args, sync)
    request.pick  # validate early: a typo should fail before anything runs
    request.num_threads
    return request


def take_option(prog: str, args: list[str], options: dict[str, str],
                 scheduler_args: list[str]) -> bool:
    """Consume one option from the front of args; return True for `-sync y`."""
    switch = args.pop(0)
    if switch == "-V":
        scheduler_args.append(switch)
        return False
    if switch.startswith("--") and "=" in switch:
        name, value = switch[2:].split("=", 1)
        options[name.replace("-", "_")] = value
        return False
    value = args.pop(0)
    if value.startswith("--"):
        logging.getLogger(__name__).warning("%s: suspicious argument '%s' to %s; starts with '-'",
                                            prog, value, switch)
    if switch.startswith("--"):
        options[switch[2:].replace("-", "_")] = value
    elif switch == "-tc":
        options["max_jobs_run"] = value
    elif switch == "-pe" and args:  # -pe smp 4: the last word is the number of threads
        threads = args.pop(0)
        scheduler_args += [switch, value, threads]
        options.setdefault("num_threads", threads)
    else:
        scheduler_args += [switch, value]
        return switch == "-sync" and value[:1] in ("y", "Y")
    return False


def _parse_array(spec: str) -> JobArray:
    name, start, end = ARRAY_SPEC.match(spec).groups()
    array = JobArray(name, int(start), int(end if end is not None else start))
    if array.start > array.end:
        raise LaunchError(f"invalid job range {spec}")
    if array.start <= 0:
        raise LaunchError(f"invalid job range {spec}, start must be strictly positive "
                          "(GridEngine requires it)")
    return array


def shell_command(words: list[str]) -> str:
    """The bash command line for the job.

    One word is taken as a complete command line, so a quoted pipeline works. Otherwise Kaldi's
    rule: words without whitespace go in unquoted (so `\\|`, `>` and `2>&1` act as shell syntax),
    words with whitespace (rspecifiers like "ark:gunzip -c x.gz |") are quoted as one argument.
    Kaldi wraps those in double quotes; single quotes keep `$` and backquotes literal too.
    """
    if len(words) == 1:
        return words[0]
    return " ".join(w if re.fullmatch(r"\S+", w) else shlex.quote(w) for w in words)


def positive_int(value: str, option: str) -> int:
    """Parse an option that must be a positive integer, or raise LaunchError naming it."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise LaunchError(f"invalid option {option} {value}: expected a positive integer")
    return number
