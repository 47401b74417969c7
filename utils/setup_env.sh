#!/usr/bin/env bash
# Create or refresh the project's virtual environment at $EMASR_ROOT/.venv (called by path.sh).
# Torch is installed first as the local CPU build (torch==2.13.0), so that the package's torch range
# is already satisfied and pip never pulls a multi-GB CUDA build. A stamp file records the hash of
# pyproject.toml; the install reruns only when it changes.
set -euo pipefail
. "$(dirname "$0")/lib/log.sh"   # the console format (its lines go to stderr with path.sh's)
root="${EMASR_ROOT:-$(cd "$(dirname "$0")/.." && pwd -P)}"
venv="$root/.venv"
stamp="$venv/.emasr-installed"
want=$(sha1sum "$root/pyproject.toml" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
# Jobs of an array may all source path.sh at once: one installs, the others wait for it.
mkdir -p "$venv"
exec 9>"$venv/.install.lock"
flock 9
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
python=${EMASR_PYTHON:-python3}
log "installing emasr into $venv (first use; takes about a minute)"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
# pip warns about this machine's unused local index folders on every package; keep other messages.
pip() { "$venv/bin/python" -m pip --disable-pip-version-check -q "$@" 2>&1 | { grep -v "^WARNING: Location 'file:" >&2 || true; }; }
pip install torch==2.13.0 \
  || warn "local torch 2.13.0 not found; installing torch from the package's range"
pip install -e "$root[test]"
echo "$want" > "$stamp"
log "done"
