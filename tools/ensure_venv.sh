#!/usr/bin/env bash
# Create or reuse the project's virtual environment at .venv/ (shared by run_all.sh,
# run_tests.sh and JupyterLab). Reinstalls only when pyproject.toml or the Python version
# changes: the hash of both is stored in .venv/.requirements-hash.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-python3}"
want="$( { cat "$root/pyproject.toml"; "$python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"
have="$(cat "$venv/.requirements-hash" 2>/dev/null || true)"
# Git strips notebook outputs from what it stores (.gitattributes names the filter; its command is
# configured here, in the checkout's git config): a notebook run in JupyterLab commits clean.
install_notebook_filter() {
    if git -C "$root" rev-parse --git-dir >/dev/null 2>&1 && [[ -x "$venv/bin/python" ]]; then
        git -C "$root" config filter.nbstripout.clean "\"$venv/bin/python\" -m nbstripout"
        git -C "$root" config filter.nbstripout.smudge cat
        git -C "$root" config diff.ipynb.textconv "\"$venv/bin/python\" -m nbstripout -t"
    fi
}
if [[ -x "$venv/bin/python" && "$want" == "$have" ]]; then
    install_notebook_filter
    exit 0
fi
echo "[stamplib] setting up $venv (first run takes a few minutes: torch is large)" >&2
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
# torch first and alone: pip then takes the pinned pair from the local cache where one exists.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "torch==2.14.1" "torchvision==0.29.1"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root[dev]"
# Frost textures only (corruptions.py reads the image files it ships): --no-deps keeps
# OpenCV and scikit-image, which we do not need, out of the environment.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "imagecorruptions==1.1.2"
"$venv/bin/python" -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (stamplib)" >/dev/null
install_notebook_filter
echo "$want" > "$venv/.requirements-hash"
echo "[stamplib] environment ready" >&2
