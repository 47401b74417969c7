"""The emasr command line: help, version, every registered subcommand importable with --help."""
import subprocess

import pytest
from click.testing import CliRunner

from emasr import __version__
from emasr.cli import COMMANDS, main


def test_help_lists_every_subcommand():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and __version__ in result.output


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_subcommand_help(name):
    result = CliRunner().invoke(main, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def test_console_script_installed():
    out = subprocess.run(["emasr", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "Commands:" in out.stdout


def test_unknown_command_is_an_error():
    result = CliRunner().invoke(main, ["no-such-step"])
    assert result.exit_code != 0 and "No such command" in result.output
