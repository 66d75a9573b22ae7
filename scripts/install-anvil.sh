#!/usr/bin/env bash
# Installs what the BSC tests need into .cache/node (gitignored): the anvil local EVM node
# (npm package @foundry-rs/anvil-linux-amd64, which ships the binary), the compiled
# OpenZeppelin contracts (the ERC20 test token's bytecode) and the Uniswap V2 contracts as npm
# ships them (@uniswap/v2-core: factory and pair; @uniswap/v2-periphery: Router02 and WETH9,
# which stands in for WBNB). Idempotent: when every pinned version is already there it only
# prints the binary path.
#
# Prints one line on stdout: the absolute path of the anvil binary. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

ANVIL_PKG="@foundry-rs/anvil-linux-amd64"
ANVIL_VERSION="1.7.1"
OZ_PKG="@openzeppelin/contracts"
OZ_VERSION="4.9.6"
UNI_CORE_PKG="@uniswap/v2-core"
UNI_CORE_VERSION="1.0.1"
UNI_PERIPHERY_PKG="@uniswap/v2-periphery"
UNI_PERIPHERY_VERSION="1.1.0-beta.0"

PREFIX="$PWD/.cache/node"
MODULES="$PREFIX/node_modules"
ANVIL_BIN="$MODULES/$ANVIL_PKG/bin/anvil"
OZ_ARTIFACT="$MODULES/$OZ_PKG/build/contracts/ERC20PresetMinterPauser.json"

installed_version() {
  # The "version" field of an installed package.json, or nothing.
  local manifest="$MODULES/$1/package.json"
  [ -f "$manifest" ] || return 0
  node -e 'process.stdout.write(require(process.argv[1]).version)' "$manifest"
}

if [ "$(installed_version "$ANVIL_PKG")" != "$ANVIL_VERSION" ] ||
  [ "$(installed_version "$OZ_PKG")" != "$OZ_VERSION" ] ||
  [ "$(installed_version "$UNI_CORE_PKG")" != "$UNI_CORE_VERSION" ] ||
  [ "$(installed_version "$UNI_PERIPHERY_PKG")" != "$UNI_PERIPHERY_VERSION" ] ||
  [ ! -x "$ANVIL_BIN" ] || [ ! -f "$OZ_ARTIFACT" ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) ;;
    *) echo "install-anvil.sh: $ANVIL_PKG only runs on Linux x86_64" >&2; exit 1 ;;
  esac
  echo "== installing $ANVIL_PKG@$ANVIL_VERSION and $OZ_PKG@$OZ_VERSION into $PREFIX" >&2
  mkdir -p "$PREFIX"
  # Saved (exact) in .cache/node/package.json: other scripts share this folder (TronWeb), and
  # npm prunes on install whatever that file does not list.
  npm install --prefix "$PREFIX" --save-exact --no-audit --no-fund --loglevel=error \
    "$ANVIL_PKG@$ANVIL_VERSION" "$OZ_PKG@$OZ_VERSION" \
    "$UNI_CORE_PKG@$UNI_CORE_VERSION" "$UNI_PERIPHERY_PKG@$UNI_PERIPHERY_VERSION" >&2
  chmod +x "$ANVIL_BIN"
fi

"$ANVIL_BIN" --version >/dev/null || {
  echo "install-anvil.sh: $ANVIL_BIN does not run" >&2
  exit 1
}
echo "$ANVIL_BIN"
