// Small DOM helpers. Every value from the API is put into the page as text (never as HTML):
// external user ids, reasons and messages come from partners and operators.

/** Builds an element: h("td", { class: "x", onclick: f }, "text", child, ...). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(name, "");
    } else {
      el.setAttribute(name, String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** A cell's text for any JSON value. */
export function cellText(value) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

const errorBox = () => document.getElementById("error");

/** Shows an API error with its code, message, trace id and field details. */
export function showError(err, context) {
  const box = errorBox();
  box.replaceChildren();
  const code = err && err.code ? err.code : "ERROR";
  const message = err && err.message ? err.message : String(err);
  box.append(
    h("strong", { class: "error-code" }, code),
    " ",
    h("span", { class: "error-message" }, context ? `${context}: ${message}` : message),
  );
  if (err && err.traceId) {
    box.append(" ", h("span", { class: "error-trace" }, `trace id ${err.traceId}`));
  }
  if (err && err.details && err.details.length) {
    box.append(
      h("ul", { class: "error-details" },
        err.details.map((d) => h("li", {}, `${d.field}: ${d.issue}`))),
    );
  }
  box.append(" ", h("button", { type: "button", class: "link", onclick: clearError }, "dismiss"));
  box.hidden = false;
}

export function clearError() {
  const box = errorBox();
  box.hidden = true;
  box.replaceChildren();
}

/** A notice that something worked. */
export function flash(parent, text) {
  const note = h("p", { class: "ok", role: "status" }, text);
  parent.prepend(note);
  setTimeout(() => note.remove(), 8000);
}

/** A table of rows; `columns` are [label, row => value or Node]. */
export function table(columns, rows, { empty = "Nothing to show.", id } = {}) {
  if (!rows.length) return h("p", { class: "muted empty", id }, empty);
  return h("table", { id },
    h("thead", {}, h("tr", {}, columns.map(([label]) => h("th", {}, label)))),
    h("tbody", {}, rows.map((row) =>
      h("tr", { dataset: { id: row.id || "" } }, columns.map(([, get]) => {
        const v = get(row);
        return h("td", {}, v instanceof Node ? v : cellText(v));
      })))));
}

/** The columns of rows nobody described: every top-level key of the first rows. */
export function autoColumns(rows) {
  const keys = [];
  for (const row of rows.slice(0, 20)) {
    for (const k of Object.keys(row)) if (!keys.includes(k)) keys.push(k);
  }
  return keys.map((k) => [k, (row) => row[k]]);
}

/**
 * Second-factor inputs for a mutation. `needs` says what the signed-in credential requires
 * ({ pin, totp }, or null when unknown: both offered, optional).
 */
export function factorInputs(needs, prefix) {
  const pinLabel = needs && needs.pin ? "PIN (required for your key)" : "PIN (if your key has one)";
  const otpLabel = needs && needs.totp ? "One-time code (required for your key)" : "One-time code (if your key has TOTP)";
  const pin = h("input", { type: "password", id: `${prefix}-pin`, autocomplete: "off", spellcheck: "false" });
  const otp = h("input", { id: `${prefix}-otp`, inputmode: "numeric", autocomplete: "one-time-code", maxlength: "6" });
  const show = !needs || needs.pin || needs.totp;
  const el = h("fieldset", { class: "factors", hidden: !show },
    h("legend", {}, "Second factors"),
    (!needs || needs.pin) ? h("label", {}, pinLabel, pin) : null,
    (!needs || needs.totp) ? h("label", {}, otpLabel, otp) : null);
  return {
    el,
    values: () => ({ pin: pin.value || undefined, otp: otp.value || undefined }),
    clear: () => { pin.value = ""; otp.value = ""; },
  };
}

/** Copies `text` to the clipboard; the button says whether it worked. */
export function copyButton(text, id) {
  const button = h("button", { type: "button", id, class: "copy" }, "Copy");
  button.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch (e) {
      button.textContent = "Select and copy by hand";
    }
  });
  return button;
}

export function formatTime(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}
