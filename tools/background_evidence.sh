#!/usr/bin/env bash
# Compute a committed benchmark's design in the background on this machine, and bring what it
# finishes into this checkout, committed, as it finishes. For a maintainer on a machine that may be
# reset between sessions: every finished record and every finished corruption of an unfinished cell
# (results/<store>/.grid/partial) is committed, so the next session resumes where this one stopped.
#
#   tools/background_evidence.sh start DESIGN REPLICATES:METHODS [REPLICATES:METHODS ...]
#       e.g. tools/background_evidence.sh start networks 1:eata,sar,sotta 0:sotta,rotta
#       clones this checkout's HEAD into $WORK/clone (default WORK=../compute; the clone keeps the
#       records' provenance clean while this checkout changes), then starts one job per argument:
#       `python -m stamplib claims compute --benchmark reference --design DESIGN --replicates R
#       --methods M --jobs 1`, one thread each, at the lowest priority, plus a loop that harvests
#       every 10 minutes while a job runs. Logs: $WORK/logs/.
#   tools/background_evidence.sh harvest
#       copies the clone's new records (those its manifest lists) and its kept corruptions into
#       results/reference, lists the records in the manifest (tools/seal_evidence.py), re-renders the
#       pages (claims render) and commits results/, docs/ and figures/ alone.
#   tools/background_evidence.sh stop
#       stops the jobs (a cell's finished corruptions stay kept) and harvests once more.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(realpath -m "${WORK:-$root/../compute}")"
store=results/reference
python="$root/.venv/bin/python"

harvest() {
    exec 9>"$work/harvest.lock"
    flock 9
    local src="$work/clone/$store" dst="$root/$store" new=() name
    cd "$root"
    for record in "$src"/*.json; do
        name=$(basename "$record")
        [[ -e "$dst/$name" ]] && continue
        grep -q "  $name\$" "$src/MANIFEST.sha256" || continue  # a record is whole once its store lists it
        cp "$record" "$dst/$name"
        [[ -e "${record%.json}.outputs.npz" ]] && cp "${record%.json}.outputs.npz" "$dst/"
        new+=("$name")
    done
    rm -rf "$dst/.grid/partial"
    mkdir -p "$dst/.grid"
    if [[ -d "$src/.grid/partial" ]]; then
        cp -a "$src/.grid/partial" "$dst/.grid/partial"
        find "$dst/.grid/partial" -name '.tmp-*' -delete  # a write under way is not a finished corruption
    fi
    local message=""
    if [[ ${#new[@]} -gt 0 ]]; then
        PYTHONPATH="$root" nice -n 5 "$python" tools/seal_evidence.py "$store"
        PYTHONPATH="$root" nice -n 5 "$python" -m stamplib claims render > /dev/null
        local methods
        methods=$(printf '%s\n' "${new[@]}" | sed 's/__.*//' | sort -u | paste -sd, - | sed 's/,/, /g')
        message="Evidence records: ${#new[@]} record(s) of $store ($methods), computed in the background from a clean clone (provenance names commit and CPU); pages re-rendered (claims render)"
    fi
    # the pages only with new records (what claims render wrote): a page being edited here stays out
    local pages=(results) folder
    if [[ -n $message ]]; then
        for folder in docs figures; do [[ -e $folder ]] && pages+=("$folder"); done
    fi
    git add -A -- "${pages[@]}"
    if git diff --cached --quiet -- "${pages[@]}"; then
        echo "harvest: nothing new"
        return 0
    fi
    local kept
    kept=$(find "$dst/.grid/partial" -name '*.json' 2>/dev/null | wc -l)
    [[ -n $message ]] || message="Kept corruptions of $store's unfinished cells: $kept finished corruption(s) in $store/.grid/partial, where a fresh clone resumes"
    git commit -q -m "$message" -- "${pages[@]}"
    git log --oneline -1
}

start() {
    local design=${1:?name the design (python -m stamplib claims status --benchmark reference)}
    shift
    [[ $# -gt 0 ]] || { echo "name at least one REPLICATES:METHODS job, e.g. 1:eata,sar" >&2; exit 2; }
    [[ -x $python ]] || { echo "no environment at $root/.venv: run tools/ensure_venv.sh first" >&2; exit 2; }
    mkdir -p "$work/logs"
    if [[ ! -d "$work/clone" ]]; then
        git clone -q "$root" "$work/clone"
    fi
    # the clone finds the checkpoints and the data where this checkout does: ../shared beside it
    [[ -e "$work/shared" || ! -d "$root/../shared" ]] || ln -s "$(realpath "$root/../shared")" "$work/shared"
    local job replicates methods
    for job in "$@"; do
        replicates=${job%%:*} methods=${job#*:}
        [[ $job == *:* && -n $replicates && -n $methods ]] || { echo "a job is REPLICATES:METHODS, got $job" >&2; exit 2; }
        (cd "$work/clone" && PYTHONPATH="$work/clone" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 setsid nohup nice -n 19 \
            "$python" -m stamplib claims compute --benchmark reference --design "$design" --replicates "$replicates" \
            --methods "$methods" --jobs 1 > "$work/logs/$design-$replicates.log" 2>&1 < /dev/null &
         echo "started $design replicates $replicates: $methods (log $work/logs/$design-$replicates.log)")
    done
    sleep 2
    for pid in $(pgrep -f "claims compute --benchmark reference" || true); do
        echo 19 > "/proc/$pid/autogroup" 2>/dev/null || true  # below interactive work, not only below its session
    done
    WORK="$work" setsid nohup bash -c '
        while pgrep -f "claims compute --benchmark reference" > /dev/null; do
            sleep 600; "$0" harvest >> "$WORK/logs/harvest.log" 2>&1 || true
        done
        "$0" harvest >> "$WORK/logs/harvest.log" 2>&1' "$root/tools/background_evidence.sh" > /dev/null 2>&1 < /dev/null &
    echo "harvesting every 10 minutes into $root (log $work/logs/harvest.log)"
}

case ${1:-} in
    start) shift; start "$@" ;;
    harvest) harvest ;;
    stop) pkill -f "claims compute --benchmark reference" || true; sleep 3; harvest ;;
    *) sed -n '2,21p' "$0" >&2; exit 2 ;;
esac
