#!/usr/bin/env bash
# Installs what the console tests (tests/tests/console.rs) drive a browser with: Debian's
# `chromium` (apt-get, when /usr/bin/chromium is missing) and Playwright's driver library
# `playwright-core` from npm into .cache/playwright (gitignored; its own folder, so npm's
# pruning of .cache/node never touches it). `npx playwright install` is not used: it downloads
# browsers from a CDN; the tests launch the Debian build through `executablePath`.
# Idempotent: when both are there it only prints the folder.
#
# Prints one line on stdout: the absolute path of the folder to export as
# CUSTODY_PLAYWRIGHT_DIR (the one holding node_modules/). Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

PLAYWRIGHT_VERSION="1.65.1"
PREFIX="$PWD/.cache/playwright"
MODULES="$PREFIX/node_modules"

if [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium (Debian)" >&2
  if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y chromium >&2
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-playwright.sh: node and npm are needed (apt-get install nodejs npm)" >&2
  exit 1
fi

installed=""
if [ -f "$MODULES/playwright-core/package.json" ]; then
  installed=$(node -e 'process.stdout.write(require(process.argv[1]).version)' \
    "$MODULES/playwright-core/package.json")
fi
if [ "$installed" != "$PLAYWRIGHT_VERSION" ]; then
  echo "== installing playwright-core@$PLAYWRIGHT_VERSION into $PREFIX" >&2
  mkdir -p "$PREFIX"
  npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error \
    "playwright-core@$PLAYWRIGHT_VERSION" >&2
fi

node -e 'require(process.argv[1])' "$MODULES/playwright-core" || {
  echo "install-playwright.sh: $MODULES/playwright-core does not load" >&2
  exit 1
}
echo "$PREFIX"
