"""utils/parse_options.sh: Kaldi's option parsing, sourced by a script under set -euo pipefail."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

SCRIPT = """#!/usr/bin/env bash
set -euo pipefail
# Begin configuration section.
nj=4
cmd=run.pl
use_gpu=false
foo_bar=x
stage=0
# End configuration section.
help_message="Usage: $0 [options] <data-dir>
  --nj N       number of jobs (default 4); 100% used"
. {parse_options}
echo "nj=$nj|cmd=$cmd|use_gpu=$use_gpu|foo_bar=$foo_bar|stage=$stage"
echo "args=$*|n=$#"
echo "helpers=$(compgen -v _po_ || true)"
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "local" / "step.sh"
    path.parent.mkdir()
    path.write_text(SCRIPT.format(parse_options=REPO / "utils" / "parse_options.sh"))
    path.chmod(0o755)
    return path


def run(script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(script), *args], capture_output=True, text=True,
                          cwd=script.parent.parent, timeout=30)


def values(result: subprocess.CompletedProcess) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    line = result.stdout.splitlines()[1]
    return dict(item.split("=", 1) for item in line.split("|"))


def rest(result: subprocess.CompletedProcess) -> str:
    return result.stdout.splitlines()[2]


def test_the_command_is_logged_first_ready_to_paste_back(script):
    result = run(script, "--foo-bar", "a b", "--nj=2", "data/train")
    first = result.stdout.splitlines()[0]
    logged = re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO step\.sh:\d+ (.*)", first)
    assert logged, first
    assert logged.group(1) == f"{script} --foo-bar 'a b' --nj=2 data/train"


def test_defaults_without_options(script):
    result = run(script, "data/train")
    assert values(result) == {"nj": "4", "cmd": "run.pl", "use_gpu": "false", "foo_bar": "x",
                              "stage": "0"}
    assert rest(result) == "args=data/train|n=1"


def test_dashes_become_underscores_and_both_forms_work(script):
    result = run(script, "--nj", "8", "--foo-bar=y z", "--stage=-2", "a", "b")
    assert values(result) == {"nj": "8", "cmd": "run.pl", "use_gpu": "false",
                              "foo_bar": "y z", "stage": "-2"}
    assert rest(result) == "args=a b|n=2"


def test_values_with_spaces_quotes_and_dollars_are_taken_literally(script):
    result = run(script, "--cmd", "run.pl --mem 2G", "--foo-bar", "a \"b\" $HOME `id` 'c'")
    got = values(result)
    assert got["cmd"] == "run.pl --mem 2G"
    assert got["foo_bar"] == "a \"b\" $HOME `id` 'c'"
    assert values(run(script, "--foo-bar", ""))["foo_bar"] == ""


def test_unknown_option_is_an_error_naming_it(script):
    result = run(script, "--nj", "2", "--no-such-thing", "1", "dir")
    assert result.returncode == 1
    assert "invalid option --no-such-thing" in result.stderr
    assert result.stdout == ""
    assert "invalid option --a;b" in run(script, "--a;b", "1").stderr


def test_booleans_accept_only_true_or_false(script):
    assert values(run(script, "--use-gpu", "true"))["use_gpu"] == "true"
    bad = run(script, "--use-gpu", "yes")
    assert bad.returncode == 1
    assert 'expected "true" or "false": --use-gpu yes' in bad.stderr


@pytest.mark.parametrize("value", ["abc", "4G", "", "1;2"])
def test_numbers_accept_only_numbers(script, value):
    bad = run(script, "--nj", value)
    assert bad.returncode == 1 and bad.stdout == ""
    assert f"expected a number (or a list of numbers): --nj '{value}'" in bad.stderr


@pytest.mark.parametrize("value", ["8", "-2", "0.5", "1e-3", "1 2 3", "0.0,0.5,1.0"])
def test_numbers_and_lists_of_numbers_pass(script, value):
    assert values(run(script, "--nj", value))["nj"] == value


def test_missing_value_is_an_error_naming_the_option(script):
    result = run(script, "--nj")
    assert result.returncode == 1 and "option --nj needs a value" in result.stderr


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_exits_0(script, flag):
    result = run(script, "--nj", "3", flag, "dir")
    assert result.returncode == 0
    assert result.stderr.startswith(f"Usage: {script} [options] <data-dir>\n")
    assert "100% used" in result.stderr
    assert result.stdout == ""


def test_config_files_are_sourced_first_so_the_command_line_wins(script, tmp_path):
    conf = tmp_path / "my.conf"
    conf.write_text("nj=16\nfoo_bar=from_conf\n")
    for args in (["--config", str(conf), "--foo-bar", "cli"],
                 ["--foo-bar", "cli", f"--config={conf}"]):
        got = values(run(script, *args))
        assert (got["nj"], got["foo_bar"]) == ("16", "cli"), args
    missing = run(script, "--config", str(tmp_path / "nope.conf"))
    assert missing.returncode == 1 and "missing config" in missing.stderr
    assert "nope.conf" in missing.stderr


def test_parsing_stops_at_the_first_non_option(script):
    result = run(script, "data", "--nj", "3")
    assert values(result)["nj"] == "4"
    assert rest(result) == "args=data --nj 3|n=3"
    after_dashes = run(script, "--nj", "2", "--", "--stage", "x")
    assert values(after_dashes)["nj"] == "2" and rest(after_dashes) == "args=--stage x|n=2"


def test_empty_cmd_is_an_error(script):
    result = run(script, "--cmd", "")
    assert result.returncode == 1 and "empty argument to --cmd option" in result.stderr


def test_leaves_no_helper_variables(script):
    result = run(script, "--nj", "3", "d")
    assert result.stdout.splitlines()[3] == "helpers="
