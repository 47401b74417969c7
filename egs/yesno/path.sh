# The recipe's environment: the repository's path.sh (venv, LC_ALL=C, utils/ and steps/ on PATH).
# shellcheck disable=SC1091
. "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)/path.sh"
