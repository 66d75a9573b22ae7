//! `/v1/admin/credentials` (decisions §15) over real HTTP: an admin makes a key for a tenant
//! with chosen scopes, the secrets come back in that response only, the listing pages without
//! them, a revoked key is refused on its next request, every change is audited, and second
//! factors and validation answer with the contract's codes.

use custody_e2e::{now_s, totp, Client, Cred, Custody};
use serde_json::{json, Value};

fn created_cred(created: &Value) -> Cred {
    Cred {
        api_key: created["api_key"].as_str().unwrap().into(),
        secret: created["hmac_secret"].as_str().unwrap().into(),
        tenant: created["tenant"].as_str().unwrap().into(),
        json: created.clone(),
    }
}

fn audit(admin: &Client) -> Vec<Value> {
    let r = admin.get("/v1/admin/audit?limit=100");
    assert_eq!(r.status, 200);
    r.json()["data"].as_array().unwrap().clone()
}

#[test]
fn an_admin_creates_lists_and_revokes_keys_audited_and_the_secret_is_shown_once() {
    let mut custody = Custody::init();
    let ops = custody.credential("ops", &["--admin"]);
    let partner = custody.credential("acme", &[]);
    custody.start();
    let admin = custody.client(&ops);

    // A partner key is not an admin key.
    let r = custody.client(&partner).post(
        "/v1/admin/credentials",
        &json!({ "tenant": "acme", "scopes": ["wallets:read"] }),
        Some("create-by-partner"),
    );
    assert_eq!((r.status, r.code()), (403, "FORBIDDEN".into()));
    assert_eq!(
        custody.client(&partner).get("/v1/admin/credentials").status,
        403
    );

    let body =
        json!({ "tenant": "acme", "scopes": ["wallets:read", "wallets:write"], "rate_limit": 30 });
    let r = admin.post("/v1/admin/credentials", &body, Some("create-key-0001"));
    assert_eq!(r.status, 201, "{:?}", r.json());
    let created = r.json();
    assert_eq!(created["tenant"], "acme");
    assert_eq!(created["scopes"], json!(["wallets:read", "wallets:write"]));
    assert_eq!(
        (created["admin"].clone(), created["rate_limit"].clone()),
        (json!(false), json!(30))
    );
    assert_eq!(
        (
            created["status"].clone(),
            created["pin"].clone(),
            created["totp"].clone()
        ),
        (json!("active"), json!(false), json!(false))
    );
    assert!(created.get("totp_secret").is_none());
    let secret = created["hmac_secret"].as_str().unwrap().to_owned();
    assert_eq!(secret.len(), 64);
    assert!(r.header("x-ratelimit-limit").is_some());

    // The same key and body replay the same answer (its secret included), nothing made twice.
    let again = admin.post("/v1/admin/credentials", &body, Some("create-key-0001"));
    assert_eq!(again.status, 201);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, r.body);
    let other = admin.post(
        "/v1/admin/credentials",
        &json!({ "tenant": "acme", "scopes": ["wallets:read"] }),
        Some("create-key-0001"),
    );
    assert_eq!(
        (other.status, other.code()),
        (409, "IDEMPOTENCY_CONFLICT".into())
    );
    let short = admin.post("/v1/admin/credentials", &body, Some("short"));
    assert_eq!(short.status, 422);
    assert_eq!(short.json()["details"][0]["field"], "Idempotency-Key");

    // The new key works within its scopes only.
    let new = custody.client(&created_cred(&created));
    let w = new.post(
        "/v1/wallets",
        &json!({ "external_user_id": "u1", "network": "BSC" }),
        Some("wallet-by-new-key"),
    );
    assert_eq!(w.status, 201, "{:?}", w.json());
    assert_eq!(new.get("/v1/assets").status, 403);
    assert_eq!(w.header("x-ratelimit-limit"), Some("30"));

    // The listing: newest first, never a secret, paged like every admin listing.
    let list = admin.get("/v1/admin/credentials?limit=2");
    assert_eq!(list.status, 200);
    let text = String::from_utf8(list.body.clone()).unwrap();
    assert!(!text.contains(&secret), "a secret in the listing");
    assert!(!text.contains(&ops.secret) && !text.contains("hmac_secret"));
    let page1 = list.json();
    assert_eq!(page1["has_more"], true);
    let rows = page1["data"].as_array().unwrap();
    assert_eq!(rows[0]["api_key"], created["api_key"]);
    assert_eq!(rows[0]["id"], created["id"]);
    let last = rows[1]["id"].as_str().unwrap();
    let page2 = admin
        .get(&format!(
            "/v1/admin/credentials?limit=2&starting_after={last}"
        ))
        .json();
    assert_eq!(page2["has_more"], false);
    let keys: Vec<_> = rows
        .iter()
        .chain(page2["data"].as_array().unwrap())
        .map(|r| r["api_key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        keys,
        [
            created["api_key"].as_str().unwrap(),
            &partner.api_key,
            &ops.api_key
        ]
    );
    let unknown = admin.get(&format!(
        "/v1/admin/credentials?starting_after={}",
        uuid::Uuid::new_v4()
    ));
    assert_eq!(unknown.status, 422);
    assert_eq!(admin.get("/v1/admin/credentials?tenant=acme").status, 422);

    // Revoked: refused at once, audited once, revoking again answers the same record.
    let revoke = json!({ "api_key": created["api_key"], "reason": "rotated" });
    let r = admin.post("/v1/admin/credentials/revoke", &revoke, None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["status"], "revoked");
    let refused = new.post(
        "/v1/wallets",
        &json!({ "external_user_id": "u2", "network": "BSC" }),
        Some("wallet-after-revoke"),
    );
    assert_eq!(
        (refused.status, refused.code()),
        (401, "AUTHENTICATION_FAILED".into())
    );
    let twice = admin.post(
        "/v1/admin/credentials/revoke",
        &json!({ "api_key": created["api_key"], "reason": "again" }),
        None,
    );
    assert_eq!(twice.status, 200);
    assert_eq!(twice.json(), r.json());
    let nobody = admin.post(
        "/v1/admin/credentials/revoke",
        &json!({ "api_key": "ck_unknown", "reason": "x" }),
        None,
    );
    assert_eq!((nobody.status, nobody.code()), (404, "NOT_FOUND".into()));

    let listed = admin.get("/v1/admin/credentials").json();
    assert_eq!(listed["data"][0]["status"], "revoked");
    assert!(listed["data"][0]["revoked_at"].is_string());

    let trail = audit(&admin);
    let ours: Vec<_> = trail
        .iter()
        .filter(|a| a["target"] == created["api_key"])
        .map(|a| (a["action"].clone(), a["reason"].clone(), a["actor"].clone()))
        .collect();
    let actor = json!(format!("credential:{}", ops.json["id"].as_str().unwrap()));
    assert_eq!(
        ours,
        [
            (json!("credential.revoke"), json!("rotated"), actor.clone()),
            (
                json!("credential.create"),
                json!("credential issued"),
                actor
            )
        ],
        "{trail:?}"
    );
    let trail_text = serde_json::to_string(&trail).unwrap();
    assert!(!trail_text.contains(&secret), "a secret in the audit trail");

    // Without an Idempotency-Key each request makes a key (decisions §15 asks for none).
    let plain = admin.post(
        "/v1/admin/credentials",
        &json!({ "tenant": "beta", "scopes": ["catalog:read"] }),
        None,
    );
    assert_eq!(plain.status, 201, "{:?}", plain.json());
    assert!(plain.header("idempotent-replayed").is_none());
    let plain = plain.json();
    assert_ne!(plain["api_key"], created["api_key"]);
    let beta = custody.client(&created_cred(&plain));
    assert_eq!(beta.get("/v1/assets").status, 200);
    // By id, without a reason: the audit trail says an operator did it.
    let revoked = admin.post(
        "/v1/admin/credentials/revoke",
        &json!({ "id": plain["id"] }),
        None,
    );
    assert_eq!(revoked.status, 200, "{:?}", revoked.json());
    assert_eq!(revoked.json()["api_key"], plain["api_key"]);
    assert_eq!(beta.get("/v1/assets").status, 401);
    let last = &audit(&admin)[0];
    assert_eq!(
        (
            last["action"].clone(),
            last["target"].clone(),
            last["reason"].clone()
        ),
        (
            json!("credential.revoke"),
            plain["api_key"].clone(),
            json!("revoked by an operator")
        )
    );

    // Neither the credential nor the stored idempotent answer holds the secret in clear.
    for file in ["custody.db", "custody.db-wal"] {
        let Ok(raw) = std::fs::read(custody.data_dir().join(file)) else {
            continue;
        };
        assert!(
            !raw.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the HMAC secret is in {file} in clear"
        );
    }

    // The OpenAPI document describes the three routes.
    let doc = custody_e2e::raw_request(&custody.addr, "GET", "/v1/openapi.json", &[], b"").json();
    let create = &doc["paths"]["/admin/credentials"]["post"];
    assert_eq!(create["operationId"], "createCredential");
    let idem = create["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .expect("Idempotency-Key documented");
    assert_eq!(idem["required"], false);
    assert_eq!(
        create["responses"]["201"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/CreatedCredential"
    );
    assert_eq!(
        doc["paths"]["/admin/credentials"]["get"]["operationId"],
        "listCredentials"
    );
    assert_eq!(
        doc["paths"]["/admin/credentials/revoke"]["post"]["operationId"],
        "revokeCredential"
    );
    let listed = &doc["components"]["schemas"]["Credential"]["properties"];
    assert!(listed.get("hmac_secret").is_none() && listed.get("totp_secret").is_none());
}

/// The answer that carries a new key's secret is bound to the admin credential that asked for
/// it: another admin of the same tenant replaying the Idempotency-Key does not get it.
#[test]
fn another_admin_replaying_the_key_does_not_get_the_secret() {
    let mut custody = Custody::init();
    let ops = custody.credential("ops", &["--admin"]);
    let ops_other = custody.credential("ops", &["--admin"]);
    custody.start();
    let body = json!({ "tenant": "acme", "scopes": ["wallets:read"] });
    let r = custody
        .client(&ops)
        .post("/v1/admin/credentials", &body, Some("create-key-stolen"));
    assert_eq!(r.status, 201, "{:?}", r.json());
    let secret = r.json()["hmac_secret"].as_str().unwrap().to_owned();
    let stolen =
        custody
            .client(&ops_other)
            .post("/v1/admin/credentials", &body, Some("create-key-stolen"));
    assert_eq!(
        (stolen.status, stolen.code()),
        (409, "IDEMPOTENCY_CONFLICT".into())
    );
    assert!(!String::from_utf8_lossy(&stolen.body).contains(&secret));
    // Its creator still gets the same answer back.
    let again =
        custody
            .client(&ops)
            .post("/v1/admin/credentials", &body, Some("create-key-stolen"));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, r.body);
}

#[test]
fn bad_bodies_are_422_with_details_and_nothing_is_made() {
    let mut custody = Custody::init();
    let ops = custody.credential("ops", &["--admin"]);
    custody.start();
    let admin = custody.client(&ops);
    let cases = [
        (
            json!({ "tenant": "acme", "scopes": ["wallets:read", "wallets:fly"] }),
            vec!["scopes[1]"],
        ),
        (
            json!({ "tenant": "acme", "scopes": ["wallets:read", "wallets:read"] }),
            vec!["scopes[1]"],
        ),
        (json!({ "tenant": "acme", "scopes": [] }), vec!["scopes"]),
        (
            json!({ "tenant": "acme", "scopes": "wallets:read" }),
            vec!["scopes"],
        ),
        (json!({ "scopes": ["wallets:read"] }), vec!["tenant"]),
        (
            json!({ "tenant": "acme", "scopes": ["wallets:read"], "rate_limit": 0 }),
            vec!["rate_limit"],
        ),
        (
            json!({ "tenant": "acme", "scopes": ["wallets:read"], "rate_limit": "600" }),
            vec!["rate_limit"],
        ),
        (
            json!({ "tenant": "acme", "scopes": ["wallets:read"], "rate_limit": 2_000_000_000_u64 }),
            vec!["rate_limit"],
        ),
        (
            json!({ "tenant": "a b", "scopes": ["wallets:read"], "pin": "12" }),
            vec!["pin", "tenant"],
        ),
        (
            json!({ "tenant": "acme", "scopes": ["wallets:read"], "totp": "yes", "extra": 1 }),
            vec!["extra", "totp"],
        ),
    ];
    for (i, (body, fields)) in cases.iter().enumerate() {
        let r = admin.post(
            "/v1/admin/credentials",
            body,
            Some(&format!("bad-body-{i:04}")),
        );
        assert_eq!(
            (r.status, r.code()),
            (422, "VALIDATION_FAILED".into()),
            "{body}"
        );
        let mut got: Vec<String> = r.json()["details"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["field"].as_str().unwrap().to_owned())
            .collect();
        got.sort();
        assert_eq!(got, *fields, "{body}: {:?}", r.json());
        assert!(r.json()["trace_id"].is_string());
    }
    let r = admin.post(
        "/v1/admin/credentials/revoke",
        &json!({ "api_key": ops.api_key, "reason": "   " }),
        None,
    );
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["details"][0]["field"], "reason");
    for (body, field) in [
        (json!({}), "api_key"),
        (
            json!({ "api_key": ops.api_key, "id": ops.json["id"] }),
            "id",
        ),
        (json!({ "id": "not-a-uuid" }), "id"),
        (json!({ "api_key": ops.api_key, "why": "x" }), "why"),
    ] {
        let r = admin.post("/v1/admin/credentials/revoke", &body, None);
        assert_eq!(r.status, 422, "{body}");
        assert_eq!(r.json()["details"][0]["field"], field, "{body}");
    }
    // An admin-only key may have no scopes.
    let r = admin.post(
        "/v1/admin/credentials",
        &json!({ "tenant": "ops2", "scopes": [], "admin": true }),
        Some("admin-only-key"),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());
    // Without scopes: every non-admin scope, as `credentials create` without --scopes.
    let r = admin.post("/v1/admin/credentials", &json!({ "tenant": "gamma" }), None);
    assert_eq!(r.status, 201, "{:?}", r.json());
    assert_eq!(r.json()["scopes"].as_array().unwrap().len(), 9);
    assert_eq!(r.json()["rate_limit"], 600);
    let listed = admin.get("/v1/admin/credentials").json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 3);
}

#[test]
fn an_admin_key_with_pin_and_totp_must_give_both_and_a_new_key_gets_its_totp_once() {
    let mut custody = Custody::init();
    let ops = custody.credential("ops", &["--admin", "--pin", "8642", "--totp"]);
    let ops_totp = ops.json["totp_secret"].as_str().unwrap().to_owned();
    custody.start();
    let admin = custody.client(&ops);
    let body =
        json!({ "tenant": "acme", "scopes": ["withdrawals:write"], "pin": "1357", "totp": true });
    let post = |extra: &[(&str, String)], idem: &str| {
        let bytes = serde_json::to_vec(&body).unwrap();
        let mut s = admin.signed("POST", "/v1/admin/credentials", &bytes, Some(idem));
        s.extra_headers = extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        admin.send(&s)
    };
    let r = post(&[], "factors-0001");
    assert_eq!((r.status, r.code()), (401, "PIN_REQUIRED".into()));
    let r = post(&[("X-Service-Pin", "8642".into())], "factors-0001");
    assert_eq!((r.status, r.code()), (401, "OTP_REQUIRED".into()));
    let r = post(
        &[
            ("X-Service-Pin", "0000".into()),
            ("X-Service-OTP", "000000".into()),
        ],
        "factors-0001",
    );
    assert_eq!((r.status, r.code()), (401, "INVALID_PIN".into()));
    // Refusals for the factors made nothing.
    assert_eq!(
        admin.get("/v1/admin/credentials").json()["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let mut created = None;
    for _ in 0..2 {
        let c = totp(&ops_totp, now_s());
        let r = post(
            &[("X-Service-Pin", "8642".into()), ("X-Service-OTP", c)],
            "factors-0001",
        );
        if r.status == 201 {
            created = Some(r.json());
            break;
        }
        assert_eq!(r.code(), "INVALID_OTP");
        std::thread::sleep(std::time::Duration::from_secs(31));
    }
    let created = created.expect("a fresh code is accepted");
    assert_eq!(
        (created["pin"].clone(), created["totp"].clone()),
        (json!(true), json!(true))
    );
    let b32 = created["totp_secret"].as_str().unwrap();
    assert!(created["totp_uri"]
        .as_str()
        .unwrap()
        .starts_with("otpauth://totp/"));
    assert!(created["totp_uri"].as_str().unwrap().contains(b32));
    let listed = admin.get("/v1/admin/credentials");
    let text = String::from_utf8(listed.body.clone()).unwrap();
    assert!(!text.contains(b32) && !text.contains(created["hmac_secret"].as_str().unwrap()));

    // Revocation needs the factors too.
    let bytes =
        serde_json::to_vec(&json!({ "api_key": created["api_key"], "reason": "test" })).unwrap();
    let s = admin.signed("POST", "/v1/admin/credentials/revoke", &bytes, None);
    let r = admin.send(&s);
    assert_eq!((r.status, r.code()), (401, "PIN_REQUIRED".into()));
}
