#!/usr/bin/env bash
# Regenerate every table and figure: execute all notebooks with papermill.
#   ./run_all.sh [--profile quick|full|smoke] [--data-root DIR] [--device cpu|cuda|cuda:N] [--only NAME ...]
#                [--executor local|submitit|submitit-local] [--jobs N] [grid options]
# Executed notebooks go to build/notebooks/<profile>/, figures and tables to figures/.
# Without --executor/--jobs, smoke and quick compute the cells with one process per CPU core
# (--device cuda: one per GPU, so with one GPU inside the notebooks, one cell at a time).
# With --executor or --jobs, the notebooks' cells are computed first as one grid
# (python -m stamplib grid --wait: N local processes, or SLURM jobs through submitit), and the
# notebooks then only read the results store. Grid options, passed through: --partition P,
# --gpus-per-job N, --cpus-per-task N, --time-min M, --mem-gb G, --array-parallelism N,
# --cells-per-job N (see python -m stamplib grid --help).
# A quick run on the built-in benchmark then draws its figure into build/figures/builtin_benchmark.png
# (the README's first figure, figures/builtin_benchmark.png, like every tracked figure and page, is
# drawn from the committed records by python -m stamplib claims render alone, so a run leaves git
# status clean). Then the reference run on real images is rendered from its committed records
# (results/reference: figures/*_real.*, no data or checkpoint needed). --recompute instead
# recomputes those records (needs shared/data and both JPEG source models) and reports every
# record that differs from the committed one and the largest difference; --recompute METHODS
# recomputes only those methods' records (comma-separated, or "deterministic" for Source,
# BN Stats, Tent, EATA, SAR and OWTTT); --no-reference skips the reference tables.
# --site then builds the executed notebooks into a website: build/site/index.html
# (python -m stamplib site does the same for notebooks executed earlier).
# Exits non-zero if any notebook fails, naming the notebook and the cell. SIGINT (Ctrl-C),
# SIGTERM (a CI cancel, timeout) or SIGHUP stop it within seconds, with every process it started:
# one line says what was kept (run the same command again to go on); exit code 130, 143 or 129.
# On a GPU at paper scale (Table 1 and 2 on one GPU or SLURM; driver, data layout, expected
# hours): docs/gpu_runbook.md.
set -euo pipefail
cd "$(dirname "$0")"
# Each step runs in the background and is waited for (step), so that a signal reaches this script
# at once (bash runs no trap until a foreground command ends) and is passed on as SIGTERM: the
# step (python -m stamplib) then ends its workers and kernels, says in one line what it kept,
# and this script exits 128 + the signal. A step started in the background ignores SIGINT, hence
# SIGTERM for every signal.
child=""
step() { "$@" & child=$!; local status=0; wait "$child" || status=$?; child=""; return "$status"; }
stop() {
    trap '' INT TERM HUP  # a second signal does not interrupt the step's clean-up
    if [[ -n "$child" ]]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
    exit "$1"
}
trap 'stop 130' INT
trap 'stop 143' TERM
trap 'stop 129' HUP
# A bad option stops here, before anything runs, with one line (exit code 2).
refuse() { echo "run_all.sh: $* (see ./run_all.sh --help)" >&2; exit 2; }
# The value of option $1, which must be given ($2: the arguments after it).
value_of() { [[ $# -ge 2 && "$2" != --* ]] || refuse "$1 needs a value"; }
profile=quick; data_root=""; device=cpu; only=(); executor=""; jobs=""; grid_opts=(); reference=render; recompute_methods=""; site=""; render_jobs=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --profile|--data-root|--device|--executor|--jobs|--partition|--gpus-per-job|--cpus-per-task|--time-min|\
        --mem-gb|--array-parallelism|--cells-per-job) value_of "$@" ;;
    esac
    case "$1" in
        --profile) profile="$2"; shift 2 ;;
        --data-root) data_root="$2"; shift 2 ;;
        --device) device="$2"; shift 2 ;;
        --only) shift; while [[ $# -gt 0 && "$1" != --* ]]; do only+=("$1"); shift; done ;;
        --executor) executor="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --partition|--gpus-per-job|--cpus-per-task|--time-min|--mem-gb|--array-parallelism|--cells-per-job)
            grid_opts+=("$1" "$2"); shift 2 ;;
        --recompute) reference=recompute; shift
            if [[ $# -gt 0 && "$1" != --* ]]; then recompute_methods="$1"; shift; fi ;;
        --no-reference) reference=""; shift ;;
        --site) site=1; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 0 ;;
        *) refuse "unknown option $1" ;;
    esac
done
# The choices of python -m stamplib's shared flags (stamplib/flags.py), checked before the
# environment is set up or a cell computed.
[[ "$profile" =~ ^(smoke|quick|full)$ ]] || refuse "--profile must be smoke, quick or full, got '$profile'"
[[ "$device" =~ ^(cpu|cuda|cuda:[0-9]+)$ ]] || refuse "--device must be cpu, cuda or cuda:N, got '$device'"
[[ -z "$executor" || "$executor" =~ ^(local|submitit|submitit-local)$ ]] \
    || refuse "--executor must be local, submitit or submitit-local, got '$executor'"
[[ -z "$jobs" || "$jobs" =~ ^[0-9]+$ ]] || refuse "--jobs must be a whole number, got '$jobs'"
[[ -z "$data_root" || -d "$data_root" ]] || refuse "--data-root $data_root is not a folder"
step tools/ensure_venv.sh
export PATH="$PWD/.venv/bin:$PATH"
args=(--profile "$profile" --device "$device")
[[ -n "$data_root" ]] && args+=(--data-root "$data_root")
start=$SECONDS
# On a laptop the cells are computed first by one worker process per core, on GPUs by one per
# GPU (then the notebooks render from the results store); with one GPU, or --jobs 1, they are
# computed inside the notebooks instead.
if [[ -z "$executor" && -z "$jobs" && "$profile" != full ]]; then
    jobs="$(python -c 'import sys; from stamplib.experiments.grid import default_jobs; print(default_jobs(sys.argv[1]))' "$device")"
fi
if [[ "$jobs" == 1 && -z "$executor" && ${#grid_opts[@]} -eq 0 ]]; then
    jobs=""
fi
if [[ -n "$executor" || -n "$jobs" || ${#grid_opts[@]} -gt 0 ]]; then
    # The grid covers the notebooks that will be rendered (notebooks without cells are skipped).
    if [[ ${#only[@]} -gt 0 ]]; then
        chosen=("${only[@]}")
    else
        chosen=(); for nb in notebooks/[0-9][0-9]_*.ipynb; do chosen+=("$(basename "$nb" .ipynb)"); done
    fi
    grid=(--notebook "${chosen[@]}" --executor "${executor:-local}" --jobs "${jobs:-1}" --wait "${grid_opts[@]}")
    status=0; step python -m stamplib grid "${args[@]}" "${grid[@]}" || status=$?
    if [[ $status -eq 2 || $status -gt 128 ]]; then
        exit "$status"  # bad input, or a signal stopped it: the grid has said what, in one line
    elif [[ $status -ne 0 ]]; then
        echo "run_all.sh: the grid has failed or missing cells (see above); run the same command again to" \
             "resubmit them, then the notebooks render from the results store" >&2
        exit 1
    fi
    echo "run_all.sh: grid finished in $((SECONDS - start)) s; rendering the notebooks from the results store"
    # The notebooks now only read the store: as many render at once as local workers computed.
    if [[ "${executor:-local}" == local ]]; then render_jobs="${jobs:-1}"; fi
fi
[[ ${#only[@]} -gt 0 ]] && args+=(--only "${only[@]}")
step python -m stamplib notebooks "${args[@]}" --jobs "$render_jobs"
if [[ "$profile" == quick && ${#only[@]} -eq 0 && -z "$data_root" ]]; then
    # The README's first figure, of this run: the quick run on the built-in CIFAR-10 photographs
    # beside the paper and the ResNet-18 reference run (docs/builtin_benchmark.md), in build/figures.
    step python -m stamplib benchmark render
fi
if [[ "$reference" == render && ${#only[@]} -eq 0 && -z "$data_root" ]]; then
    step python -m stamplib reference render --jobs "$render_jobs"
elif [[ "$reference" == recompute ]]; then
    step python -m stamplib reference recompute --jobs "${jobs:-1}" ${data_root:+--data-root "$data_root"} \
        ${recompute_methods:+--methods "$recompute_methods"}
fi
if [[ -n "$site" ]]; then
    step python -m stamplib site --profile "$profile"
fi
echo "run_all.sh: finished in $((SECONDS - start)) s (profile $profile); figures and tables in figures/"
