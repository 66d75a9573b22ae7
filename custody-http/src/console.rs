//! The operator console (`/console/`) and the API console (`/console/api`), decisions §15:
//! static files compiled into the binary, so the page needs no CDN and no network beyond this
//! server, and what runs in the operator's browser is exactly what was reviewed and tested.
//!
//! The pages hold no key: the operator types an API key and secret, the secret stays in the
//! page's memory and signs each request there (WebCrypto); this module only hands out files.
//! Every answer carries a strict Content-Security-Policy: scripts and styles from this origin
//! only, requests to this origin only, no framing, no form posts, no plugins.

use crate::reply::Reply;

/// One embedded file.
struct Asset {
    /// Path below `/console`.
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $file:literal, $type:expr) => {
        Asset {
            path: $path,
            content_type: $type,
            body: include_bytes!(concat!("../console/", $file)),
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

const ASSETS: &[Asset] = &[
    asset!("/", "index.html", HTML),
    asset!("/index.html", "index.html", HTML),
    asset!("/api", "api.html", HTML),
    asset!("/api/", "api.html", HTML),
    asset!("/app.js", "app.js", JS),
    asset!("/pages.js", "pages.js", JS),
    asset!("/client.js", "client.js", JS),
    asset!("/ui.js", "ui.js", JS),
    asset!("/api-page.js", "api-page.js", JS),
    asset!("/console.css", "console.css", CSS),
    asset!(
        "/vendor/swagger-ui-bundle.js",
        "vendor/swagger-ui-bundle.js",
        JS
    ),
    asset!("/vendor/swagger-ui.css", "vendor/swagger-ui.css", CSS),
    asset!("/vendor/qrcode.mjs", "vendor/qrcode.mjs", JS),
    asset!(
        "/vendor/LICENSE-swagger-ui-dist",
        "vendor/LICENSE-swagger-ui-dist",
        TEXT
    ),
    asset!(
        "/vendor/NOTICE-swagger-ui-dist",
        "vendor/NOTICE-swagger-ui-dist",
        TEXT
    ),
    asset!(
        "/vendor/LICENSE-qrcode-generator",
        "vendor/LICENSE-qrcode-generator",
        TEXT
    ),
];

/// The operator console: its own scripts and styles only. `img-src data:` is for the QR code
/// of a new TOTP key, drawn in the page.
const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// The API console: Swagger UI sets element styles from script (`style-src 'unsafe-inline'`
/// for styles only; scripts stay `'self'`) and draws its icons as `data:` SVG.
const API_CSP: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Whether `path` (the full request path) belongs to the console.
pub fn owns(path: &str) -> bool {
    path == "/console" || path.starts_with("/console/")
}

fn plain(status: u16, message: &str) -> Reply {
    Reply {
        status,
        body: message.as_bytes().to_vec(),
        headers: vec![("content-type", TEXT.to_owned())],
    }
}

/// The answer for a console path: a file, a redirect to the trailing slash, or 404 / 405 in
/// plain text.
pub fn serve(method: &str, path: &str) -> Reply {
    if path == "/console" {
        return Reply {
            status: 308,
            body: Vec::new(),
            headers: vec![("location", "/console/".to_owned())],
        };
    }
    let sub = &path["/console".len()..];
    let Some(asset) = ASSETS.iter().find(|a| a.path == sub) else {
        return plain(404, "not found");
    };
    if method != "GET" && method != "HEAD" {
        return plain(405, "method not allowed").with_header("allow", "GET, HEAD");
    }
    let csp = if matches!(asset.path, "/api" | "/api/") {
        API_CSP
    } else {
        CONSOLE_CSP
    };
    let body = if method == "HEAD" {
        Vec::new()
    } else {
        asset.body.to_vec()
    };
    Reply {
        status: 200,
        body,
        headers: vec![
            ("content-type", asset.content_type.to_owned()),
            ("content-security-policy", csp.to_owned()),
            // Revalidated on every load: a new binary's files replace the old ones at once.
            ("cache-control", "no-cache".to_owned()),
            ("referrer-policy", "no-referrer".to_owned()),
            ("x-frame-options", "DENY".to_owned()),
            ("cross-origin-opener-policy", "same-origin".to_owned()),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header<'a>(r: &'a Reply, name: &str) -> Option<&'a str> {
        r.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn serves_the_embedded_files_with_their_types_and_a_strict_policy() {
        let index = serve("GET", "/console/");
        assert_eq!(index.status, 200);
        assert_eq!(header(&index, "content-type"), Some(HTML));
        let csp = header(&index, "content-security-policy").unwrap();
        assert!(csp.contains("script-src 'self';") && !csp.contains("unsafe"));
        assert_eq!(
            header(&serve("GET", "/console/app.js"), "content-type"),
            Some(JS)
        );
        assert_eq!(
            header(
                &serve("GET", "/console/vendor/swagger-ui.css"),
                "content-type"
            ),
            Some(CSS)
        );
        let api = serve("GET", "/console/api");
        assert!(header(&api, "content-security-policy")
            .unwrap()
            .contains("script-src 'self';"));
        assert_eq!(serve("GET", "/console").status, 308);
        assert_eq!(serve("GET", "/console/index.html").body, index.body);
        assert_eq!(serve("GET", "/console/api/").body, api.body);
        assert_eq!(serve("GET", "/console/nope.js").status, 404);
        assert_eq!(serve("GET", "/console/../Cargo.toml").status, 404);
        assert_eq!(serve("POST", "/console/app.js").status, 405);
        assert!(serve("HEAD", "/console/app.js").body.is_empty());
        // Every page and script is in the table, none empty.
        for a in ASSETS {
            assert!(!a.body.is_empty(), "{}", a.path);
        }
    }

    /// Submitted before the script runs (slow load, script blocked), a GET form would put the
    /// secret in the URL (history, logs, Referer). The form posts, and its inputs have no
    /// names, so a browser submits neither field anywhere.
    #[test]
    fn the_sign_in_form_cannot_send_the_secret_anywhere() {
        let index = String::from_utf8_lossy(&serve("GET", "/console/").body).into_owned();
        let form = &index[index.find("<form id=\"sign-in-form\"").unwrap()..];
        let form = &form[..form.find("</form>").unwrap()];
        assert!(form.contains("method=\"post\""), "{form}");
        for input in form.split("<input").skip(1) {
            let tag = &input[..input.find('>').unwrap()];
            assert!(!tag.contains("name="), "a named sign-in input: {tag}");
        }
    }

    #[test]
    fn no_page_holds_a_key() {
        for a in ASSETS.iter().filter(|a| !a.path.starts_with("/vendor/")) {
            let text = String::from_utf8_lossy(a.body);
            for forbidden in [
                "localStorage",
                "sessionStorage",
                "document.cookie",
                "indexedDB",
                "console.log",
                "console.info",
                "console.debug",
                "console.warn",
                "console.error",
            ] {
                assert!(!text.contains(forbidden), "{} uses {forbidden}", a.path);
            }
        }
    }
}
