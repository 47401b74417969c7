"""The `emasr` command line: one click group, one subcommand per step.

Subcommands are listed in COMMANDS as "module:attribute" and imported only when invoked, so
`emasr --help` is fast and a step never imports libraries it does not use (this matters: importing
kaldilm before kaldi_hmm_gmm can deadlock, see DESIGN.md "Known pitfalls").
To add a step: write a click command in its module and add one line here.
"""
from __future__ import annotations

import importlib

import click

from emasr import __version__
from emasr.log import setup_logging

# name -> (module:attribute, one-line help shown by `emasr --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "check-stack": ("emasr.stack:check_stack_cli", "Import the FST stack and decode a tiny FST."),
    # -- parallel (job launchers) --
    # -- io (data directories) --
    # -- corpus (simulation) --
    # -- lang (data prep, dict, lang, LM) --
    # -- feats --
    # -- decode and score --
    # -- gmm --
    # -- ali (alignment ingestion, targets) --
    # -- nnet (training) --
    # -- report --
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="emasr")
@click.option("-v", "--verbose", is_flag=True, help="Log debug messages too.")
@click.option("--log-file", type=click.Path(dir_okay=False), default=None,
              help="Also write the log to this file.")
def main(verbose: bool, log_file: str | None) -> None:
    """emasr: Kaldi-style speech recognition steps. Run `emasr COMMAND --help` for one step."""
    setup_logging(verbose, log_file)


if __name__ == "__main__":
    main()
