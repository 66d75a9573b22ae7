//! A wallet migration to a new seed end to end on anvil (decisions §13, `custody wallets
//! migrate --mnemonic-file`): alice's BSC wallet moves to an address of the imported seed;
//! after the restart that loads it, `GET /v1/wallets/{id}` serves the new address, a deposit
//! to the old address is credited and swept with the old seed's key, a deposit to the new
//! address is swept with the new seed's key, later wallets come from the new seed, and the
//! imported mnemonic is nowhere in the data dir in clear. Needs `scripts/install-pytools.sh`
//! (bip-utils derives the expected addresses independently).

use custody_e2e::anvil::{hex_u64, Anvil};
use custody_e2e::receiver::set_config;
use custody_e2e::{oracle_address, Custody, TEST_MNEMONIC};
use serde_json::{json, Value};

const E18: u128 = 1_000_000_000_000_000_000;
/// A BIP39 test vector (trezor/python-mnemonic `vectors.json`), not the service's seed.
const NEW_MNEMONIC: &str =
    "letter advice cage absurd amount doctor acoustic avoid letter advice cage above";

use custody_e2e::admin_rows as admin;

use custody_e2e::private_file as temp_file;

/// Everything under `dir`, as bytes.
fn contains_anywhere(dir: &std::path::Path, needle: &[u8]) -> bool {
    std::fs::read_dir(dir).unwrap().flatten().any(|e| {
        let path = e.path();
        if path.is_dir() {
            return contains_anywhere(&path, needle);
        }
        std::fs::read(&path).is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle))
    })
}

#[test]
fn a_wallet_moved_to_a_new_seed_is_served_from_it_and_both_addresses_are_swept() {
    let Some(anvil) = Anvil::start() else { return };
    let seed = temp_file(TEST_MNEMONIC);
    let mut custody = Custody::init_with(
        &[
            "--insecure-dev-seed",
            "--mnemonic-file",
            seed.to_str().unwrap(),
        ],
        &[("CUSTODY_BSC_RPC_URLS", &anvil.url())],
    );
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
    assert_eq!(old, oracle_address(TEST_MNEMONIC, "BSC", 0, 0));
    anvil.send_value(anvil.account(1), &old, 2 * E18);
    custody.stop();

    // The seed the service already has is refused; nothing is imported.
    let (ok, _, err) = custody.cli(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--reason",
        "r",
        "--mnemonic-file",
        seed.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("already has this seed"), "{err}");
    let _ = std::fs::remove_file(&seed);

    let new_seed = temp_file(NEW_MNEMONIC);
    // Readable by others: refused, whatever it holds.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&new_seed, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (ok, _, err) = custody.cli(&[
            "wallets",
            "migrate",
            "--tenant",
            "acme",
            "--reason",
            "r",
            "--mnemonic-file",
            new_seed.to_str().unwrap(),
        ]);
        assert!(!ok);
        assert!(
            err.contains("readable by its group or others") && err.contains("chmod 600"),
            "{err}"
        );
        std::fs::set_permissions(&new_seed, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    // A tenant with nothing to move: the seed is not imported either.
    let (ok, _, err) = custody.cli(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--network",
        "TRON",
        "--reason",
        "r",
        "--mnemonic-file",
        new_seed.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(err.contains("new seed was not imported"), "{err}");
    let (ok, out, err) = custody.cli(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--network",
        "BSC",
        "--reason",
        "seed compromised",
        "--mnemonic-file",
        new_seed.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let printed: Value = serde_json::from_str(&out).unwrap();
    // The same file again (an operator finishing a run that stopped part-way): refused, with
    // how to go on.
    let (again, _, refused) = custody.cli(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--reason",
        "r",
        "--mnemonic-file",
        new_seed.to_str().unwrap(),
    ]);
    assert!(!again);
    assert!(
        refused.contains("already has this seed") && refused.contains("without --mnemonic-file"),
        "{refused}"
    );
    // The hot wallets move only when rotated: the operator is told how.
    assert!(
        err.contains("hot wallets stay on the seed") && err.contains("custody treasury rotate"),
        "{err}"
    );
    let _ = std::fs::remove_file(&new_seed);
    let m = printed["data"][0].clone();
    let new = m["new_address"].as_str().unwrap().to_owned();
    assert_eq!(m["old_address"], old.as_str());
    assert_eq!(m["new_derivation_path"], "m/44'/60'/1'/0/0");
    assert_eq!(
        new,
        oracle_address(NEW_MNEMONIC, "BSC", 1, 0),
        "derived from the imported seed"
    );
    assert_ne!(new, oracle_address(TEST_MNEMONIC, "BSC", 1, 0));
    // Kept sealed like the first seed: no word sequence of it is in the data dir in clear.
    assert!(!contains_anywhere(&dir, b"letter advice cage absurd"));

    // The restart loads both seeds.
    custody.start();
    let client = custody.client(&cred);
    let shown = client.get(&format!("/v1/wallets/{id}")).json();
    assert_eq!(shown["address"], new.as_str());
    assert_eq!(shown["previous_addresses"][0]["address"], old.as_str());
    // A later wallet of the tenant comes from the new seed too.
    let bob = client.wallet("bob", "BSC");
    assert_eq!(
        bob["address"],
        oracle_address(NEW_MNEMONIC, "BSC", 1, 1).as_str()
    );

    // The old address's deposit: credited to alice, swept with the old seed's key.
    let hot_before = anvil.balance(&hot);
    anvil.mine(16);
    custody.wait_for(60, "the old address's deposit credited", || {
        (client.deposits("?status=credited").len() == 1).then_some(())
    });
    assert_eq!(client.available(&alice, "BNB"), 2 * E18);
    let sweep_of = |address: &str, status: &str| {
        admin(&custody, &ops, "sweeps")
            .into_iter()
            .find(|s| s["address"] == address && s["status"] == status)
    };
    custody.wait_for(60, "old address swept", || sweep_of(&old, "broadcasted"));
    anvil.mine(16);
    let done = custody.wait_for(60, "sweep confirmed", || sweep_of(&old, "confirmed"));
    assert_eq!(done["derivation_path"], "m/44'/60'/0'/0/0");
    let swept: u128 = done["amount_units"].as_str().unwrap().parse().unwrap();
    assert_eq!(anvil.balance(&old), 0);
    assert_eq!(anvil.balance(&hot), hot_before + swept);

    // The new address's deposit: credited, swept with the new seed's key.
    anvil.send_value(anvil.account(1), &new, 2 * E18);
    anvil.mine(16);
    custody.wait_for(60, "the new address's deposit credited", || {
        (client.deposits("?status=credited").len() == 2).then_some(())
    });
    custody.wait_for(60, "new address swept", || sweep_of(&new, "broadcasted"));
    anvil.mine(16);
    custody.wait_for(60, "new sweep confirmed", || sweep_of(&new, "confirmed"));
    assert_eq!(anvil.balance(&new), 0);
    assert_eq!(
        hex_u64(&anvil.rpc("eth_getTransactionCount", json!([new, "latest"]))),
        1,
        "one transfer, signed by the new seed's key"
    );
    assert_eq!(client.available(&alice, "BNB"), 4 * E18);
    let audit = admin(&custody, &ops, "audit");
    assert!(audit
        .iter()
        .any(|a| a["action"] == "wallets.migrate" && a["new_value"]["seed_generation"] == 1));
    custody.stop();
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
}

/// A migration whose old address a seed imported after `serve` started derives (alice moved to
/// the new seed, then moved again, both while `serve` runs): the running service cannot
/// derive that address's key, and leaves the migration alone instead of failing it for a lost
/// key; after the restart that loads the seed it completes.
#[test]
fn a_migration_from_a_seed_this_process_has_not_loaded_waits_for_the_restart() {
    let Some(anvil) = Anvil::start() else { return };
    let mut custody = Custody::init_with(
        &["--insecure-dev-seed"],
        &[("CUSTODY_BSC_RPC_URLS", &anvil.url())],
    );
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
    custody.start();
    let client = custody.client(&cred);
    client.wallet("alice", "BSC");
    let migrations = |custody: &Custody| admin(custody, &ops, "wallet-migrations");

    let new_seed = temp_file(NEW_MNEMONIC);
    let (ok, _, err) = custody.cli(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--network",
        "BSC",
        "--reason",
        "seed compromised",
        "--mnemonic-file",
        new_seed.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_file(&new_seed);
    assert!(ok, "{err}");
    // The old address is the first seed's: this process checks it and completes the move.
    custody.wait_for(60, "the first migration completed", || {
        migrations(&custody)
            .into_iter()
            .find(|m| m["status"] == "completed")
    });
    let printed = custody.cli_ok(&[
        "wallets",
        "migrate",
        "--tenant",
        "acme",
        "--network",
        "BSC",
        "--reason",
        "once more",
    ]);
    let second = printed["data"][0]["id"].as_str().unwrap().to_owned();
    // Its old address is the new seed's, which this process has not loaded.
    std::thread::sleep(std::time::Duration::from_millis(2_000));
    let m = migrations(&custody)
        .into_iter()
        .find(|m| m["id"] == second.as_str())
        .unwrap();
    assert_ne!(m["status"], "failed", "no key is lost: {m}");
    assert_ne!(m["status"], "completed", "{m}");

    custody.stop();
    custody.start();
    custody.wait_for(60, "the second migration completed", || {
        migrations(&custody)
            .into_iter()
            .find(|m| m["id"] == second.as_str() && m["status"] == "completed")
    });
    custody.stop();
}
