// The operator console: sign-in, navigation and the session. Plain ES modules, no framework
// and no build step: the files served are the files reviewed, and nothing runs that this
// server did not send.
//
// The session is one JS object in this module: the API key and a non-extractable HMAC key
// made from the secret. It is never stored (no web storage, no cookie, no database of the
// browser): reloading the page signs out.

import { ApiError, createClient, cryptoAvailable, importSecret } from "./client.js";
import { clearError, h, showError } from "./ui.js";
import { PAGES, NAV } from "./pages.js";

let session = null;
let stopPage = null;

const main = document.getElementById("main");
const signInSection = document.getElementById("sign-in");
const nav = document.getElementById("nav");
const who = document.getElementById("who");
const signOutButton = document.getElementById("sign-out");

/**
 * What the signed-in key needs on mutations: { pin, totp }, or null when its row is not found.
 * The first request also proves the key: the credentials listing answers admins only.
 */
async function ownFactors(client) {
  let after = null;
  for (let pages = 0; pages < 20; pages += 1) {
    const q = after ? `&starting_after=${after}` : "";
    const { data } = await client.request("GET", `/v1/admin/credentials?limit=100${q}`);
    const mine = data.data.find((c) => c.api_key === client.apiKey);
    if (mine) return { pin: mine.pin, totp: mine.totp };
    if (!data.has_more || !data.data.length) return null;
    after = data.data[data.data.length - 1].id;
  }
  return null;
}

function signInMessage(err) {
  switch (err.code) {
    case "AUTHENTICATION_FAILED":
      return "Sign-in failed: this API key and secret do not match an active credential. Check both and paste them again.";
    case "FORBIDDEN":
      return "Sign-in failed: this key is valid but is not an admin key; the console needs an admin key.";
    case "TIMESTAMP_OUT_OF_WINDOW":
      return "Sign-in failed: this computer's clock is more than 5 minutes away from the server's.";
    case "RATE_LIMITED":
      return "Sign-in failed: this key's rate limit is reached; retry in a minute.";
    case "NETWORK_ERROR":
      return "Sign-in failed: the server could not be reached.";
    default:
      return `Sign-in failed: ${err.message}`;
  }
}

async function signIn(event) {
  event.preventDefault();
  clearError();
  const keyInput = document.getElementById("sign-in-key");
  const secretInput = document.getElementById("sign-in-secret");
  const apiKey = keyInput.value.trim();
  const secret = secretInput.value.trim();
  // The field is emptied at once: the secret lives on only inside the signing key.
  secretInput.value = "";
  if (!cryptoAvailable()) {
    showError(new ApiError(0, "INSECURE_CONTEXT",
      "this browser offers WebCrypto only on https or on localhost: open the console through TLS or an SSH tunnel"));
    return;
  }
  const button = document.getElementById("sign-in-submit");
  button.disabled = true;
  try {
    const client = createClient(apiKey, await importSecret(secret));
    const factors = await ownFactors(client);
    session = { client, factors };
    keyInput.value = "";
    showSignedIn();
  } catch (err) {
    const e = err instanceof ApiError ? err : new ApiError(0, "ERROR", String(err), null);
    showError(new ApiError(e.status, e.code, signInMessage(e), e.traceId, e.details));
  } finally {
    button.disabled = false;
  }
}

function signOut() {
  if (stopPage) stopPage();
  stopPage = null;
  session = null;
  nav.hidden = true;
  nav.replaceChildren();
  who.textContent = "";
  signOutButton.hidden = true;
  main.replaceChildren(signInSection);
  clearError();
  if (location.hash) history.replaceState(null, "", location.pathname);
}

function showSignedIn() {
  nav.replaceChildren(...NAV.map(([hash, label]) =>
    h("a", { href: `#${hash}`, id: `nav-${hash.replace(/[^a-z0-9]+/gi, "-").replace(/^-|-$/g, "")}` }, label)));
  nav.hidden = false;
  who.textContent = `Signed in as ${session.client.apiKey}`;
  signOutButton.hidden = false;
  if (!location.hash || location.hash === "#") location.hash = "#/dashboard";
  else route();
}

function route() {
  if (!session) return;
  if (stopPage) stopPage();
  stopPage = null;
  clearError();
  const hash = location.hash.replace(/^#/, "") || "/dashboard";
  const [, name, arg] = hash.match(/^\/([a-z-]+)(?:\/([a-z-]+))?/) || [];
  const page = PAGES[name] || PAGES.dashboard;
  for (const a of nav.querySelectorAll("a")) {
    a.classList.toggle("current", a.getAttribute("href") === `#${hash}`);
  }
  const section = h("section", { class: "page", id: `page-${name || "dashboard"}` });
  main.replaceChildren(section);
  stopPage = page(section, session, arg) || null;
}

document.getElementById("sign-in-form").addEventListener("submit", signIn);
signOutButton.addEventListener("click", signOut);
window.addEventListener("hashchange", route);
