//! Forged and replayed requests against a real server on loopback: valid signed requests of a
//! partner and of an admin, each sent once with one thing changed after signing (body, path,
//! query, method, each header, the timestamp around the window's edges, a used nonce, the key
//! of another tenant, a revoked key). None may be accepted; unchanged requests sent between
//! them must be, and at the end the store holds exactly what the accepted ones did. Seeded
//! (`CUSTODY_RELIABILITY_SEED` replays a run); 3,000 mutations in the short profile, 20,000 in
//! the long one (docs/reliability.md).

use std::collections::BTreeMap;

use custody_e2e::profile::{self, Rng};
use custody_e2e::{canonical, fresh_nonce, now_s, raw_request, sign, Cred, Custody, Resp};
use serde_json::{json, Value};

/// A request as it goes on the wire, with the parts its signature covers.
#[derive(Clone, Debug)]
struct Wire {
    method: String,
    target: String,
    body: Vec<u8>,
    headers: Vec<(String, String)>,
}

impl Wire {
    /// Signs `method target body` for `cred` at `ts` with `nonce`.
    fn signed(
        cred: &Cred,
        method: &str,
        target: &str,
        body: &[u8],
        idem: Option<&str>,
        ts: i64,
        nonce: &str,
    ) -> Wire {
        let path = target.split('?').next().unwrap();
        let ts = ts.to_string();
        let sig = sign(
            &cred.secret,
            &canonical(method, path, &ts, nonce, idem.unwrap_or(""), body),
        );
        let mut headers = vec![
            ("X-Service-Key".to_owned(), cred.api_key.clone()),
            ("X-Service-Timestamp".to_owned(), ts),
            ("X-Service-Nonce".to_owned(), nonce.to_owned()),
            ("X-Service-Signature".to_owned(), sig),
        ];
        if let Some(k) = idem {
            headers.push(("Idempotency-Key".to_owned(), k.to_owned()));
        }
        Wire {
            method: method.into(),
            target: target.into(),
            body: body.to_vec(),
            headers,
        }
    }

    fn header_mut(&mut self, name: &str) -> Option<&mut String> {
        self.headers
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    fn send(&self, addr: &str) -> Resp {
        let headers: Vec<(&str, String)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        raw_request(addr, &self.method, &self.target, &headers, &self.body)
    }
}

/// The valid requests mutations start from.
#[derive(Clone, Copy, Debug)]
enum Base {
    GetWallet,
    GetBalances,
    ListAssets,
    ListDeposits,
    CreateWallet,
    Transfer,
    AdminControl,
}

const BASES: [Base; 7] = [
    Base::GetWallet,
    Base::GetBalances,
    Base::ListAssets,
    Base::ListDeposits,
    Base::CreateWallet,
    Base::Transfer,
    Base::AdminControl,
];

struct World {
    addr: String,
    acme: Cred,
    globex: Cred,
    ops: Cred,
    revoked: Cred,
    alice_wallet: String,
    bob_wallet: String,
    serial: u64,
}

impl World {
    /// A fresh valid request of `base`, signed now with a fresh nonce.
    fn build(&mut self, base: Base, ts: i64) -> Wire {
        self.serial += 1;
        let n = self.serial;
        let nonce = fresh_nonce();
        let (cred, method, target, body, idem): (&Cred, &str, String, Value, Option<String>) =
            match base {
                Base::GetWallet => (
                    &self.acme,
                    "GET",
                    format!("/v1/wallets/{}", self.alice_wallet),
                    Value::Null,
                    None,
                ),
                Base::GetBalances => (
                    &self.acme,
                    "GET",
                    format!("/v1/wallets/{}/balances", self.alice_wallet),
                    Value::Null,
                    None,
                ),
                Base::ListAssets => (
                    &self.acme,
                    "GET",
                    "/v1/assets?network=TRON".into(),
                    Value::Null,
                    None,
                ),
                Base::ListDeposits => (
                    &self.acme,
                    "GET",
                    "/v1/deposits?limit=5&external_user_id=alice".into(),
                    Value::Null,
                    None,
                ),
                Base::CreateWallet => (
                    &self.acme,
                    "POST",
                    "/v1/wallets".into(),
                    json!({ "external_user_id": format!("user-{n}"), "network": "TRON" }),
                    Some(format!("wallet-key-{n:08}")),
                ),
                Base::Transfer => (
                    &self.acme,
                    "POST",
                    "/v1/internal-transfers".into(),
                    json!({ "sender_external_user_id": "alice", "recipient_external_user_id": "bob",
                            "asset": "TRX", "network": "TRON", "amount_units": "1" }),
                    Some(format!("transfer-key-{n:08}")),
                ),
                Base::AdminControl => (
                    &self.ops,
                    "POST",
                    "/v1/admin/controls".into(),
                    json!({ "control_key": "maintenance.TRON", "enabled": false,
                            "reason": format!("check {n}") }),
                    None,
                ),
            };
        let body = if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&body).unwrap()
        };
        Wire::signed(cred, method, &target, &body, idem.as_deref(), ts, &nonce)
    }
}

/// What was changed, and the statuses that count as "refused as expected" for it.
struct Mutation {
    kind: &'static str,
    wire: Wire,
    /// The unchanged request is sent first (and must be accepted): for replays.
    send_original_first: Option<Wire>,
    allowed: &'static [u16],
}

const AUTH: &[u16] = &[401];
/// A changed path or method may route elsewhere (404, 405) before the signature is checked, or
/// reach a route the credential has no right to (403).
const ROUTED: &[u16] = &[401, 403, 404, 405];

fn flip_char(s: &str, rng: &mut Rng) -> String {
    let mut bytes = s.as_bytes().to_vec();
    let i = rng.below(bytes.len());
    let alphabet = b"0123456789abcdefABCDEF-xz";
    let mut replacement = *rng.pick(alphabet);
    while replacement == bytes[i] {
        replacement = *rng.pick(alphabet);
    }
    bytes[i] = replacement;
    String::from_utf8(bytes).unwrap()
}

fn mutate(world: &mut World, base: Base, rng: &mut Rng) -> Mutation {
    let now = now_s();
    let original = world.build(base, now);
    let mut w = original.clone();
    let m = |kind, wire, allowed| Mutation {
        kind,
        wire,
        send_original_first: None,
        allowed,
    };
    match rng.below(19) {
        0 => {
            if w.body.is_empty() {
                w.body = b"{}".to_vec();
            } else {
                let i = rng.below(w.body.len());
                w.body[i] = if w.body[i] == b'1' { b'2' } else { b'1' };
            }
            m("body byte", w, &[400, 401])
        }
        1 => {
            w.body.extend_from_slice(b" ");
            m("body trailing whitespace", w, AUTH)
        }
        2 => {
            let other = format!("/v1/wallets/{}", world.bob_wallet);
            w.target = match rng.below(6) {
                0 => w.target.replacen("/v1/", "/v1//", 1),
                1 => w.target.to_uppercase(),
                2 => format!("{}/", w.target.split('?').next().unwrap()),
                3 => w.target.replacen("/v1/", "/v1/%2e/", 1),
                4 => w.target.replacen(&world.alice_wallet, &world.bob_wallet, 1),
                _ => other.clone(),
            };
            if w.target == original.target {
                w.target = other;
            }
            m("path", w, ROUTED)
        }
        3 => {
            w.method = (*rng.pick(&["GET", "POST", "PUT", "DELETE", "PATCH"])).to_owned();
            if w.method == original.method {
                w.method = if original.method == "GET" {
                    "POST".into()
                } else {
                    "GET".into()
                };
            }
            m("method", w, ROUTED)
        }
        4 => {
            // The contract signs the path without the query: a changed query is caught as the
            // replay of a used nonce.
            let path = w.target.split('?').next().unwrap().to_owned();
            w.target = format!("{path}?limit={}", 1 + rng.below(100));
            Mutation {
                kind: "query (replayed nonce)",
                wire: w,
                send_original_first: Some(original),
                allowed: &[401, 422],
            }
        }
        5 => {
            let name = *rng.pick(&[
                "X-Service-Key",
                "X-Service-Timestamp",
                "X-Service-Nonce",
                "X-Service-Signature",
            ]);
            w.headers.retain(|(k, _)| k != name);
            m("header dropped", w, AUTH)
        }
        6 => {
            let sig = w.header_mut("X-Service-Signature").unwrap();
            *sig = flip_char(sig, rng);
            m("signature changed", w, AUTH)
        }
        7 => {
            let sig = w.header_mut("X-Service-Signature").unwrap();
            *sig = match rng.below(4) {
                0 => sig[..63].to_owned(),
                1 => format!("{sig}0"),
                2 => String::new(),
                _ => format!("sha256={sig}"),
            };
            m("signature shape", w, AUTH)
        }
        8 => {
            let ts = w.header_mut("X-Service-Timestamp").unwrap();
            let v: i64 = ts.parse().unwrap();
            *ts = (v + if rng.below(2) == 0 { 1 } else { -1 }).to_string();
            m("timestamp changed after signing", w, AUTH)
        }
        9 => {
            // Signed, but just outside the window on either side (the server's clock may be a
            // second ahead of ours, hence 302 in the future).
            let ts = if rng.below(2) == 0 {
                now - 301 - i64::try_from(rng.below(3600)).unwrap()
            } else {
                now + 302 + i64::try_from(rng.below(3600)).unwrap()
            };
            let fresh = world.build(base, ts);
            m("timestamp outside the window", fresh, AUTH)
        }
        10 => {
            let nonce = w.header_mut("X-Service-Nonce").unwrap();
            *nonce = flip_char(nonce, rng);
            m("nonce changed after signing", w, AUTH)
        }
        11 => {
            // Signed over a nonce of the wrong length.
            let len = if rng.below(2) == 0 { 15 } else { 129 };
            let nonce: String = "n".repeat(len);
            let path = original.target.split('?').next().unwrap().to_owned();
            let idem = original
                .headers
                .iter()
                .find(|(k, _)| k == "Idempotency-Key")
                .map(|(_, v)| v.clone());
            let cred = if matches!(base, Base::AdminControl) {
                &world.ops
            } else {
                &world.acme
            };
            let mut wire = Wire::signed(
                cred,
                &original.method,
                &path,
                &original.body,
                idem.as_deref(),
                now,
                &nonce,
            );
            wire.target = original.target.clone();
            m("nonce length", wire, AUTH)
        }
        12 => Mutation {
            kind: "replay",
            wire: w,
            send_original_first: Some(original),
            allowed: AUTH,
        },
        13 => {
            // The same nonce under a new signature (new timestamp): still a used nonce.
            let nonce = original
                .headers
                .iter()
                .find(|(k, _)| k == "X-Service-Nonce")
                .unwrap()
                .1
                .clone();
            let mut again = world.build(base, now - 5);
            let idem = again
                .headers
                .iter()
                .find(|(k, _)| k == "Idempotency-Key")
                .map(|(_, v)| v.clone());
            let cred = if matches!(base, Base::AdminControl) {
                world.ops.clone()
            } else {
                world.acme.clone()
            };
            let target = again.target.clone();
            let path = target.split('?').next().unwrap();
            again = Wire::signed(
                &cred,
                &again.method,
                path,
                &again.body,
                idem.as_deref(),
                now - 5,
                &nonce,
            );
            again.target = target;
            Mutation {
                kind: "nonce reused, signed again",
                wire: again,
                send_original_first: Some(original),
                allowed: AUTH,
            }
        }
        14 => {
            match w.header_mut("Idempotency-Key") {
                Some(k) => *k = flip_char(k, rng),
                None => w
                    .headers
                    .push(("Idempotency-Key".into(), "added-after-signing".into())),
            }
            m("idempotency key changed or added", w, AUTH)
        }
        15 => {
            if w.headers.iter().any(|(k, _)| k == "Idempotency-Key") {
                w.headers.retain(|(k, _)| k != "Idempotency-Key");
            } else {
                *w.header_mut("X-Service-Key").unwrap() = world.globex.api_key.clone();
            }
            m("idempotency key dropped", w, AUTH)
        }
        16 => {
            // Another tenant's key over this tenant's signature.
            *w.header_mut("X-Service-Key").unwrap() = world.globex.api_key.clone();
            m("key of another tenant", w, AUTH)
        }
        17 => {
            // Correctly signed, by a revoked credential.
            let target = original.target.clone();
            let idem = original
                .headers
                .iter()
                .find(|(k, _)| k == "Idempotency-Key")
                .map(|(_, v)| v.clone());
            let mut wire = Wire::signed(
                &world.revoked,
                &original.method,
                target.split('?').next().unwrap(),
                &original.body,
                idem.as_deref(),
                now,
                &fresh_nonce(),
            );
            wire.target = target;
            m("revoked key", wire, AUTH)
        }
        _ => {
            let key = w.header_mut("X-Service-Key").unwrap();
            *key = flip_char(key, rng);
            m("key changed", w, AUTH)
        }
    }
}

#[test]
fn mutated_signed_requests_are_never_accepted() {
    let (mut rng, seed) = Rng::from_env();
    let mutations = profile::pick(3_000, 20_000);
    println!("forged requests: seed {seed} (CUSTODY_RELIABILITY_SEED={seed} replays it)");

    let mut c = Custody::init();
    let acme = c.credential("acme", &["--rate-limit", "100000000"]);
    let globex = c.credential("globex", &["--rate-limit", "100000000"]);
    let ops = c.credential("ops", &["--admin", "--rate-limit", "100000000"]);
    let revoked = c.credential("acme", &["--rate-limit", "100000000"]);
    c.cli_ok(&["credentials", "revoke", "--api-key", &revoked.api_key]);
    c.start();
    let client = c.client(&acme);
    let alice = client.wallet("alice", "TRON");
    let bob = client.wallet("bob", "TRON");
    c.adjust("acme", "alice", "TRON", "TRX", true, "1000000000000");
    let mut world = World {
        addr: c.addr.clone(),
        acme,
        globex,
        ops,
        revoked,
        alice_wallet: alice["id"].as_str().unwrap().to_owned(),
        bob_wallet: bob["id"].as_str().unwrap().to_owned(),
        serial: 0,
    };

    let mut by_kind: BTreeMap<&str, BTreeMap<u16, usize>> = BTreeMap::new();
    let mut accepted_originals: BTreeMap<&str, usize> = BTreeMap::new();
    let started = std::time::Instant::now();
    for i in 0..mutations {
        let base = *rng.pick(&BASES);
        // Unchanged requests between the forged ones: the bases are valid, so a refusal below
        // is the mutation's doing. Window edges just inside count here too.
        if i % 20 == 0 {
            let skew = *rng.pick(&[0_i64, 298, -298]);
            let valid = world.build(base, now_s() + skew);
            let r = valid.send(&world.addr);
            assert!(
                (200..300).contains(&r.status),
                "the unchanged {base:?} (skew {skew} s) was refused: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            );
            *accepted_originals.entry(base_name(base)).or_default() += 1;
        }
        let mutation = mutate(&mut world, base, &mut rng);
        if let Some(original) = &mutation.send_original_first {
            let r = original.send(&world.addr);
            assert!(
                (200..300).contains(&r.status),
                "the original of a replay was refused: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            );
            *accepted_originals.entry(base_name(base)).or_default() += 1;
        }
        let r = mutation.wire.send(&world.addr);
        assert!(
            mutation.allowed.contains(&r.status),
            "seed {seed}, mutation {i} ({}) of {base:?} answered {} {}: {:?}",
            mutation.kind,
            r.status,
            String::from_utf8_lossy(&r.body),
            mutation.wire
        );
        *by_kind
            .entry(mutation.kind)
            .or_default()
            .entry(r.status)
            .or_default() += 1;
    }
    let elapsed = started.elapsed();

    // The store holds what the accepted requests did, and nothing a forged one tried.
    let created = accepted_originals.get("CreateWallet").copied().unwrap_or(0);
    let transfers = accepted_originals.get("Transfer").copied().unwrap_or(0);
    let controls = accepted_originals.get("AdminControl").copied().unwrap_or(0);
    let (balanced, out, err) = c.cli(&["ledger", "reconcile"]);
    assert!(balanced, "the ledger reconciles: {out} {err}");
    let alice_after = c.client(&world.acme).available(&alice, "TRX");
    assert_eq!(
        alice_after,
        1_000_000_000_000 - u128::try_from(transfers).unwrap(),
        "alice paid exactly the accepted transfers"
    );
    let ops_client = c.client(&world.ops);
    let audit = ops_client.get("/v1/admin/audit?limit=100").json();
    let control_rows = audit["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["action"] == "control.update")
        .count();
    assert_eq!(
        control_rows,
        controls.min(100),
        "one audit row per accepted control update: {audit}"
    );
    let db = rusqlite::Connection::open(c.data_dir().join("custody.db")).unwrap();
    let stored_wallets: i64 = db
        .query_row("SELECT COUNT(*) FROM wallets", [], |row| row.get(0))
        .unwrap();
    assert_eq!(
        stored_wallets,
        2 + i64::try_from(created).unwrap(),
        "alice, bob and the accepted wallet creations"
    );

    println!(
        "forged requests: {mutations} mutations, none accepted, {} unchanged requests accepted, in {:.1} s",
        accepted_originals.values().sum::<usize>(),
        elapsed.as_secs_f64()
    );
    for (kind, statuses) in &by_kind {
        println!("  {kind}: {statuses:?}");
    }
}

fn base_name(base: Base) -> &'static str {
    match base {
        Base::GetWallet => "GetWallet",
        Base::GetBalances => "GetBalances",
        Base::ListAssets => "ListAssets",
        Base::ListDeposits => "ListDeposits",
        Base::CreateWallet => "CreateWallet",
        Base::Transfer => "Transfer",
        Base::AdminControl => "AdminControl",
    }
}
