#!/usr/bin/env bash
# Regenerate every table and figure: execute all notebooks with papermill.
#   ./run_all.sh [--profile quick|full|smoke] [--data-root DIR] [--device cpu|cuda] [--only NAME ...]
# Executed notebooks go to build/notebooks/<profile>/, figures and tables to figures/.
# Exits non-zero if any notebook fails, naming the notebook and the cell.
set -euo pipefail
cd "$(dirname "$0")"
profile=quick; data_root=""; device=cpu; only=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --profile) profile="$2"; shift 2 ;;
        --data-root) data_root="$2"; shift 2 ;;
        --device) device="$2"; shift 2 ;;
        --only) shift; while [[ $# -gt 0 && "$1" != --* ]]; do only+=("$1"); shift; done ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "run_all.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
tools/ensure_venv.sh
export PATH="$PWD/.venv/bin:$PATH"
args=(--profile "$profile" --device "$device")
[[ -n "$data_root" ]] && args+=(--data-root "$data_root")
[[ ${#only[@]} -gt 0 ]] && args+=(--only "${only[@]}")
start=$SECONDS
python -m stamplib notebooks "${args[@]}"
echo "run_all.sh: finished in $((SECONDS - start)) s (profile $profile); figures and tables in figures/"
