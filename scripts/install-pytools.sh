#!/usr/bin/env bash
# Installs the Python tools the tests use into a cached virtualenv under .cache/py: bip-utils
# (an independent oracle for BIP32/BIP44 and address derivation) and schemathesis (the API
# fuzzer of tests/tests/api_fuzz.rs). Pinned; idempotent; prints the python.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/py
if [ ! -x "$VENV/bin/python" ] \
  || ! "$VENV/bin/python" -c 'import bip_utils' >/dev/null 2>&1 \
  || [ "$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" != "4.32.5" ]; then
  python3 -m venv "$VENV" >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    'bip-utils==2.12.3' 'schemathesis==4.32.5' >&2
fi
echo "$PWD/$VENV/bin/python"
