#!/usr/bin/env bash
# grammarsd developer entry point. Needs only Python >= 3.10 and pip.
#   ./dev.sh demo [args]   set up .venv, then run the demo on the default model (SmolLM2-135M-Instruct)
#   ./dev.sh test [args]   set up .venv, then run the test suite (args go to pytest)
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
VENV=${GRAMMARSD_VENV:-.venv}
PY="$VENV/bin/python"

setup() {
  if [ ! -x "$PY" ]; then
    echo "[dev.sh] creating $VENV" >&2
    "$PYTHON" -m venv "$VENV"
  fi
  "$PY" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  # The CPU wheel of torch 2.13.0 where it is available; any torch >= 2.1 works otherwise.
  if ! "$PY" -c "import torch" 2>/dev/null; then
    "$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0" \
      || "$PY" -m pip install -q --disable-pip-version-check "torch>=2.1"
  fi
  "$PY" -m pip install -q --disable-pip-version-check -e ".[dev]"
}

cmd=${1:-}
shift || true
case "$cmd" in
  demo)
    setup
    exec "$PY" -m grammarsd demo "$@"
    ;;
  test)
    setup
    exec "$PY" -m pytest -n 2 --dist loadfile -q "$@"
    ;;
  *)
    echo "usage: ./dev.sh demo|test [args...]" >&2
    exit 2
    ;;
esac
