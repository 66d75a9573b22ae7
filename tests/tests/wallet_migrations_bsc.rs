//! A wallet migration end to end on anvil through `custody serve` (decisions §13): alice's BSC
//! wallet moves to a new account while the service runs; `GET /v1/wallets/{id}` serves the new
//! address with the old one in `previous_addresses`; a BNB deposit to the old address is
//! credited to alice and swept to the hot wallet with the old key, and the migration ends
//! `completed`; a deposit to the new address is credited too; the books reconcile. Needs
//! `scripts/install-pytools.sh` (bip-utils checks the new address).

use custody_e2e::anvil::{hex_u64, Anvil};
use custody_e2e::receiver::set_config;
use custody_e2e::{oracle_address, Custody, TEST_MNEMONIC};
use serde_json::json;

const E18: u128 = 1_000_000_000_000_000_000;

use custody_e2e::admin_rows as admin;

fn uuid_v4() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The account component of `m/44'/60'/{account}'/0/{index}`.
fn account_of(path: &str) -> String {
    path.split('/')
        .nth(3)
        .expect("an account component")
        .to_owned()
}

#[test]
fn a_migrated_wallets_old_address_is_still_credited_and_swept() {
    let Some(anvil) = Anvil::start() else { return };
    // The test seed, so the new address can be checked against an independent derivation.
    let seed = std::env::temp_dir().join(format!("custody-mnemonic-{}", uuid_v4()));
    std::fs::write(&seed, TEST_MNEMONIC).unwrap();
    let mut custody = Custody::init_with(
        &[
            "--insecure-dev-seed",
            "--mnemonic-file",
            seed.to_str().unwrap(),
        ],
        &[("CUSTODY_BSC_RPC_URLS", &anvil.url())],
    );
    let _ = std::fs::remove_file(&seed);
    let dir = custody.data_dir();
    set_config(&dir, "bsc", "poll_interval_ms", "100");
    set_config(
        &dir,
        "bsc",
        "start_block",
        &anvil.block_number().to_string(),
    );
    set_config(&dir, "sweeps", "interval_ms", "200");
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    anvil.send_value(anvil.account(0), &hot, E18);
    custody.start();
    let client = custody.client(&cred);
    let alice = client.wallet("alice", "BSC");
    let id = alice["id"].as_str().unwrap().to_owned();
    let old = alice["address"].as_str().unwrap().to_owned();
    let old_path = alice["derivation_path"].as_str().unwrap().to_owned();
    assert_eq!(alice["previous_addresses"], json!([]));
    // Read by id first: the server keeps the wallets it read (custody-store-sqlite's wallet
    // cache), and the migration below, made by another process, must show at once.
    let shown = client.get(&format!("/v1/wallets/{id}"));
    assert_eq!(shown.status, 200);
    assert_eq!(shown.json()["address"], json!(old));

    // Funds sit on the old address when the migration starts (not credited yet: not deep).
    anvil.send_value(anvil.account(1), &old, 2 * E18);

    // Refusals: a clear message and a non-zero exit, nothing migrated.
    for (args, says) in [
        (
            vec![
                "--tenant",
                "acme",
                "--reason",
                "r",
                "--mnemonic-file",
                "/tmp/custody-no-such-mnemonic-file",
            ],
            "--mnemonic-file",
        ),
        (
            vec!["--tenant", "nobody", "--reason", "r"],
            "nothing to migrate",
        ),
        (
            vec!["--tenant", "acme", "--network", "TRON", "--reason", "r"],
            "nothing to migrate",
        ),
        (
            vec!["--tenant", "acme", "--network", "DOGE", "--reason", "r"],
            "--network",
        ),
        (vec!["--tenant", "acme", "--reason", " "], "--reason"),
        (vec!["--reason", "r"], "--tenant"),
    ] {
        let mut all = vec!["wallets", "migrate"];
        all.extend(args.iter().copied());
        let (ok, _, err) = custody.cli(&all);
        assert!(!ok, "{all:?} succeeded");
        assert!(err.contains(says), "{all:?}: {err}");
    }
    assert!(admin(&custody, &ops, "wallet-migrations").is_empty());

    // While serve runs.
    let printed = custody.cli_ok(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--network",
        "BSC",
        "--reason",
        "leaked backup",
    ]);
    let migrations = printed["data"].as_array().unwrap();
    assert_eq!(migrations.len(), 1, "{printed}");
    let m = &migrations[0];
    assert_eq!(
        (&m["wallet_id"], &m["old_address"], &m["status"]),
        (&json!(id), &json!(old), &json!("planned"))
    );
    let new = m["new_address"].as_str().unwrap().to_owned();
    let new_path = m["new_derivation_path"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_eq!(m["old_derivation_path"], old_path.as_str());
    assert_ne!(account_of(&new_path), account_of(&old_path), "{new_path}");
    // acme's first account was 0; the next one of the allocator is 1, its first index 0.
    assert_eq!(
        (old_path.as_str(), new_path.as_str()),
        ("m/44'/60'/0'/0/0", "m/44'/60'/1'/0/0")
    );
    assert_eq!(new, oracle_address(TEST_MNEMONIC, "BSC", 1, 0));

    let shown = client.get(&format!("/v1/wallets/{id}"));
    assert_eq!(shown.status, 200);
    let shown = shown.json();
    assert_eq!(
        (&shown["address"], &shown["derivation_path"]),
        (&json!(new), &json!(new_path))
    );
    let previous = shown["previous_addresses"].as_array().unwrap();
    assert_eq!(previous.len(), 1, "{shown}");
    assert_eq!(
        (&previous[0]["address"], &previous[0]["derivation_path"]),
        (&json!(old), &json!(old_path))
    );
    assert!(previous[0]["retired_at"].is_string());
    // Creating alice's wallet again answers the same wallet, moved.
    assert_eq!(client.wallet("alice", "BSC")["address"], new.as_str());

    // The old address holds BNB above the minimum: the migration is sweeping.
    custody.wait_for(30, "migration sweeping", || {
        admin(&custody, &ops, "wallet-migrations")
            .into_iter()
            .find(|x| x["id"] == m["id"] && x["status"] == "sweeping")
    });

    // The deposit to the old address: credited to alice, then swept with the old key (the
    // sweep's transaction is mined as soon as it is sent: read the hot wallet before).
    let hot_before = anvil.balance(&hot);
    anvil.mine(16);
    custody.wait_for(60, "the old address's deposit credited", || {
        (client.deposits("?status=credited").len() == 1).then_some(())
    });
    let d = client.deposits("?status=credited").remove(0);
    assert_eq!(
        (&d["address"], &d["wallet_id"], &d["external_user_id"]),
        (&json!(old), &json!(id), &json!("alice"))
    );
    assert_eq!(client.available(&alice, "BNB"), 2 * E18);
    let sweep_of = |status: &str| {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["address"] == old.as_str() && s["status"] == status)
    };
    let sent = custody.wait_for(60, "old address swept", || sweep_of("broadcasted"));
    assert_eq!(
        sent["derivation_path"],
        old_path.as_str(),
        "signed with the old key"
    );
    anvil.mine(16);
    let done = custody.wait_for(60, "sweep confirmed", || sweep_of("confirmed"));
    let amount: u128 = done["amount_units"].as_str().unwrap().parse().unwrap();
    assert_eq!(anvil.balance(&old), 0);
    assert_eq!(anvil.balance(&hot), hot_before + amount);
    assert_eq!(
        hex_u64(&anvil.rpc("eth_getTransactionCount", json!([old, "latest"]))),
        1,
        "one transfer, from the old address"
    );
    let finished = custody.wait_for(30, "migration completed", || {
        admin(&custody, &ops, "wallet-migrations")
            .into_iter()
            .find(|x| x["id"] == m["id"] && x["status"] == "completed")
    });
    let steps: Vec<_> = finished["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["status"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(steps, ["planned", "sweeping", "completed"]);
    assert_eq!(
        (
            &finished["tenant"],
            &finished["external_user_id"],
            &finished["network"]
        ),
        (&json!("acme"), &json!("alice"), &json!("BSC"))
    );

    // The new address was added to the running scanner's watch set.
    anvil.send_value(anvil.account(1), &new, E18 / 2);
    anvil.mine(16);
    custody.wait_for(60, "the new address's deposit credited", || {
        (client.deposits("?status=credited").len() == 2).then_some(())
    });
    let to_new = client
        .deposits("?status=credited")
        .into_iter()
        .find(|d| d["address"] == new.as_str())
        .expect("a deposit to the new address");
    assert_eq!(to_new["wallet_id"], id.as_str());
    assert_eq!(client.available(&alice, "BNB"), 2 * E18 + E18 / 2);

    // The operator's reason is in the audit trail.
    let audit = admin(&custody, &ops, "audit");
    assert!(
        audit
            .iter()
            .any(|a| a["action"] == "wallets.migrate" && a["reason"] == "leaked backup"),
        "{audit:?}"
    );

    // `--all` while stopped: alice moves again; both earlier addresses stay hers.
    custody.stop();
    let again = custody.cli_ok(&["wallets", "migrate", "--all", "--reason", "rotation"]);
    let again = again["data"].as_array().unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0]["old_address"], new.as_str());
    assert_eq!(again[0]["new_derivation_path"], "m/44'/60'/2'/0/0");
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
    custody.start();
    let client = custody.client(&cred);
    let shown = client.get(&format!("/v1/wallets/{id}")).json();
    let previous: Vec<_> = shown["previous_addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(previous, [old.clone(), new.clone()]);
    custody.stop();
}
