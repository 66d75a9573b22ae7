#!/usr/bin/env bash
# Installs the Python tools the tests use as independent oracles (bip-utils: BIP32/BIP44 and
# address derivation) into a cached virtualenv under .cache/py. Idempotent; prints the python.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/py
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import bip_utils' >/dev/null 2>&1; then
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'bip-utils==2.12.3' >&2
fi
echo "$PWD/$VENV/bin/python"
