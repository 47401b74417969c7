# Source this file (". ./path.sh") before running steps: it sets the environment every step expects.
# On first use it creates the project's virtual environment (.venv at the repository root) and
# installs emasr into it; later it only activates it, reinstalling when pyproject.toml changed.
EMASR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
export EMASR_ROOT
export LC_ALL=C
export PYTHONUNBUFFERED=1
export PATH="$EMASR_ROOT/utils:$EMASR_ROOT/steps:$EMASR_ROOT/steps/nnet:$PATH"
"$EMASR_ROOT/utils/setup_env.sh" >&2 || return 1 2>/dev/null || exit 1
# shellcheck disable=SC1091
. "$EMASR_ROOT/.venv/bin/activate"
