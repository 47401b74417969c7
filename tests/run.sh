#!/usr/bin/env bash
# Run the test suite: sets up the environment on first use (path.sh), then pytest.
# Extra arguments go to pytest, e.g. tests/run.sh -k launcher -x
set -euo pipefail
cd "$(dirname "$0")/.."
. ./path.sh
exec python -m pytest -q --durations=20 "$@"
