#!/usr/bin/env bash
# Runs every check and test of the project on a fresh machine: formatting, lints, the purity
# of custody-core, then the whole test suite (unit, property, store conformance, end to end).
# Installs what the tests need by itself.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== rustfmt"
cargo fmt --all -- --check

echo "== clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

echo "== custody-core stays pure (no runtime, HTTP or database crate)"
leaks=$(cargo tree -p custody-core -e normal --prefix none --locked \
  | grep -oE '^(tokio|hyper|hyper-util|rusqlite|libsqlite3-sys|reqwest|tokio-postgres|sqlx|mio) ' | sort -u || true)
if [ -n "$leaks" ]; then
  echo "custody-core depends on I/O crates: $leaks" >&2
  exit 1
fi

echo "== no stray files tracked (merge leftovers, editor backups)"
stray=$(git ls-files | grep -E '\.(orig|rej|swp|swo|bak)$|~$|(^|/)\.#|(^|/)#[^/]*#$' || true)
if [ -n "$stray" ]; then
  echo "stray files are tracked: $stray" >&2
  exit 1
fi

echo "== no unused dependencies (cargo-machete)"
"$(./scripts/install-cargo-machete.sh)"

echo "== the API documentation builds without a warning"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet

echo "== test oracles (bip-utils)"
CUSTODY_PYTHON=$(./scripts/install-pytools.sh)
export CUSTODY_PYTHON

echo "== local EVM node (anvil) and the OpenZeppelin test token"
CUSTODY_ANVIL_BIN=$(./scripts/install-anvil.sh)
CUSTODY_OZ_DIR="$PWD/.cache/node/node_modules/@openzeppelin/contracts"
export CUSTODY_ANVIL_BIN CUSTODY_OZ_DIR

echo "== TRON encoding oracle (TronWeb)"
CUSTODY_NODE_DIR=$(./scripts/install-tronweb.sh)
export CUSTODY_NODE_DIR

echo "== browser for the console tests (Chromium, playwright-core)"
CUSTODY_PLAYWRIGHT_DIR=$(./scripts/install-playwright.sh)
export CUSTODY_PLAYWRIGHT_DIR

echo "== PostgreSQL (the shared store) and a database of this run's own"
# PostgreSQL serves 127.0.0.1:5432 with trust auth for user postgres; start it (installing it on
# a machine that has none) when it is not running. Each test then works in a schema of its own
# inside this run's database, which is dropped at the end.
if ! pg_isready -q -h 127.0.0.1; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    pg_version=$(ls /etc/postgresql | head -1)
    sed -i -E 's#^(host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+)[a-z0-9-]+#\1trust#' \
      "/etc/postgresql/$pg_version/main/pg_hba.conf"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  for _ in $(seq 30); do pg_isready -q -h 127.0.0.1 && break; sleep 1; done
fi
test_db="custody_test_$$"
psql -h 127.0.0.1 -U postgres -q -c "CREATE DATABASE $test_db"
trap 'psql -h 127.0.0.1 -U postgres -q -c "DROP DATABASE IF EXISTS $test_db WITH (FORCE)" || true' EXIT
export CUSTODY_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/$test_db"

echo "== embedding the core: the example runs"
cargo run --locked --quiet -p custody-examples --example embed_sqlite

echo "== tests"
log=$(mktemp)
set +e
cargo test --workspace --locked --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# cargo ends on the last crate's doc-tests (often "0 passed"): close with the totals instead.
passed=$(grep -E '^test result:' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -E '^test result:' "$log" | awk '{s += $6} END {print s + 0}')
rm -f "$log"
echo "tests: $passed passed, $failed failed"
exit "$status"
