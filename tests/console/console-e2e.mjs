// Drives the operator console and the API console of a running `custody serve` in headless
// Chromium (Debian's build, through playwright-core), as an operator and a partner would.
// Run by tests/tests/console.rs, which starts the server and passes, in the environment:
//   CONSOLE_BASE          http://127.0.0.1:PORT
//   CONSOLE_ADMIN_KEY     an admin API key, CONSOLE_ADMIN_SECRET its secret,
//   CONSOLE_ADMIN_PIN     its PIN
//   CONSOLE_ALERT_ID      an open alert, CONSOLE_DEAD_EVENT_ID a dead-lettered webhook event
//   CONSOLE_SHOTS         folder for the screenshots
//   CUSTODY_PLAYWRIGHT_DIR  folder holding node_modules/playwright-core
//   CUSTODY_CHROMIUM      the browser (default /usr/bin/chromium)
// Prints one line per step and exits 0 only when every check passed.

import { createRequire } from "node:module";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const require = createRequire(path.join(env("CUSTODY_PLAYWRIGHT_DIR"), "node_modules", "x.js"));
const { chromium } = require("playwright-core");

const base = env("CONSOLE_BASE");
const admin = { key: env("CONSOLE_ADMIN_KEY"), secret: env("CONSOLE_ADMIN_SECRET"), pin: env("CONSOLE_ADMIN_PIN") };
const alertId = env("CONSOLE_ALERT_ID");
const deadEventId = env("CONSOLE_DEAD_EVENT_ID");
const shots = env("CONSOLE_SHOTS");
fs.mkdirSync(shots, { recursive: true });

const secrets = [admin.secret, admin.pin];
const consoleLines = [];
const pageErrors = [];
const foreignRequests = [];
const started = Date.now();
const step = (what) => process.stdout.write(`step (+${((Date.now() - started) / 1000).toFixed(1)} s): ${what}\n`);

function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

async function shot(page, name, fullPage = true) {
  const file = path.join(shots, `${name}.png`);
  await page.screenshot({ path: file, fullPage });
  process.stdout.write(`screenshot: ${file}\n`);
}

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "custody-console-chromium-"));
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: process.env.CUSTODY_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
  ],
  viewport: { width: 1280, height: 900 },
});

function watch(page) {
  page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  page.on("request", (r) => {
    const u = new URL(r.url());
    if (!["http:", "data:"].includes(u.protocol) || (u.protocol === "http:" && u.origin !== base)) {
      foreignRequests.push(r.url());
    }
  });
  page.setDefaultTimeout(15000);
  return page;
}

/** A screenshot of one part of a page (the API console's page is very long). */
async function shotOf(locator, name) {
  const file = path.join(shots, `${name}.png`);
  await locator.screenshot({ path: file });
  process.stdout.write(`screenshot: ${file}\n`);
}

const errorBox = (page) => page.locator("#error");

async function signIn(page, key, secret) {
  await page.fill("#sign-in-key", key);
  await page.fill("#sign-in-secret", secret);
  await page.click("#sign-in-submit");
}

async function fillFactors(page, prefix) {
  const pin = page.locator(`#${prefix}-pin`);
  if (await pin.count()) await pin.fill(admin.pin);
}

async function expectNoStorage(page) {
  const stored = await page.evaluate(() => ({
    local: localStorage.length,
    session: sessionStorage.length,
    cookie: document.cookie,
  }));
  check(stored.local === 0 && stored.session === 0 && stored.cookie === "",
    `nothing is stored in the browser: ${JSON.stringify(stored)}`);
}

/** Runs one operation of the API console ("Try it out") and returns the status and body shown. */
async function tryOperation(page, opId, { body, params = {} } = {}) {
  const block = page.locator(`[id$="-${opId}"].opblock`).first();
  await block.scrollIntoViewIfNeeded();
  if (!(await block.locator(".opblock-body").count())) {
    await block.locator(".opblock-summary").first().click();
  }
  if (!(await block.locator("button.execute").count())) {
    await block.locator("button.try-out__btn", { hasText: "Try it out" }).click();
  }
  for (const [name, value] of Object.entries(params)) {
    await block.locator(`tr[data-param-name="${name}"] input`).fill(value);
  }
  if (body !== undefined) {
    await block.locator("textarea.body-param__text").fill(JSON.stringify(body));
  }
  // Clear an earlier answer so the one read below is this request's.
  const clear = block.locator("button.btn-clear");
  if (await clear.count()) await clear.click();
  await block.locator("button.execute").click();
  const live = block.locator(".live-responses-table .response .response-col_status").first();
  await live.waitFor();
  const status = Number((await live.textContent()).trim().split(/\s/)[0]);
  const text = await block.locator(".live-responses-table .response-col_description pre").first().textContent();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch (e) {
    json = null;
  }
  // The request as sent (curl, signed headers) and the live answer, for the screenshots.
  return { status, json, text, block, answer: block.locator(".responses-inner > div").first() };
}

let failed = null;
try {
  const page = watch(await context.newPage());

  step("the sign-in page");
  await page.goto(`${base}/console/`);
  await page.waitForSelector("#sign-in-form");
  await shot(page, "01-sign-in");

  step("a wrong secret gives a clear message");
  await signIn(page, admin.key, "0".repeat(64));
  await errorBox(page).waitFor({ state: "visible" });
  const wrong = await errorBox(page).textContent();
  check(wrong.includes("AUTHENTICATION_FAILED") && wrong.includes("Sign-in failed")
    && /trace id [0-9a-f-]{36}/.test(wrong), `wrong-secret message: ${wrong}`);
  check(await page.locator("#sign-in-form").isVisible(), "still on the sign-in form");
  await shot(page, "02-sign-in-wrong-secret");

  step("sign in and see the dashboard");
  await signIn(page, admin.key, admin.secret);
  await page.waitForSelector("#dashboard-chains");
  check((await page.locator("#sign-in-secret").count()) === 0, "the sign-in form is gone");
  const dash = await page.locator("#page-dashboard").textContent();
  for (const figure of ["Pending withdrawals", "Open alerts", "Dead-lettered webhooks", "kill_switch.withdrawals", "Ledger liabilities"]) {
    check(dash.includes(figure), `the dashboard shows ${figure}`);
  }
  await shot(page, "03-dashboard");
  await expectNoStorage(page);

  step("the dashboard refreshes by itself");
  const firstStamp = await page.locator("#dashboard-updated").textContent();
  await page.waitForFunction(
    (before) => document.getElementById("dashboard-updated").textContent !== before,
    firstStamp,
    { timeout: 25000 },
  );

  step("create an API key for a tenant with scopes, rate limit and TOTP");
  await page.click("#nav-keys");
  await page.waitForSelector("#key-form");
  await page.fill("#key-tenant", "acme");
  for (const s of ["catalog-read", "wallets-read", "wallets-write", "withdrawals-write"]) {
    await page.check(`#key-scope-${s}`);
  }
  await page.fill("#key-rate-limit", "120");
  await page.check("#new-key-totp");
  await fillFactors(page, "create");
  await page.click("#key-submit");
  await page.waitForSelector("#created-key");
  const newKey = (await page.locator("#created-api-key").textContent()).trim();
  const newSecret = (await page.locator("#created-secret").textContent()).trim();
  const totpSecret = (await page.locator("#created-totp-secret").textContent()).trim();
  check(/^ck_[0-9a-f]{32}$/.test(newKey), `new api key ${newKey}`);
  check(/^[0-9a-f]{64}$/.test(newSecret), "the new secret is shown");
  check(/^[A-Z2-7]{32}$/.test(totpSecret), "the TOTP secret is shown");
  const qr = page.locator("#created-totp-qr");
  check((await qr.getAttribute("src")).startsWith("data:image/"), "the TOTP QR code is drawn in the page");
  check((await qr.evaluate((img) => img.naturalWidth)) > 100, "the QR code image has a size");
  secrets.push(newSecret, totpSecret);
  await page.locator("#keys-list").getByText(newKey).waitFor();
  await shot(page, "04-key-created-secret-shown-once");
  await page.click("#copy-secret");
  await page.click("#created-done");
  check((await page.locator("#created-key").count()) === 0, "the secret is gone from the page");
  check(!(await page.content()).includes(newSecret), "no trace of the secret in the page");

  step("reload: signed out; sign in again and see the key listed without its secret");
  await page.reload();
  await page.waitForSelector("#sign-in-form");
  await signIn(page, admin.key, admin.secret);
  await page.waitForSelector("#sign-out", { state: "visible" });
  await page.click("#nav-keys");
  await page.locator("#keys-list").getByText(newKey).waitFor();
  const listed = await page.content();
  check(!listed.includes(newSecret) && !listed.includes(totpSecret), "the listing holds no secret");
  const row = page.locator("#keys-list tr", { hasText: newKey });
  check((await row.textContent()).includes("acme") && (await row.textContent()).includes("active"), "the key's row");
  await shot(page, "05-keys-listed-without-secret");

  step("the API console: create a wallet with the new key");
  const api = watch(await context.newPage());
  await api.goto(`${base}/console/api`);
  await api.waitForSelector("#operations-Wallets-createWallet");
  check((await api.inputValue("#api-key")) === "" && (await api.inputValue("#api-secret")) === "", "nothing pre-filled");
  let r = await tryOperation(api, "createWallet", {
    body: { external_user_id: "console-user", network: "BSC" },
    params: { "Idempotency-Key": "console-wallet-0001" },
  });
  check(r.status === 401 && r.json && r.json.code === "AUTHENTICATION_FAILED", `unsigned request refused: ${r.text}`);
  await api.fill("#api-key", newKey);
  await api.fill("#api-secret", newSecret);
  await api.click("#api-key-use");
  await api.locator("#api-key-status").getByText(`signed as ${newKey}`).waitFor();
  check((await api.inputValue("#api-secret")) === "", "the secret field is emptied");
  r = await tryOperation(api, "createWallet", {
    body: { external_user_id: "console-user", network: "BSC" },
    params: { "Idempotency-Key": "console-wallet-0002" },
  });
  check(r.status === 201 && r.json && /^0x[0-9a-fA-F]{40}$/.test(r.json.address), `wallet created: ${r.text}`);
  const wallet = r.json;
  await shot(api, "06-api-console", false);
  await shotOf(r.answer, "06-api-console-wallet-created");
  await expectNoStorage(api);

  step("turn kill_switch.withdrawals on (reason, PIN) and see the audit trail beside it");
  await page.click("#nav-controls");
  await page.click("#control-toggle-kill_switch\\.withdrawals");
  await page.fill("#control-reason", "console test: stop withdrawals");
  await fillFactors(page, "control");
  await page.click("#control-submit");
  await page.locator("#control-state-kill_switch\\.withdrawals", { hasText: "ON" }).waitFor();
  await page.locator("#controls-audit").getByText("console test: stop withdrawals").waitFor();
  await shot(page, "07-controls-kill-switch-on");

  step("a withdrawal quote is refused while the switch is on");
  r = await tryOperation(api, "quoteWithdrawal", {
    body: {
      external_user_id: "console-user", network: "BSC", asset: "BNB",
      destination_address: wallet.address, amount_units: "1000000000000000",
    },
  });
  check(r.status === 503 && r.json && r.json.code === "KILL_SWITCH_ACTIVE", `quote refused: ${r.text}`);
  await shotOf(r.answer, "08-api-console-quote-refused");

  step("read the audit record");
  await page.goto(`${base}/console/#/list/audit`);
  await page.waitForSelector("#listing-audit table");
  const audit = await page.locator("#listing-audit").textContent();
  check(audit.includes("control.update") && audit.includes("kill_switch.withdrawals")
    && audit.includes("console test: stop withdrawals"), "the control change is audited");
  check(audit.includes("credential.create") && audit.includes(newKey), "the key creation is audited");
  check(!audit.includes(newSecret), "no secret in the audit");
  await shot(page, "09-audit");

  step("revoke the key and see it refused");
  await page.click("#nav-keys");
  await page.locator(`#keys-list button.revoke[data-api-key="${newKey}"]`).click();
  await page.fill("#revoke-reason", "console test: done");
  await fillFactors(page, "revoke");
  await page.click("#revoke-submit");
  await page.locator("#keys-list tr", { hasText: newKey }).getByText("revoked").waitFor();
  await shot(page, "10-key-revoked");
  r = await tryOperation(api, "createWallet", {
    body: { external_user_id: "console-user-2", network: "BSC" },
    params: { "Idempotency-Key": "console-wallet-0003" },
  });
  check(r.status === 401 && r.json.code === "AUTHENTICATION_FAILED", `revoked key refused: ${r.text}`);
  await shotOf(r.answer, "11-api-console-revoked-key-refused");

  step("errors show code, message and trace id");
  // No scope ticked and not admin: the server refuses (the browser cannot know this rule).
  await page.fill("#key-tenant", "acme");
  await fillFactors(page, "create");
  await page.click("#key-submit");
  await errorBox(page).waitFor({ state: "visible" });
  const err = await errorBox(page).textContent();
  check(err.includes("VALIDATION_FAILED") && /trace id [0-9a-f-]{36}/.test(err)
    && err.includes("scopes: must name at least one scope"), `validation error shown: ${err}`);
  await shot(page, "12-error-shown");

  step("reconciliations: trigger LEDGER and see its result");
  await page.click("#nav-reconciliations");
  await page.selectOption("#reconcile-scope", "LEDGER");
  await fillFactors(page, "reconcile");
  await page.click("#reconcile-submit");
  await page.locator("#page-reconciliations .ok").waitFor();
  let completed = false;
  for (let i = 0; i < 60 && !completed; i += 1) {
    await page.locator("#reconciliations-list button.refresh").click();
    await page.waitForTimeout(500);
    completed = (await page.locator("#reconciliations-list").textContent()).includes("completed");
  }
  check(completed, "the reconciliation completed and its result is listed");
  await shot(page, "13-reconciliations");

  step("alerts: acknowledge one");
  await page.click("#nav-alerts");
  await page.locator(`#alerts-list tr[data-id="${alertId}"] button.ack`).click();
  await page.fill("#ack-reason", "console test: seen");
  await fillFactors(page, "ack");
  await page.click("#ack-submit");
  await page.locator(`#alerts-list tr[data-id="${alertId}"]`).getByText("by credential:").waitFor();
  await shot(page, "14-alerts");

  step("webhooks: replay the dead-lettered event");
  await page.click("#nav-webhooks");
  await page.locator(`#webhooks-list tr[data-id="${deadEventId}"] button.replay`).waitFor();
  await shot(page, "15-webhooks-dead-lettered");
  await fillFactors(page, "replay");
  await page.locator(`#webhooks-list tr[data-id="${deadEventId}"] button.replay`).click();
  await page.locator("#page-webhooks .ok").waitFor();
  await page.uncheck("#webhooks-dead-only");
  await page.locator(`#webhooks-list tr[data-id="${deadEventId}"]`).getByText("pending").waitFor();
  await shot(page, "16-webhooks-replayed");

  step("turn kill_switch.withdrawals off again");
  await page.click("#nav-controls");
  await page.click("#control-toggle-kill_switch\\.withdrawals");
  await page.fill("#control-reason", "console test: resume withdrawals");
  await fillFactors(page, "control");
  await page.click("#control-submit");
  await page.locator("#control-state-kill_switch\\.withdrawals", { hasText: "off" }).waitFor();

  step("every admin listing, with paging");
  await page.click("#nav-lists");
  for (const resource of ["networks", "assets", "rpcs", "treasuries", "fee-policies", "transactions",
    "withdrawals", "swaps", "sweeps", "wallet-migrations", "treasury-fundings", "alerts", "webhooks",
    "reconciliations", "audit"]) {
    await page.goto(`${base}/console/#/list/${resource}`);
    const holder = page.locator(`#listing-${resource}`);
    await holder.locator(".pager-status").getByText("page 1").waitFor();
    check(!(await errorBox(page).isVisible()), `${resource} loads without error`);
  }
  // Paging by starting_after: the audit trail holds more than 5 records by now.
  await page.goto(`${base}/console/#/list/audit`);
  const auditList = page.locator("#listing-audit");
  await auditList.locator("table").waitFor();
  const everything = await auditList.locator("tbody tr").count();
  check(everything > 5, `more than 5 audit records: ${everything}`);
  await auditList.locator("select.page-size").selectOption("5");
  await auditList.locator(".pager-status").getByText("page 1, 5 row(s), more follow").waitFor();
  const firstPage = await auditList.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.textContent));
  await auditList.locator("button.next-page").click();
  await auditList.locator(".pager-status").getByText("page 2").waitFor();
  const secondPage = await auditList.locator("tbody tr").evaluateAll((rows) => rows.map((r) => r.textContent));
  check(secondPage.length === Math.min(5, everything - 5), `page 2 holds the rest: ${secondPage.length}`);
  check(!secondPage.some((row) => firstPage.includes(row)), "no row on both pages");
  await shot(page, "17-listing-audit-page-2");
  await page.goto(`${base}/console/#/lists`);
  await page.waitForSelector("#list-link-audit");
  await shot(page, "18-all-listings");

  step("the page never stored or logged a secret, and asked no other host");
  await expectNoStorage(page);
  for (const line of consoleLines) {
    for (const s of secrets) check(!line.includes(s), `a secret in the browser console: ${line}`);
  }
  check(pageErrors.length === 0, `no script errors: ${pageErrors.join(" | ")}`);
  check(foreignRequests.length === 0, `no request left this server: ${foreignRequests.join(" ")}`);
  const csp = consoleLines.filter((l) => l.includes("Content Security Policy"));
  check(csp.length === 0, `no Content-Security-Policy violation: ${csp.join(" | ")}`);
  process.stdout.write(`screenshots in ${shots}\n`);
  process.stdout.write("console e2e: ok\n");
} catch (e) {
  failed = e;
  process.stdout.write(`FAILED: ${e && e.stack ? e.stack : e}\n`);
  process.stdout.write(`browser console:\n${consoleLines.join("\n")}\n`);
  try {
    for (const p of context.pages()) {
      await p.screenshot({ path: path.join(shots, `failure-${context.pages().indexOf(p)}.png`), fullPage: true });
    }
  } catch (_) {
    // The failure is reported above; a screenshot that cannot be taken adds nothing.
  }
} finally {
  await context.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
