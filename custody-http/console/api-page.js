// The API console (decisions §15): the service's OpenAPI document rendered by Swagger UI
// (vendored, served by this binary). Swagger's requestInterceptor, which may return a Promise,
// signs each "Try it out" request in the browser over the exact body it sends, with the key
// typed into the form above; the secret is kept only as a non-extractable WebCrypto key.

import { cryptoAvailable, importSecret, signatureHeaders } from "./client.js";
import { showError, clearError } from "./ui.js";

let signing = null;

const encoder = new TextEncoder();
const keyInput = document.getElementById("api-key");
const secretInput = document.getElementById("api-secret");
const statusLine = document.getElementById("api-key-status");

function header(headers, name) {
  const found = Object.keys(headers || {}).find((k) => k.toLowerCase() === name.toLowerCase());
  return found ? headers[found] : undefined;
}

/** Adds the authentication headers to a request Swagger UI is about to send. */
async function signRequest(req) {
  if (!signing) return req;
  const url = new URL(req.url, location.href);
  // Only requests to this service are signed: a key never signs for another origin.
  if (url.origin !== location.origin || !url.pathname.startsWith("/v1/")) return req;
  let body = req.body;
  if (body === undefined || body === null) {
    body = "";
  } else if (typeof body !== "string") {
    body = JSON.stringify(body);
    req.body = body;
  }
  const method = (req.method || "GET").toUpperCase();
  const idempotencyKey = header(req.headers, "Idempotency-Key") || "";
  const signed = await signatureHeaders(
    signing.hmacKey, signing.apiKey, method, url.pathname, encoder.encode(body), idempotencyKey,
  );
  req.headers = { ...(req.headers || {}), ...signed };
  return req;
}

document.getElementById("api-key-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  clearError();
  const apiKey = keyInput.value.trim();
  const secret = secretInput.value.trim();
  secretInput.value = "";
  if (!cryptoAvailable()) {
    showError({ code: "INSECURE_CONTEXT", message: "this browser offers WebCrypto only on https or on localhost" });
    return;
  }
  signing = { apiKey, hmacKey: await importSecret(secret) };
  statusLine.textContent = `Requests are signed as ${apiKey}.`;
});

document.getElementById("api-key-forget").addEventListener("click", () => {
  signing = null;
  keyInput.value = "";
  secretInput.value = "";
  statusLine.textContent = "Requests are not signed: the API answers 401.";
});

async function start() {
  let spec;
  try {
    const r = await fetch("/v1/openapi.json", { credentials: "omit", cache: "no-store" });
    spec = await r.json();
  } catch (e) {
    showError({ code: "NETWORK_ERROR", message: "the OpenAPI document could not be loaded" });
    return;
  }
  // "Try it out" goes to this server, whatever address it was reached at.
  spec.servers = [{ url: `${location.origin}/v1`, description: "this server" }];
  window.SwaggerUIBundle({
    spec,
    dom_id: "#swagger",
    deepLinking: false,
    persistAuthorization: false,
    withCredentials: false,
    displayRequestDuration: true,
    tryItOutEnabled: false,
    validatorUrl: null,
    requestInterceptor: signRequest,
  });
}

start();
