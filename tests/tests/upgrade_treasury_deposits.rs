//! The upgrade path of a data dir in which an older version credited the treasury's own gas
//! top-ups to users as deposits: `custody ledger repair-treasury-deposits` finds each one,
//! reverses it with an audited ledger entry that never overdraws, leaves a real deposit sent by
//! the hot wallet (a withdrawal to another user's deposit address) alone, and reports what it
//! did; a second run does nothing.
//!
//! The older version's records are written into the service's own SQLite file, through the
//! store and the deposit pipeline the service runs, as that version's scanner wrote them (it
//! did not know the hot wallet).

use std::sync::atomic::{AtomicU64, Ordering};

use custody_core::chain::{ChainAddress, TxHash};
use custody_core::deposit::{self, PipelineSettings, WatchSet};
use custody_core::outgoing::{Attempt, Bid, OutgoingTx, Purpose};
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};
use custody_core::ports::clock::Entropy;
use custody_core::ports::sender::Payment;
use custody_core::ports::store::write;
use custody_core::wallet::hot_wallet_path;
use custody_core::{Amount, AssetCatalog, Network, Timestamp};
use custody_e2e::Custody;
use custody_store_sqlite::{SqliteStore, StoreOptions};
use serde_json::Value;

const TOP_UP: u128 = 7_000;
const WITHDRAWN: u128 = 5_000;

#[derive(Default)]
struct Counter(AtomicU64);

impl Entropy for Counter {
    fn fill(&self, buf: &mut [u8]) {
        let n = self.0.fetch_add(1, Ordering::Relaxed).to_be_bytes();
        for (i, b) in buf.iter_mut().enumerate() {
            *b = n[i % 8] ^ u8::try_from(i).unwrap_or(0);
        }
    }
}

fn hash(tag: &str) -> TxHash {
    TxHash::parse(&format!("{tag:0>64}")).unwrap()
}

fn native(hot: &str, to: &str, units: u128, tag: &str) -> ObservedTransfer {
    ObservedTransfer {
        tx_hash: hash(tag),
        log_index: None,
        asset_code: "BNB".into(),
        from: ChainAddress::parse(Network::Bsc, hot).unwrap(),
        to: ChainAddress::parse(Network::Bsc, to).unwrap(),
        amount: Amount::from_units(units),
        succeeded: true,
    }
}

fn paid_by(purpose: Purpose, id: u128, hot: &str, to: &str, units: u128, tag: &str) -> OutgoingTx {
    let now = Timestamp::from_unix_millis(1_800_000_000_000);
    let mut out = OutgoingTx::new(
        uuid::Uuid::from_u128(id),
        Network::Bsc,
        purpose,
        uuid::Uuid::from_u128(id + 100),
        hot.to_owned(),
        hot_wallet_path(Network::Bsc),
        Payment::Native {
            to: to.to_owned(),
            amount: Amount::from_units(units),
        },
        Some(u64::try_from(id).unwrap()),
        now,
    );
    out.attempts.push(Attempt {
        hash: hash(tag).to_hex(),
        raw: vec![0xf8],
        bid: Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1,
        },
        expires_at_ms: None,
        signed_at: now,
        sent_at: Some(now),
        last_answer: None,
        plan: None,
        reference_block: None,
        void: false,
    });
    out
}

/// What an older version left: alice's address topped up (f1) and credited to her, bob paid by
/// a withdrawal (f3) and credited, as he should be.
fn write_older_versions_records(custody: &Custody, hot: &str, alice: &str, bob: &str) {
    let store = SqliteStore::open(
        &custody.data_dir().join("custody.db"),
        StoreOptions::default(),
    )
    .unwrap();
    let watch = std::sync::Arc::new(WatchSet::new());
    watch.extend(Network::Bsc, [alice.to_owned(), bob.to_owned()]);
    let settings = PipelineSettings {
        network: Network::Bsc,
        required_confirmations: 1,
        blocks_kept: 100,
        hot_wallets: Vec::new(),
    };
    let block = ScannedBlock {
        header: BlockHeader {
            number: 1,
            hash: format!("{:064x}", 1),
            parent_hash: format!("{:064x}", 0),
            timestamp_ms: 0,
        },
        transfers: vec![
            native(hot, alice, TOP_UP, "f1"),
            native(hot, bob, WITHDRAWN, "f3"),
        ],
    };
    let payments = [
        paid_by(Purpose::Funding, 1, hot, alice, TOP_UP, "f1"),
        paid_by(Purpose::Withdrawal, 2, hot, bob, WITHDRAWN, "f3"),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(write(&store, move |tx| {
        let now = Timestamp::from_unix_millis(1_800_000_000_000);
        deposit::apply_block(
            tx,
            &Counter::default(),
            &settings,
            &AssetCatalog::mainnet(),
            &watch,
            &block,
            now,
        )?;
        for p in &payments {
            tx.insert_outgoing(p)?;
        }
        Ok(())
    }))
    .unwrap();
    store.close();
}

fn units(v: &Value) -> u128 {
    v.as_str().unwrap().parse().unwrap()
}

#[test]
fn credited_top_ups_of_an_older_version_are_taken_back_once_and_reported() {
    let mut custody = Custody::init();
    let cred = custody.credential("acme", &["--rate-limit", "100000"]);
    let ops = custody.credential("ops", &["--admin", "--rate-limit", "100000"]);
    let hot = custody.hot_wallet("BSC");
    custody.start();
    let client = custody.client(&cred);
    let (alice, bob) = (client.wallet("alice", "BSC"), client.wallet("bob", "BSC"));
    custody.stop();
    let address = |w: &Value| w["address"].as_str().unwrap().to_owned();
    write_older_versions_records(&custody, &hot, &address(&alice), &address(&bob));

    // Alice spent part of the top-up before the upgrade.
    let spent = 4_000u128;
    custody.cli_ok(&[
        "ledger",
        "adjust",
        "--tenant",
        "acme",
        "--external-user-id",
        "alice",
        "--network",
        "BSC",
        "--asset",
        "BNB",
        "--debit",
        "--amount-units",
        &spent.to_string(),
        "--reason",
        "paid out",
    ]);
    let planned = custody.cli_ok(&["ledger", "repair-treasury-deposits", "--dry-run"]);
    let rows = planned["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{planned}");
    assert_eq!(rows[0]["action"], "would_reverse");
    assert_eq!(rows[0]["external_user_id"], "alice");
    custody.start();
    assert_eq!(
        custody.client(&cred).available(&alice, "BNB"),
        TOP_UP - spent,
        "a dry run changes nothing"
    );
    custody.stop();

    let done = custody.cli_ok(&["ledger", "repair-treasury-deposits"]);
    let rows = done["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{done}");
    assert_eq!(rows[0]["action"], "reversed");
    assert_eq!(rows[0]["treasury_move"], "treasury_funding");
    assert_eq!(rows[0]["amount_units"], TOP_UP.to_string());
    assert_eq!(
        rows[0]["owed_units"],
        spent.to_string(),
        "never overdrawn: owed"
    );
    // A second run changes nothing and lists what is still owed.
    let again = custody.cli_ok(&["ledger", "repair-treasury-deposits"]);
    let rows = again["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{again}");
    assert_eq!(
        (&rows[0]["action"], &rows[0]["owed_units"]),
        (&Value::from("owes"), &Value::from(spent.to_string()))
    );
    // Owed, she can send no BNB until an operator settles it; the house writes it off.
    let deposit = rows[0]["deposit_id"].as_str().unwrap();
    let settle = |how: &str| {
        custody.cli(&[
            "ledger",
            "settle-owed",
            "--tenant",
            "acme",
            "--deposit-id",
            deposit,
            how,
            "--reason",
            "top-up credited by an older version",
        ])
    };
    let (ok, _, err) = settle("--from-user");
    assert!(!ok && err.contains("holds nothing"), "{err}");
    let (ok, out, err) = settle("--write-off");
    assert!(ok, "{err}");
    let settled: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(settled["settled_units"], spent.to_string());
    assert_eq!(settled["still_owed_units"], "0");
    let (ok, _, err) = settle("--write-off");
    assert!(!ok && err.contains("nothing owed"), "{err}");
    let done = custody.cli_ok(&["ledger", "repair-treasury-deposits"]);
    assert_eq!(done["data"], Value::Array(Vec::new()), "{done}");

    custody.start();
    let client = custody.client(&cred);
    // Every asset of both users.
    for (user, wallet) in [("alice", &alice), ("bob", &bob)] {
        for (asset, figures) in client.all_balances(wallet) {
            let held = if (user, asset.as_str()) == ("bob", "BNB") {
                WITHDRAWN
            } else {
                0
            };
            assert_eq!(figures, [held, 0, 0], "{user}'s {asset}");
        }
    }
    let status_of = |user: &str| -> Vec<(String, String)> {
        client
            .deposits(&format!("?external_user_id={user}"))
            .iter()
            .map(|d| {
                (
                    d["asset"].as_str().unwrap().to_owned(),
                    d["status"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(status_of("alice"), [("BNB".into(), "reversed".into())]);
    assert_eq!(status_of("bob"), [("BNB".into(), "credited".into())]);
    // The house: the clearing account holds bob's deposit only.
    let admin = custody.client(&ops);
    let books = admin.ledger_books();
    let expected: std::collections::BTreeMap<String, i128> = [
        ("user:acme:BSC:BNB:alice", 0),
        // Took in what alice spent, then paid the receivable it left.
        ("system:adjustments:BSC:BNB", 0),
        ("system:reorg_receivable:BSC:BNB", 0),
        ("user:acme:BSC:BNB:bob", i128::try_from(WITHDRAWN).unwrap()),
        (
            "system:deposit_clearing:BSC:BNB",
            -i128::try_from(WITHDRAWN).unwrap(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(books, expected);
    let listed = |resource: &str, field: &str, value: &str| {
        let r = admin.get(&format!("/v1/admin/{resource}?limit=100"));
        assert_eq!(r.status, 200);
        r.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row[field] == value)
            .count()
    };
    assert_eq!(listed("alerts", "kind", "treasury_deposit_repaired"), 1);
    assert_eq!(
        listed("audit", "action", "deposit.treasury_move_repaired"),
        1
    );
    assert_eq!(listed("audit", "action", "deposit.owed_written_off"), 1);
    let balance = client.ledger_balance(alice["id"].as_str().unwrap(), "BNB");
    assert_eq!(units(&balance["available_units"]), 0);
    custody.stop();
    let (ok, out, _) = custody.cli(&["ledger", "reconcile"]);
    assert!(ok, "{out}");
}
