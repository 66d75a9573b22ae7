#!/usr/bin/env bash
# Starts the service locally: a data dir under .custody-dev (created on first run with an
# insecure development seed), a printed demo credential, and the server on 127.0.0.1:8080.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${CUSTODY_DATA_DIR:-.custody-dev}"
cargo build --release -p custody-cli --bin custody
BIN=target/release/custody
if [ ! -f "$DIR/custody.toml" ]; then
  "$BIN" --data-dir "$DIR" init --insecure-dev-seed
  "$BIN" --data-dir "$DIR" credentials create --tenant demo > "$DIR/demo-credential.json"
fi
echo "Demo credential (also in $DIR/demo-credential.json):"
cat "$DIR/demo-credential.json"
exec "$BIN" --data-dir "$DIR" serve --listen "${CUSTODY_LISTEN:-127.0.0.1:8080}"
