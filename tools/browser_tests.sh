#!/usr/bin/env bash
# The browser tests (pytest -m browser): headless Debian chromium, driven by Playwright, checks
# the built site (build/site) and the stream explorer served by Voilà. Installs what they need
# (Debian's chromium with apt, the [browser] extra with pip), builds the site first when there
# is none (./run_all.sh --site: all notebooks, quick profile), then runs the tests.
#   tools/browser_tests.sh [pytest arguments]
# STAMPLIB_SCREENSHOTS=DIR also saves screenshots of the pages and of the explorer there.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/ensure_venv.sh
if ! command -v chromium >/dev/null; then
    echo "[browser_tests] installing Debian's chromium" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[dev,browser]"
if [[ ! -f build/site/index.html ]]; then
    ./run_all.sh --site
fi
export PATH="$PWD/.venv/bin:$PATH"
python -m pytest -p no:cacheprovider -m browser tests/browser "$@"
