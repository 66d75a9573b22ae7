// The pages of the operator console. Each takes its section, the session and an optional
// argument from the address (#/list/audit), fills the section, and may return a function that
// stops what it started (the dashboard's refresh timer).

import { ApiError } from "./client.js";
import qrcode from "./vendor/qrcode.mjs";
import {
  autoColumns, cellText, clearError, copyButton, factorInputs, flash, formatTime, h, showError, table,
} from "./ui.js";

/** Every name of `/admin/{resource}` (interface §4). */
const RESOURCES = [
  "networks", "assets", "rpcs", "treasuries", "fee-policies", "reconciliations", "audit",
  "alerts", "transactions", "withdrawals", "swaps", "sweeps", "webhooks", "wallet-migrations",
  "treasury-fundings",
];

const SCOPES = [
  "catalog:read", "wallets:read", "wallets:write", "deposits:read", "withdrawals:read",
  "withdrawals:write", "swaps:read", "swaps:write", "transfers:write",
];

export const NAV = [
  ["/dashboard", "Dashboard"],
  ["/controls", "Controls"],
  ["/reconciliations", "Reconciliations"],
  ["/alerts", "Alerts"],
  ["/keys", "API keys"],
  ["/webhooks", "Webhooks"],
  ["/list/audit", "Audit"],
  ["/lists", "All listings"],
];

const DASHBOARD_REFRESH_MS = 10000;

function newIdempotencyKey() {
  return `console-${crypto.randomUUID()}`;
}

/**
 * A listing with paging by `starting_after` (decisions §14): "Next page" starts after the
 * last row shown, "First page" goes back. `columns` null shows every field.
 */
function pagedList(container, session, resourcePath, { columns = null, limit = 50, id, filter } = {}) {
  const holder = h("div", { class: "listing", id });
  const status = h("p", { class: "muted pager-status" });
  const first = h("button", { type: "button", class: "first-page" }, "First page");
  const next = h("button", { type: "button", class: "next-page" }, "Next page");
  const refresh = h("button", { type: "button", class: "refresh" }, "Refresh");
  const sizes = [...new Set([5, 20, 50, 100, limit])].sort((a, b) => a - b);
  const size = h("select", { class: "page-size", "aria-label": "rows per page" },
    sizes.map((n) => h("option", { value: String(n), selected: n === limit }, `${n} per page`)));
  const body = h("div", { class: "rows" });
  holder.append(h("div", { class: "pager" }, first, next, size, refresh, status), body);
  container.append(holder);
  let after = null;
  let pageNo = 1;
  let lastRows = [];
  async function load() {
    const q = `limit=${limit}${after ? `&starting_after=${after}` : ""}`;
    try {
      const { data } = await session.client.request("GET", `${resourcePath}?${q}`);
      lastRows = data.data;
      const rows = filter ? lastRows.filter(filter) : lastRows;
      const cols = columns || autoColumns(rows);
      body.replaceChildren(table(cols, rows));
      status.textContent = `page ${pageNo}, ${lastRows.length} row(s)${data.has_more ? ", more follow" : ""}`;
      next.disabled = !data.has_more;
      first.disabled = pageNo === 1;
    } catch (err) {
      showError(err, `loading ${resourcePath}`);
    }
  }
  first.addEventListener("click", () => { after = null; pageNo = 1; load(); });
  size.addEventListener("change", () => {
    limit = Number(size.value);
    after = null;
    pageNo = 1;
    load();
  });
  next.addEventListener("click", () => {
    if (!lastRows.length) return;
    after = lastRows[lastRows.length - 1].id;
    pageNo += 1;
    load();
  });
  refresh.addEventListener("click", load);
  load();
  return { reload: load, resetAndReload: () => { after = null; pageNo = 1; return load(); } };
}

// ---------------------------------------------------------------- dashboard (decisions §8)

function dashboard(section, session) {
  const stamp = h("p", { class: "muted", id: "dashboard-updated" });
  const body = h("div", { id: "dashboard-body" });
  section.append(h("h1", {}, "Dashboard"), stamp, body);
  async function load() {
    try {
      const { data: d } = await session.client.request("GET", "/v1/admin/dashboard");
      const counts = [
        ["Pending withdrawals", d.pending_withdrawals],
        ["Pending swaps", d.pending_swaps],
        ["Open sweeps", d.open_sweeps],
        ["Dead-lettered webhooks", d.dead_lettered_webhooks],
        ["Open alerts", d.open_alerts],
        ...d.pending_deposits.map((p) => [`Pending deposits ${p.network}`, p.count]),
      ];
      body.replaceChildren(
        h("div", { class: "figures" }, counts.map(([label, n]) =>
          h("div", { class: "figure" }, h("span", { class: "n" }, cellText(n)), h("span", {}, label)))),
        h("h2", {}, "Chains"),
        table([
          ["Network", (c) => c.network],
          ["Configured", (c) => c.configured],
          ["Head block", (c) => c.head_block],
          ["Scanned block", (c) => c.scanned_block],
          ["Lag (blocks)", (c) => c.lag_blocks],
          ["RPC health", (c) => c.rpc_health],
          ["Last error", (c) => c.last_error],
        ], d.chains, { id: "dashboard-chains" }),
        h("h2", {}, "Controls"),
        table([
          ["Control", (c) => c.control_key],
          ["On", (c) => (c.enabled ? "ON" : "off")],
          ["Reason", (c) => c.reason],
          ["By", (c) => c.updated_by],
          ["At", (c) => formatTime(c.updated_at)],
        ], d.controls, { id: "dashboard-controls" }),
        h("h2", {}, "Liabilities against on-chain holdings"),
        table([
          ["Network", (a) => a.network],
          ["Asset", (a) => a.asset],
          ["Ledger liabilities (units)", (a) => a.ledger_liabilities_units],
          ["On-chain treasury (units)", (a) => a.onchain_treasury_units],
          ["Pending outgoing (units)", (a) => a.pending_outgoing_units],
          ["Why unknown", (a) => a.onchain_treasury_error],
        ], d.assets, { id: "dashboard-assets" }),
        h("h2", {}, "Latest reconciliations"),
        table([
          ["Scope", ([scope]) => scope],
          ["Status", ([, r]) => r && r.status],
          ["Balanced", ([, r]) => r && r.balanced],
          ["At", ([, r]) => r && formatTime(r.completed_at || r.created_at)],
        ], Object.entries(d.reconciliations)),
      );
      stamp.textContent = `Updated ${new Date().toLocaleTimeString()}; refreshes every ${DASHBOARD_REFRESH_MS / 1000} s.`;
    } catch (err) {
      showError(err, "loading the dashboard");
    }
  }
  load();
  // Each refresh reads balances from the chains: none while the tab is not looked at.
  const timer = setInterval(() => { if (!document.hidden) load(); }, DASHBOARD_REFRESH_MS);
  return () => clearInterval(timer);
}

// ------------------------------------------------------------------------ listings

function lists(section) {
  section.append(
    h("h1", {}, "Admin listings"),
    h("ul", { class: "resource-list" }, RESOURCES.map((r) =>
      h("li", {}, h("a", { href: `#/list/${r}`, id: `list-link-${r}` }, r)))),
  );
}

function listing(section, session, resource) {
  if (!RESOURCES.includes(resource)) {
    lists(section);
    return null;
  }
  section.append(
    h("h1", {}, `/admin/${resource}`),
    h("p", {}, h("a", { href: "#/lists" }, "All listings")),
  );
  pagedList(section, session, `/v1/admin/${resource}`, { id: `listing-${resource}` });
  return null;
}

// ------------------------------------------------------------------------ controls

function controls(section, session) {
  const left = h("div", { class: "col" });
  const right = h("div", { class: "col" });
  section.append(h("h1", {}, "Controls"), h("div", { class: "two-cols" }, left, right));
  right.append(h("h2", {}, "Audit trail"));
  const audit = pagedList(right, session, "/v1/admin/audit", {
    limit: 20,
    id: "controls-audit",
    columns: [
      ["When", (a) => formatTime(a.created_at)],
      ["Who", (a) => a.actor],
      ["Action", (a) => a.action],
      ["Target", (a) => a.target],
      ["Old", (a) => a.old_value],
      ["New", (a) => a.new_value],
      ["Reason", (a) => a.reason],
    ],
  });
  const tableHolder = h("div");
  left.append(tableHolder);
  async function load() {
    try {
      const { data } = await session.client.request("GET", "/v1/admin/dashboard");
      tableHolder.replaceChildren(table([
        ["Control", (c) => c.control_key],
        ["State", (c) => h("span", { class: c.enabled ? "on" : "off", id: `control-state-${c.control_key}` }, c.enabled ? "ON" : "off")],
        ["Reason", (c) => c.reason],
        ["", (c) => h("button", {
          type: "button",
          id: `control-toggle-${c.control_key}`,
          onclick: () => openForm(c),
        }, c.enabled ? "Turn off" : "Turn on")],
      ], data.controls, { id: "controls-table" }));
    } catch (err) {
      showError(err, "loading the controls");
    }
  }
  const formHolder = h("div");
  left.append(formHolder);
  function openForm(control) {
    const enable = !control.enabled;
    const reason = h("input", { id: "control-reason", required: true, maxlength: "500" });
    const factors = factorInputs(session.factors, "control");
    const form = h("form", { id: "control-form", class: "card" },
      h("h2", {}, `${enable ? "Turn on" : "Turn off"} ${control.control_key}`),
      h("label", {}, "Reason (kept in the audit trail)", reason),
      factors.el,
      h("button", { type: "submit", id: "control-submit" }, "Apply"),
      h("button", { type: "button", onclick: () => formHolder.replaceChildren() }, "Cancel"));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      clearError();
      try {
        await session.client.request("POST", "/v1/admin/controls", {
          body: { control_key: control.control_key, enabled: enable, reason: reason.value },
          ...factors.values(),
        });
        formHolder.replaceChildren();
        flash(left, `${control.control_key} is now ${enable ? "ON" : "off"}.`);
        await load();
        await audit.resetAndReload();
      } catch (err) {
        factors.clear();
        showError(err, `changing ${control.control_key}`);
      }
    });
    formHolder.replaceChildren(form);
    reason.focus();
  }
  load();
  return null;
}

// ----------------------------------------------------------------- reconciliations

function reconciliations(section, session) {
  const factors = factorInputs(session.factors, "reconcile");
  const scope = h("select", { id: "reconcile-scope" },
    h("option", { value: "LEDGER" }, "LEDGER"), h("option", { value: "TREASURY" }, "TREASURY"));
  const form = h("form", { id: "reconcile-form", class: "card" },
    h("h2", {}, "Run a reconciliation"),
    h("label", {}, "Scope", scope),
    factors.el,
    h("button", { type: "submit", id: "reconcile-submit" }, "Schedule"));
  section.append(h("h1", {}, "Reconciliations"), form, h("h2", {}, "Results"));
  const results = pagedList(section, session, "/v1/admin/reconciliations", {
    id: "reconciliations-list",
    columns: [
      ["Id", (r) => r.id],
      ["Scope", (r) => r.scope],
      ["Status", (r) => r.status],
      ["Balanced", (r) => r.balanced],
      ["Discrepancies", (r) => (r.discrepancies && r.discrepancies.length
        ? h("pre", {}, JSON.stringify(r.discrepancies, null, 1)) : "none")],
      ["Requested by", (r) => r.requested_by],
      ["Created", (r) => formatTime(r.created_at)],
    ],
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearError();
    try {
      const { data } = await session.client.request("POST", "/v1/admin/reconcile", {
        body: { scope: scope.value },
        ...factors.values(),
      });
      factors.clear();
      flash(form, `Scheduled ${data.scope} reconciliation ${data.id} (${data.status}); its result appears below.`);
      await results.resetAndReload();
    } catch (err) {
      factors.clear();
      showError(err, "scheduling a reconciliation");
    }
  });
  return null;
}

// ------------------------------------------------------------------------ alerts

function alerts(section, session) {
  section.append(h("h1", {}, "Alerts"));
  const formHolder = h("div");
  let list = null;
  function ackForm(alert) {
    const reason = h("input", { id: "ack-reason", required: true, maxlength: "500" });
    const factors = factorInputs(session.factors, "ack");
    const form = h("form", { id: "ack-form", class: "card" },
      h("h2", {}, `Acknowledge ${alert.kind}`),
      h("p", {}, alert.message),
      h("label", {}, "Reason (kept in the audit trail)", reason),
      factors.el,
      h("button", { type: "submit", id: "ack-submit" }, "Acknowledge"),
      h("button", { type: "button", onclick: () => formHolder.replaceChildren() }, "Cancel"));
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      clearError();
      try {
        await session.client.request("POST", `/v1/admin/alerts/${alert.id}/ack`, {
          body: { reason: reason.value },
          ...factors.values(),
        });
        formHolder.replaceChildren();
        flash(section, "Alert acknowledged.");
        await list.reload();
      } catch (err) {
        factors.clear();
        showError(err, "acknowledging the alert");
      }
    });
    formHolder.replaceChildren(form);
    reason.focus();
  }
  section.append(formHolder);
  list = pagedList(section, session, "/v1/admin/alerts", {
    id: "alerts-list",
    columns: [
      ["When", (a) => formatTime(a.created_at)],
      ["Severity", (a) => a.severity],
      ["Kind", (a) => a.kind],
      ["Message", (a) => a.message],
      ["Acknowledged", (a) => (a.acknowledged_at
        ? `${formatTime(a.acknowledged_at)} by ${a.acknowledged_by}`
        : h("button", { type: "button", class: "ack", onclick: () => ackForm(a) }, "Acknowledge"))],
    ],
  });
  return null;
}

// ------------------------------------------------------------------------ API keys

/** The one view of a new key's secrets: copy buttons, the TOTP QR code, then gone. */
function shownOnce(created, onDone) {
  const rows = [
    h("dt", {}, "API key"), h("dd", {}, h("code", { id: "created-api-key" }, created.api_key), " ", copyButton(created.api_key, "copy-api-key")),
    h("dt", {}, "Secret"), h("dd", {}, h("code", { id: "created-secret" }, created.hmac_secret), " ", copyButton(created.hmac_secret, "copy-secret")),
  ];
  let qr = null;
  if (created.totp_secret) {
    const code = qrcode(0, "M");
    code.addData(created.totp_uri);
    code.make();
    qr = h("img", { id: "created-totp-qr", alt: "QR code of the TOTP key", src: code.createDataURL(5, 8) });
    rows.push(
      h("dt", {}, "TOTP secret"), h("dd", {}, h("code", { id: "created-totp-secret" }, created.totp_secret), " ", copyButton(created.totp_secret, "copy-totp-secret")),
      h("dt", {}, "Authenticator"), h("dd", {}, qr),
    );
  }
  const box = h("div", { id: "created-key", class: "card once" },
    h("h2", {}, "New key: store the secret now"),
    h("p", { class: "warn" }, "The secret", created.totp_secret ? " and the TOTP key are" : " is",
      " shown this once. They cannot be shown again: if lost, revoke the key and make another."),
    h("dl", {}, rows),
    h("p", {}, `Tenant ${created.tenant}; scopes ${created.scopes.join(", ") || "none"}${created.admin ? "; admin" : ""}; ${created.rate_limit} requests per minute.`),
    h("button", { type: "button", id: "created-done", onclick: () => { box.remove(); onDone(); } }, "I have stored it"));
  return box;
}

function keys(section, session) {
  section.append(h("h1", {}, "API keys"));
  const tenant = h("input", { id: "key-tenant", required: true, pattern: "[A-Za-z0-9._\\-]{1,64}", spellcheck: "false" });
  const scopeBoxes = SCOPES.map((s) => h("input", { type: "checkbox", value: s, id: `key-scope-${s.replace(":", "-")}` }));
  const admin = h("input", { type: "checkbox", id: "key-admin" });
  const rate = h("input", { type: "number", id: "key-rate-limit", min: "1", value: "600" });
  const pin = h("input", { type: "password", id: "new-key-pin", autocomplete: "new-password", spellcheck: "false" });
  const totp = h("input", { type: "checkbox", id: "new-key-totp" });
  const factors = factorInputs(session.factors, "create");
  const form = h("form", { id: "key-form", class: "card", autocomplete: "off" },
    h("h2", {}, "Create a key"),
    h("label", {}, "Tenant", tenant),
    h("fieldset", {}, h("legend", {}, "Scopes (only what the key needs)"),
      scopeBoxes.map((box) => h("label", { class: "inline" }, box, box.value))),
    h("label", { class: "inline" }, admin, "Admin (reaches /admin/*)"),
    h("label", {}, "Rate limit (requests per 60 s)", rate),
    h("label", {}, "PIN for this key (optional, 4 to 64 characters)", pin),
    h("label", { class: "inline" }, totp, "Require a TOTP code (X-Service-OTP)"),
    factors.el,
    h("button", { type: "submit", id: "key-submit" }, "Create key"));
  const once = h("div");
  section.append(once, form, h("h2", {}, "Keys"));
  let list = null;
  const revokeHolder = h("div");
  function revokeForm(key) {
    const reason = h("input", { id: "revoke-reason", required: true, maxlength: "500" });
    const f = factorInputs(session.factors, "revoke");
    const rf = h("form", { id: "revoke-form", class: "card" },
      h("h2", {}, `Revoke ${key.api_key}`),
      h("p", {}, `Tenant ${key.tenant}. Its next request is refused.`),
      h("label", {}, "Reason (kept in the audit trail)", reason),
      f.el,
      h("button", { type: "submit", id: "revoke-submit" }, "Revoke"),
      h("button", { type: "button", onclick: () => revokeHolder.replaceChildren() }, "Cancel"));
    rf.addEventListener("submit", async (e) => {
      e.preventDefault();
      clearError();
      try {
        await session.client.request("POST", "/v1/admin/credentials/revoke", {
          body: { api_key: key.api_key, reason: reason.value },
          ...f.values(),
        });
        revokeHolder.replaceChildren();
        flash(section, `${key.api_key} is revoked.`);
        await list.reload();
      } catch (err) {
        f.clear();
        showError(err, "revoking the key");
      }
    });
    revokeHolder.replaceChildren(rf);
    reason.focus();
  }
  section.append(revokeHolder);
  list = pagedList(section, session, "/v1/admin/credentials", {
    id: "keys-list",
    columns: [
      ["API key", (k) => h("code", {}, k.api_key)],
      ["Tenant", (k) => k.tenant],
      ["Scopes", (k) => k.scopes.join(", ") || "—"],
      ["Admin", (k) => (k.admin ? "yes" : "no")],
      ["Rate limit", (k) => k.rate_limit],
      ["PIN", (k) => (k.pin ? "yes" : "no")],
      ["TOTP", (k) => (k.totp ? "yes" : "no")],
      ["Status", (k) => h("span", { class: `status-${k.status}` }, k.status)],
      ["Created", (k) => formatTime(k.created_at)],
      ["", (k) => (k.status === "active"
        ? h("button", { type: "button", class: "revoke", dataset: { apiKey: k.api_key }, onclick: () => revokeForm(k) }, "Revoke")
        : formatTime(k.revoked_at))],
    ],
  });
  // One idempotency key per intended creation: a retry after an unclear failure (the answer
  // lost) replays the same key instead of making a second one; a changed form is a new one.
  let pending = null;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    clearError();
    const body = {
      tenant: tenant.value.trim(),
      scopes: scopeBoxes.filter((b) => b.checked).map((b) => b.value),
      admin: admin.checked,
      rate_limit: Number(rate.value),
      totp: totp.checked,
    };
    if (pin.value) body.pin = pin.value;
    const fingerprint = JSON.stringify(body);
    if (!pending || pending.fingerprint !== fingerprint) {
      pending = { fingerprint, key: newIdempotencyKey() };
    }
    const submit = document.getElementById("key-submit");
    submit.disabled = true;
    try {
      const { data } = await session.client.request("POST", "/v1/admin/credentials", {
        body,
        idempotencyKey: pending.key,
        ...factors.values(),
      });
      pending = null;
      form.reset();
      factors.clear();
      once.replaceChildren(shownOnce(data, () => once.replaceChildren()));
      await list.resetAndReload();
    } catch (err) {
      factors.clear();
      if (!(err instanceof ApiError) || err.status === 0 || err.status >= 500) {
        showError(err, "creating the key (submit again to retry the same creation)");
      } else {
        pending = null;
        showError(err, "creating the key");
      }
    } finally {
      submit.disabled = false;
    }
  });
  return null;
}

// ------------------------------------------------------------------------ webhooks

function webhooks(section, session) {
  const onlyDead = h("input", { type: "checkbox", id: "webhooks-dead-only", checked: true });
  section.append(
    h("h1", {}, "Webhook events"),
    h("label", { class: "inline" }, onlyDead, "Only dead-lettered events (of this page)"),
  );
  const factors = factorInputs(session.factors, "replay");
  section.append(factors.el);
  let list = null;
  async function replay(event) {
    clearError();
    try {
      const { data } = await session.client.request("POST", `/v1/admin/webhooks/${event.id}/replay`, factors.values());
      factors.clear();
      flash(section, `Event ${data.id} re-queued (${data.status}).`);
      await list.reload();
    } catch (err) {
      factors.clear();
      showError(err, "replaying the event");
    }
  }
  const columns = [
    ["Event", (e) => e.id],
    ["Tenant", (e) => e.tenant],
    ["Type", (e) => e.event_type],
    ["Status", (e) => e.status],
    ["Attempts", (e) => (Array.isArray(e.attempts) ? e.attempts.length : e.attempts)],
    ["Created", (e) => formatTime(e.created_at)],
    ["", (e) => (e.status === "dead_lettered"
      ? h("button", { type: "button", class: "replay", onclick: () => replay(e) }, "Replay")
      : "")],
  ];
  const holder = h("div");
  section.append(holder);
  function build() {
    holder.replaceChildren();
    list = pagedList(holder, session, "/v1/admin/webhooks", {
      id: "webhooks-list",
      columns,
      filter: onlyDead.checked ? (e) => e.status === "dead_lettered" : null,
    });
  }
  onlyDead.addEventListener("change", build);
  build();
  return null;
}

export const PAGES = {
  dashboard,
  lists,
  list: listing,
  controls,
  reconciliations,
  alerts,
  keys,
  webhooks,
};
