#!/usr/bin/env bash
# Sends one signed request with curl. Usage:
#   scripts/signed-curl.sh CREDENTIAL_JSON METHOD PATH [BODY] [IDEMPOTENCY_KEY]
# e.g. scripts/signed-curl.sh .custody-dev/demo-credential.json GET /v1/assets?network=BSC
set -euo pipefail
cred="$1" method="$2" target="$3" body="${4:-}" idem="${5:-}"
base="${CUSTODY_URL:-http://127.0.0.1:8080}"
key=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["api_key"])' "$cred")
secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hmac_secret"])' "$cred")
path="${target%%\?*}"
ts=$(date +%s)
nonce=$(openssl rand -hex 16)
body_hash=$(printf '%s' "$body" | sha256sum | cut -d' ' -f1)
canonical=$(printf '%s\n%s\n%s\n%s\n%s\n%s' "$method" "$path" "$ts" "$nonce" "$idem" "$body_hash")
sig=$(printf '%s' "$canonical" | openssl dgst -sha256 -hmac "$secret" -hex | sed 's/^.*= //')
args=(-sS -X "$method" "$base$target" -H "X-Service-Key: $key" -H "X-Service-Timestamp: $ts"
      -H "X-Service-Nonce: $nonce" -H "X-Service-Signature: $sig")
[ -n "$idem" ] && args+=(-H "Idempotency-Key: $idem")
[ -n "$body" ] && args+=(-H "Content-Type: application/json" --data-binary "$body")
curl "${args[@]}"
echo
