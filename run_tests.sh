#!/usr/bin/env bash
# The test command (README, CI): set up .venv if needed, lint, check notebooks are stripped,
# run pytest (slow tests excluded; run them with ./run_tests.sh -m slow). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")"
tools/ensure_venv.sh
export PATH="$PWD/.venv/bin:$PATH"
echo "[run_tests] ruff check"
ruff check stamplib tests benchmarks notebooks templates tools
echo "[run_tests] notebooks committed without outputs (as git would commit them)"
python tools/check_notebooks_stripped.py
echo "[run_tests] pytest"
python -m pytest -p no:cacheprovider -n 2 --dist loadfile "$@"
