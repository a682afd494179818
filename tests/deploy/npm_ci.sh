#!/usr/bin/env bash
# Installs the manifest validator's pinned npm packages (package-lock.json)
# into DIR, a directory in the build tree holding copies of package.json and
# package-lock.json. Skips (77) without node/npm; reinstalls only when the
# lock file changed since the last install.
#   npm_ci.sh DIR
set -euo pipefail
dir=${1:?usage: npm_ci.sh DIR}
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP node/npm not found"
  exit 77
fi
stamp="$dir/node_modules/.zshard-lock"
if [[ -f "$stamp" ]] && cmp -s "$dir/package-lock.json" "$stamp"; then
  echo "npm packages up to date in $dir"
  exit 0
fi
npm ci --prefix "$dir" --prefer-offline --no-audit --no-fund --ignore-scripts
cp "$dir/package-lock.json" "$stamp"
