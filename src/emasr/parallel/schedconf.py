"""conf/queue.conf, conf/slurm.conf: how launcher options become scheduler options (Kaldi syntax).

    command qsub -v PATH -cwd -S /bin/bash -j y   # the submit command and its fixed options
    option mem=* -l mem_free=$0,ram_free=$0       # --mem 4G -> -l mem_free=4G,ram_free=4G
    option mem=0                                  # --mem 0 -> nothing
    default gpu=0                                 # the value used when --gpu is not given
    option gpu=0                                  # --gpu 0 -> nothing
    option gpu=* -l gpu=$0                        # --gpu 2 -> -l gpu=2

An `option NAME=VALUE` line wins over `option NAME=*` for that exact value. A launcher option with
no line for it (or for its value) is an error naming the option and the config file, so a typo in
`--mem` never silently submits a job without its memory request. Everything after `#` is a comment.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from emasr.parallel.cmdline import LaunchError

BUILTIN = "built-in default config"
# Options that the launcher itself consumes; never mapped to scheduler options.
LAUNCHER_ONLY = ("config", "pick")

COMMAND_LINE = re.compile(r"^command (.+)$")
WILDCARD_LINE = re.compile(r"^option ([^=]+)=\* (.+)$")
VALUE_LINE = re.compile(r"^option ([^=]+)=(\S+)\s?(.*)$")
DEFAULT_LINE = re.compile(r"^default (\S+)=(\S+)$")


@dataclass
class SchedulerConf:
    source: str
    command: list[str] = field(default_factory=list)
    wildcard: dict[str, str] = field(default_factory=dict)            # mem -> "-l mem_free=$0"
    by_value: dict[tuple[str, str], str] = field(default_factory=dict)  # (gpu, "0") -> ""
    defaults: dict[str, str] = field(default_factory=dict)            # gpu -> "0"

    def map_options(self, options: dict[str, str], skip: tuple[str, ...] = ()) -> list[str]:
        """Scheduler arguments for the launcher options (command-line order, then defaults)."""
        values = dict(options)
        for name, value in self.defaults.items():
            values.setdefault(name, value)
        args: list[str] = []
        for name, value in values.items():
            if name in LAUNCHER_ONLY or name in skip:
                continue
            if (name, value) in self.by_value:
                template = self.by_value[(name, value)]
            elif name in self.wildcard:
                template = self.wildcard[name].replace("$0", value)
            else:
                raise LaunchError(f"command line option --{name.replace('_', '-')} not described "
                                  f"in {self.source} (or value '{value}' not allowed)")
            args += shlex.split(template)
        return args


def parse_conf(text: str, source: str) -> SchedulerConf:
    conf = SchedulerConf(source)
    for number, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"\s*#.*", "", raw).strip()
        if not line:
            continue
        where = f"{source}:{number}"
        if match := COMMAND_LINE.match(line):
            conf.command = shlex.split(match.group(1))
        elif match := WILDCARD_LINE.match(line):
            if "$0" not in match.group(2):
                raise LaunchError(f"{where}: 'option {match.group(1)}=*' needs $0 where the value "
                                  f"goes: '{raw}'")
            conf.wildcard[match.group(1)] = match.group(2)
        elif match := VALUE_LINE.match(line):
            conf.by_value[(match.group(1), match.group(2))] = match.group(3)
        elif match := DEFAULT_LINE.match(line):
            conf.defaults[match.group(1)] = match.group(2)
        else:
            raise LaunchError(f"{where}: unable to parse line '{raw}' (expected 'command ...', "
                              "'option NAME=* ...$0...', 'option NAME=VALUE ...' or "
                              "'default NAME=VALUE')")
    if not conf.command:
        raise LaunchError(f"{source} does not contain the line \"command ...\"")
    return conf


def load_conf(config_option: str | None, default_path: str, builtin_text: str) -> SchedulerConf:
    """`--config FILE` (must exist), else `default_path` relative to the cwd if present (Kaldi's
    conf/queue.conf), else the built-in default."""
    path = config_option or (default_path if os.path.exists(default_path) else None)
    if path is None:
        return parse_conf(builtin_text, BUILTIN)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise LaunchError(f"could not read config file {path}: {e.strerror}") from None
    return parse_conf(text, path)
