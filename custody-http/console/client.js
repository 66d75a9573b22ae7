// Signed requests from the browser (interface §5), shared by the operator console and the API
// console. The secret is turned at once into a non-extractable WebCrypto HMAC key: neither
// this module nor anything else keeps the secret string, and the key cannot be read back, only
// used to sign. Nothing is written to storage and nothing is logged.

const encoder = new TextEncoder();

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** WebCrypto exists only in secure contexts (https, or http on localhost / 127.0.0.1). */
export function cryptoAvailable() {
  return Boolean(globalThis.crypto && globalThis.crypto.subtle);
}

/** The HMAC-SHA256 key of a secret: its UTF-8 bytes, as the server uses them. */
export async function importSecret(secret) {
  return crypto.subtle.importKey(
    "raw",
    encoder.encode(secret),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
}

/** 32 hex characters from the browser's CSPRNG (the contract wants 16 to 128). */
export function newNonce() {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return hex(bytes);
}

/**
 * The four authentication headers for one request. `path` includes /v1 and no query;
 * `body` is the exact bytes sent (empty for GET); `idempotencyKey` is "" when none is sent.
 */
export async function signatureHeaders(hmacKey, apiKey, method, path, body, idempotencyKey) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const nonce = newNonce();
  const bodyHash = hex(await crypto.subtle.digest("SHA-256", body));
  const canonical = [method, path, timestamp, nonce, idempotencyKey || "", bodyHash].join("\n");
  const signature = hex(await crypto.subtle.sign("HMAC", hmacKey, encoder.encode(canonical)));
  return {
    "X-Service-Key": apiKey,
    "X-Service-Timestamp": timestamp,
    "X-Service-Nonce": nonce,
    "X-Service-Signature": signature,
  };
}

/** An error answer of the API (decisions §7), or a failure to reach it. */
export class ApiError extends Error {
  constructor(status, code, message, traceId, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.traceId = traceId;
    this.details = details || [];
  }
}

/**
 * A client that signs every request with `hmacKey` for `apiKey`. `request` resolves to the
 * parsed JSON answer (and its response) or rejects with an ApiError.
 */
export function createClient(apiKey, hmacKey) {
  async function request(method, target, { body, idempotencyKey, pin, otp } = {}) {
    const url = new URL(target, location.origin);
    const bytes = body === undefined ? new Uint8Array() : encoder.encode(JSON.stringify(body));
    const headers = await signatureHeaders(
      hmacKey,
      apiKey,
      method,
      url.pathname,
      bytes,
      idempotencyKey || "",
    );
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (idempotencyKey) headers["Idempotency-Key"] = idempotencyKey;
    if (pin) headers["X-Service-Pin"] = pin;
    if (otp) headers["X-Service-OTP"] = otp;
    let response;
    try {
      response = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : bytes,
        credentials: "omit",
        cache: "no-store",
        redirect: "error",
      });
    } catch (e) {
      throw new ApiError(0, "NETWORK_ERROR", "the server could not be reached", null, []);
    }
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (e) {
      data = null;
    }
    if (!response.ok) {
      const traceId = (data && data.trace_id) || response.headers.get("X-Trace-Id");
      throw new ApiError(
        response.status,
        (data && data.code) || `HTTP_${response.status}`,
        (data && data.message) || response.statusText || "request failed",
        traceId,
        data && data.details,
      );
    }
    return { data, response };
  }
  return { apiKey, request };
}
