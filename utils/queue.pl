#!/usr/bin/env python3
# queue.pl: Kaldi-compatible job launcher: submit the jobs as one GridEngine array job (qsub), wait, report.
#   queue.pl [--max-jobs-run K] [--mem 4G] [--gpu N] [--num-threads T] JOB=1:N exp/x/log/name.JOB.log command...
# Run it without arguments for the usage; docs/launchers.md has the details. The logic is in
# src/emasr/parallel/; it is standard-library Python, so this runs without the project's venv.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), os.pardir, "src"))
from emasr.parallel.launcher import script_main  # noqa: E402

script_main("queue.pl")
