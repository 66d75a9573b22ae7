#!/usr/bin/env bash
# Starts the service locally: a data dir under .custody-dev (created on first run with an
# insecure development seed), a printed demo credential and admin credential (for the console
# at http://127.0.0.1:8080/console/), and the server on 127.0.0.1:8080.
#
# With --devnet: a local BSC chain as well (anvil, the catalog tokens and PancakeSwap V2 at their
# mainnet addresses with seeded pools, the hot wallet funded) and the service configured against
# it, in a fresh data dir .custody-devnet; the commands to deposit, swap and withdraw are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p custody-cli --bin custody
BIN=target/release/custody
if [ "${1:-}" = "--devnet" ]; then
  CUSTODY_ANVIL_BIN=$(./scripts/install-anvil.sh)
  CUSTODY_BIN="$PWD/$BIN"
  export CUSTODY_ANVIL_BIN CUSTODY_BIN
  cargo build --release -p custody-e2e --bin devnet
  exec target/release/devnet up "${CUSTODY_DATA_DIR:-.custody-devnet}" "${CUSTODY_LISTEN:-127.0.0.1:8080}"
fi
DIR="${CUSTODY_DATA_DIR:-.custody-dev}"
if [ ! -f "$DIR/custody.toml" ]; then
  "$BIN" --data-dir "$DIR" init --insecure-dev-seed
  "$BIN" --data-dir "$DIR" credentials create --tenant demo > "$DIR/demo-credential.json"
fi
if [ ! -f "$DIR/admin-credential.json" ]; then
  "$BIN" --data-dir "$DIR" credentials create --tenant ops --admin > "$DIR/admin-credential.json"
fi
echo "Demo credential (also in $DIR/demo-credential.json):"
cat "$DIR/demo-credential.json"
echo "Admin credential for the console at http://${CUSTODY_LISTEN:-127.0.0.1:8080}/console/ (also in $DIR/admin-credential.json):"
cat "$DIR/admin-credential.json"
exec "$BIN" --data-dir "$DIR" serve --listen "${CUSTODY_LISTEN:-127.0.0.1:8080}"
