#!/usr/bin/env bash
# The dashboard's browser test (ctest dashboard_browser_test): installs
# puppeteer-core (package-lock.json) into NODE_DIR with npm ci, then runs
# dashboard_test.js against BIN_DIR's binaries. Skips (77) with one line
# when node or chromium is missing.
#   run.sh BIN_DIR ARTIFACT_DIR NODE_DIR
set -euo pipefail
bin=${1:?usage: run.sh BIN_DIR ARTIFACT_DIR NODE_DIR}
artifacts=${2:?}
node_dir=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP node/npm not found"
  exit 77
fi
if [[ ! -x /usr/bin/chromium && ! -x /usr/bin/chromium-browser ]]; then
  echo "SKIP chromium not found (deploy/install-deps.sh installs it)"
  exit 77
fi
mkdir -p "$node_dir"
cp "$here/package.json" "$here/package-lock.json" "$node_dir/"
"$here/../deploy/npm_ci.sh" "$node_dir" >/dev/null
exec node "$here/dashboard_test.js" "$bin" "$artifacts" "$node_dir"
