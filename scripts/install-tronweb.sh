#!/usr/bin/env bash
# Installs TronWeb (the TRON Foundation's JavaScript SDK, npm package `tronweb`) into
# .cache/node (gitignored), for the transaction-encoding oracle test of custody-chain-tron
# (custody-chain-tron/tests/oracle.rs runs custody-chain-tron/tests/oracle/build.js with it).
# Idempotent: when the pinned version is already there it only prints the folder.
#
# Prints one line on stdout: the absolute path of the folder to export as CUSTODY_NODE_DIR
# (the one holding node_modules/). Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

TRONWEB_VERSION="6.5.1"
PREFIX="$PWD/.cache/node"
MODULES="$PREFIX/node_modules"

installed_version() {
  # The "version" field of an installed package.json, or nothing.
  local manifest="$MODULES/$1/package.json"
  [ -f "$manifest" ] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$manifest"
}

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-tronweb.sh: node and npm are needed (apt-get install nodejs npm)" >&2
  exit 1
fi

if [ "$(installed_version tronweb)" != "$TRONWEB_VERSION" ]; then
  echo "== installing tronweb@$TRONWEB_VERSION into $PREFIX" >&2
  mkdir -p "$PREFIX"
  # Saved (exact) in .cache/node/package.json: other scripts share this folder (anvil), and
  # npm prunes on install whatever that file does not list.
  npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error \
    "tronweb@$TRONWEB_VERSION" >&2
fi

node -e 'require(process.argv[1])' "$MODULES/tronweb" || {
  echo "install-tronweb.sh: $MODULES/tronweb does not load" >&2
  exit 1
}
echo "$PREFIX"
