#!/usr/bin/env bash
# Installs cargo-machete (the unused-dependency check of scripts/test.sh) into
# .cache/cargo-tools (gitignored), built from crates.io at a pinned version. Idempotent: when
# that version is already there it only prints the path.
#
# Prints one line on stdout: the absolute path of the binary. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="0.9.2"
ROOT="$PWD/.cache/cargo-tools"
BIN="$ROOT/bin/cargo-machete"

if [ ! -x "$BIN" ] || ! "$BIN" --version 2>/dev/null | grep -q "$VERSION"; then
  echo "== installing cargo-machete $VERSION into $ROOT" >&2
  cargo install --quiet --locked --version "$VERSION" --root "$ROOT" cargo-machete >&2
fi
echo "$BIN"
