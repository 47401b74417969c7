"""Logging format and progress reporting."""
import logging
import re

from emasr.log import progress, setup_logging


def test_log_line_format(tmp_path):
    log_file = tmp_path / "log" / "step.log"
    setup_logging(verbose=False, log_file=str(log_file))
    logging.getLogger("emasr.test").info("hello %d", 3)
    line = log_file.read_text().strip().splitlines()[-1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO test_log\.py:\d+ hello 3", line)


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
