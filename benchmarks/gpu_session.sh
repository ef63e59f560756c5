#!/usr/bin/env bash
# Issue 42's measurements in one call on a GPU machine (about 8 minutes on an H100 or H200):
#   before       benchmarks/gpu_throughput.py of the code to compare with (BEFORE: a folder holding
#                that commit's stamplib/ and benchmarks/, e.g. `git archive <commit> stamplib benchmarks`)
#   after        the same benchmark on this checkout, same shape, batches and flags
#   cuda_suite   tests/cuda (the CoTTA one-forward check included), without the graph comparisons
#   before_tf32, after_tf32  the same two with --tf32 (when TF32=1; issue 51: every method under TF32)
#   profile      benchmarks/gpu_profile.py --tf32 on PROFILE (default cotta,stamp; PROFILE= skips it)
#   graphs       (GRAPHS=0 skips it and graph_check) the benchmark with --replay-graphs (the network's kernels as CUDA graphs) for
#                GRAPH_METHODS (tracing costs seconds per network: the launch-bound ones)
#   graph_check  tests/cuda's comparison of those methods with and without the graphs
#   cells        the reference run's missing cells of CELLS: a design of the reference benchmark
#                (default networks: setting (a) over the three ResNet-18 networks; fifteen: network 0
#                over all 15 corruptions, every claim; three: network 0 over three; `python -m
#                stamplib claims status` counts them), computed by `claims compute --benchmark
#                reference --design CELLS`, the claim cheapest to complete first; or a group of
#                `claims compute --benchmark reference --cells` (core, extras, all, stress, seeds). DATA_ROOT is a data
#                root holding the JPEG CIFAR-10, the checkpoints lie on $STAMPLIB_CHECKPOINT_PATH;
#                it runs in the time left before DEADLINE seconds, into OUT/reference (copy its
#                records into results/reference, then `python tools/seal_evidence.py
#                results/reference`). Resumable: each call starts from the records of
#                results/reference, so a session copies OUT/reference/*.json (and .outputs.npz)
#                into results/reference between calls of under 10 minutes each, e.g.
#                  CELLS_ONLY=1 CELLS=fifteen DEADLINE=540 DATA_ROOT=<data> OUT=<folder> benchmarks/gpu_session.sh
# CELLS_ONLY=1 skips every measurement above and goes straight to the cells.
# Each step has its own time limit, so one that runs long cannot starve the others; the JSON
# reports are written after every method. Everything goes to OUT: session.log, before.json,
# after.json, graphs.json; benchmarks/gpu_report.py turns them into the runbook's tables.
# Usage: OUT=<folder> [BEFORE=<folder>] [DATA_ROOT=<folder> DEADLINE=<seconds>] benchmarks/gpu_session.sh
# (time limits: BEFORE_LIMIT, AFTER_LIMIT, SUITE_LIMIT, GRAPHS_LIMIT, CHECK_LIMIT; BATCHES, JOBS)
set -u
out=${OUT:?set OUT to the folder for the results}
mkdir -p "$out"
log="$out/session.log"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
batches=${BATCHES:-10}
device=${DEVICE:-cuda}  # DEVICE=cpu with BENCH_ARGS=--small: a smoke run of this script on a CPU
read -r -a bench_args <<< "${BENCH_ARGS:-}"

step() {  # step NAME LIMIT_SECONDS COMMAND...
    local name=$1 limit=$2 started=$SECONDS
    shift 2
    echo "== $name (limit ${limit} s): $*" | tee -a "$log"
    timeout -k 10 "$limit" "$@" >> "$log" 2>&1
    echo "== $name: exit $? after $((SECONDS - started)) s" | tee -a "$log"
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  python3 -c "import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
} | tee -a "$log"
if [[ ${CELLS_ONLY:-0} != 1 ]]; then
if [[ -n ${BEFORE:-} ]]; then
    step before "${BEFORE_LIMIT:-75}" env PYTHONPATH="$BEFORE" python3 "$BEFORE/benchmarks/gpu_throughput.py" \
        --device "$device" --shapes cifar10_c --batches "$batches" "${bench_args[@]}" --out "$out/before.json"
fi
step after "${AFTER_LIMIT:-60}" python3 benchmarks/gpu_throughput.py --device "$device" --shapes cifar10_c \
    --batches "$batches" "${bench_args[@]}" --out "$out/after.json"
if [[ ${TF32:-0} == 1 ]]; then
    if [[ -n ${BEFORE:-} ]]; then
        step before_tf32 "${BEFORE_LIMIT:-75}" env PYTHONPATH="$BEFORE" python3 "$BEFORE/benchmarks/gpu_throughput.py" \
            --device "$device" --shapes cifar10_c --batches "$batches" --tf32 "${bench_args[@]}" --out "$out/before_tf32.json"
    fi
    step after_tf32 "${AFTER_LIMIT:-60}" python3 benchmarks/gpu_throughput.py --device "$device" --shapes cifar10_c \
        --batches "$batches" --tf32 "${bench_args[@]}" --out "$out/after_tf32.json"
fi
if [[ -n ${PROFILE-cotta,stamp} ]]; then
    step profile "${PROFILE_LIMIT:-60}" python3 benchmarks/gpu_profile.py --device "$device" --tf32 \
        --methods "${PROFILE-cotta,stamp}" --out "$out/profile.json"
fi
step cuda_suite "${SUITE_LIMIT:-75}" python3 -m pytest -p no:cacheprovider -m cuda tests/cuda -q -rsx \
    -k "not replayed_graphs"
# Tracing costs seconds per network and state: the methods that wait longest on launches first.
graph_methods=${GRAPH_METHODS:-cotta,stamp,rotta,owttt,sotta,tent}
[[ ${GRAPHS:-1} == 0 ]] && graph_methods=""
[[ -n $graph_methods ]] && step graphs "${GRAPHS_LIMIT:-90}" python3 benchmarks/gpu_throughput.py --device "$device" --shapes cifar10_c \
    --batches "$batches" "${bench_args[@]}" --methods "$graph_methods" --replay-graphs --warmup 3 --out "$out/graphs.json"
checks=()
for name in ${graph_methods//,/ }; do checks+=("tests/cuda/test_cuda.py::test_replayed_graphs_give_the_eager_outputs[$name]"); done
[[ -n $graph_methods ]] && step graph_check "${CHECK_LIMIT:-90}" python3 -m pytest -p no:cacheprovider -m cuda -q -rsx -s "${checks[@]}"
fi  # CELLS_ONLY
left=$(( ${DEADLINE:-100000} - SECONDS - 20 ))
if [[ -n ${DATA_ROOT:-} && $left -gt 30 ]]; then
    mkdir -p "$out/reference" && cp results/reference/*.json "$out/reference/"  # the costs and what is done
    case ${CELLS:-networks} in
        networks|fifteen|three)
            step cells "$left" python3 -m stamplib claims compute --benchmark reference --design "${CELLS:-networks}" \
                --device cuda --jobs "${JOBS:-10}" --data-root "$DATA_ROOT" --results "$out/reference" ;;
        *)
            step cells "$left" python3 -m stamplib claims compute --benchmark reference --cells "$CELLS" --device cuda \
                --jobs "${JOBS:-10}" --data-root "$DATA_ROOT" --results "$out/reference" ;;
    esac
fi
