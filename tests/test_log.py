"""Logging format and progress reporting."""
import logging
import re

from emasr.log import progress, setup_logging


def test_log_line_format(tmp_path):
    log_file = tmp_path / "log" / "step.log"
    setup_logging(verbose=False, log_file=str(log_file))
    logging.getLogger("emasr.test").info("hello %d", 3)
    line = log_file.read_text().strip().splitlines()[-1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO test_log\.py:\d+ hello 3", line)


def test_shell_scripts_log_in_the_same_format_and_their_commands_once_quoted(tmp_path):
    import subprocess

    from conftest import REPO

    script = tmp_path / "step.sh"
    script.write_text(f"""#!/usr/bin/env bash
set -euo pipefail
foo=1
. {REPO}/utils/parse_options.sh
log "hello $1"
""")
    script.chmod(0o755)
    recipe = tmp_path / "recipe.sh"
    recipe.write_text(f"""#!/usr/bin/env bash
set -eEuo pipefail
stage=0; stop_stage=0; last_stage=0
. {REPO}/utils/lib/recipe.sh
run {script} --foo 2 "a b" "it's"
""")
    recipe.chmod(0o755)
    alone = subprocess.run([str(script), "--foo", "2", "x y"], capture_output=True, text=True)
    lines = alone.stdout.splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO step\.sh:\d+ "
                        + re.escape(f"{script} --foo 2 'x y'"), lines[0]), lines
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO step\.sh:\d+ hello x y",
                        lines[1]), lines
    # run by a recipe: the command is logged once, by `run`, and pastes back to the same words
    ran = subprocess.run([str(recipe)], capture_output=True, text=True).stdout.splitlines()
    assert len(ran) == 2 and ran[0].endswith(f"running: {script} --foo 2 'a b' 'it'\\''s'")
    pasted = subprocess.run(["bash", "-c", f"printf '%s|' {ran[0].split('running: ')[1]}"],
                            capture_output=True, text=True).stdout
    assert pasted == f"{script}|--foo|2|a b|it's|"


def test_verbose_enables_debug(tmp_path):
    log_file = tmp_path / "debug.log"
    setup_logging(verbose=True, log_file=str(log_file))
    logging.getLogger("emasr.test").debug("detail")
    assert "DEBUG" in log_file.read_text()
    setup_logging(verbose=False)


def test_progress_logs_lines_when_not_a_terminal(tmp_path, capsys):
    log_file = tmp_path / "p.log"
    setup_logging(log_file=str(log_file))
    assert list(progress(range(25), desc="items", every=10)) == list(range(25))
    text = log_file.read_text()
    assert "items: 10/25 done" in text and "items: 20/25 done" in text
    assert "items: finished 25 items" in text
