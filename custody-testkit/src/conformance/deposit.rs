//! [`DepositRepo`](custody_core::deposit::DepositRepo): deposit records and the queries of the
//! pipeline and the API.

use std::sync::Arc;

use custody_core::deposit::{Deposit, DepositFilter, DepositStatus, HistoryStep};
use custody_core::ports::store::Store;
use custody_core::{Amount, Network};

use super::{addr, assert_port_error, at, hash, r, suite, tid, uid, w, wallet_row};

suite!(
    /// Deposits: one per identity, updated in state only, listed and summed.
    deposit_suite {
        deposits_round_trip_and_are_found_by_identity,
        a_deposit_identity_is_stored_once,
        an_update_moves_state_not_identity,
        deposits_are_listed_newest_first_with_filters,
        open_deposits_are_pending_or_credited_recently,
        pending_figures_count_and_sum_pending_deposits,
        shortfalls_and_credited_sums_are_summed_per_user_and_address,
        deposits_from_a_sender_are_paged_by_id,
    }
);

const ALICE_WALLET: u128 = 1;
const BOB_WALLET: u128 = 2;
const TRON_WALLET: u128 = 3;
const OTHER_WALLET: u128 = 4;

async fn with_wallets(s: &dyn Store) {
    w(s, |tx| {
        tx.insert_wallet(&wallet_row(
            ALICE_WALLET,
            "acme",
            "alice",
            Network::Bsc,
            "0xA11CE",
        ))?;
        tx.insert_wallet(&wallet_row(
            BOB_WALLET,
            "acme",
            "bob",
            Network::Bsc,
            "0xB0B",
        ))?;
        tx.insert_wallet(&wallet_row(
            TRON_WALLET,
            "acme",
            "alice",
            Network::Tron,
            "TA11CE",
        ))?;
        tx.insert_wallet(&wallet_row(
            OTHER_WALLET,
            "other",
            "alice",
            Network::Bsc,
            "0x07E4",
        ))
    })
    .await
    .unwrap();
}

/// A deposit to `wallet` (one of the four above).
fn deposit(n: u128, wallet: u128, tx_hash: &str, log_index: Option<u32>, created: i64) -> Deposit {
    let (tenant, user, network, address) = match wallet {
        ALICE_WALLET => ("acme", "alice", Network::Bsc, "0xA11CE"),
        BOB_WALLET => ("acme", "bob", Network::Bsc, "0xB0B"),
        TRON_WALLET => ("acme", "alice", Network::Tron, "TA11CE"),
        _ => ("other", "alice", Network::Bsc, "0x07E4"),
    };
    Deposit {
        id: uid(n),
        tenant: tid(tenant),
        network,
        asset: "USDT".into(),
        external_user_id: user.into(),
        wallet_id: uid(wallet),
        address: addr(network, address),
        tx_hash: hash(tx_hash).to_hex(),
        log_index,
        from_address: "0x0000000000000000000000000000000000000001".into(),
        amount: Amount::from_units(u128::MAX - n),
        block_number: Some(100),
        block_hash: Some(format!("hash-100-{n}")),
        confirmations: 1,
        required_confirmations: 15,
        status: DepositStatus::Detected,
        history: vec![HistoryStep {
            status: "detected".into(),
            block_number: Some(100),
            block_hash: Some(format!("hash-100-{n}")),
            at: at(created).to_rfc3339(),
        }],
        credit_tx_id: None,
        shortfall: Amount::ZERO,
        created_at: at(created),
        updated_at: at(created),
    }
}

fn with(mut d: Deposit, status: DepositStatus, block: Option<u64>) -> Deposit {
    d.status = status;
    d.block_number = block;
    d
}

async fn insert(s: &dyn Store, deposits: Vec<Deposit>) {
    w(s, move |tx| {
        deposits.iter().try_for_each(|d| tx.insert_deposit(d))
    })
    .await
    .unwrap();
}

fn ids(deposits: &[Deposit]) -> Vec<u128> {
    deposits.iter().map(|d| d.id.as_u128()).collect()
}

async fn deposits_round_trip_and_are_found_by_identity(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    // A native transfer and a token transfer of one transaction are two deposits.
    let native = deposit(10, ALICE_WALLET, "aa01", None, 1_000);
    let mut token = deposit(11, ALICE_WALLET, "aa01", Some(0), 1_000);
    token.asset = "BNB".into();
    token.credit_tx_id = Some(uid(99));
    token.history.push(HistoryStep {
        status: "confirming".into(),
        block_number: None,
        block_hash: None,
        at: at(2_000).to_rfc3339(),
    });
    insert(s, vec![native.clone(), token.clone()]).await;
    let found = r(s, |tx| {
        Ok((
            tx.deposit_by_identity(Network::Bsc, &hash("aa01"), None)?,
            tx.deposit_by_identity(Network::Bsc, &hash("aa01"), Some(0))?,
            tx.deposit_by_identity(Network::Bsc, &hash("aa01"), Some(1))?,
            tx.deposit_by_identity(Network::Tron, &hash("aa01"), None)?,
            tx.deposit_by_id(&tid("acme"), uid(11))?,
            tx.deposit_by_id(&tid("other"), uid(11))?,
        ))
    })
    .await;
    assert_eq!(found.0, Some(native));
    assert_eq!(found.1, Some(token.clone()));
    assert_eq!((found.2, found.3), (None, None));
    assert_eq!(found.4, Some(token), "by id within the tenant");
    assert_eq!(found.5, None, "another tenant's deposit is not found");
}

async fn a_deposit_identity_is_stored_once(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    let first = deposit(10, ALICE_WALLET, "aa01", Some(3), 1_000);
    insert(s, vec![first.clone()]).await;
    // The same transfer seen again under a new id; another transfer under the same id; a
    // deposit to a wallet that does not exist.
    let again = deposit(11, BOB_WALLET, "aa01", Some(3), 2_000);
    assert_port_error(w(s, move |tx| tx.insert_deposit(&again)).await);
    let same_id = deposit(10, ALICE_WALLET, "bb02", Some(3), 2_000);
    assert_port_error(w(s, move |tx| tx.insert_deposit(&same_id)).await);
    let mut no_wallet = deposit(12, ALICE_WALLET, "cc03", None, 2_000);
    no_wallet.wallet_id = uid(404);
    assert_port_error(w(s, move |tx| tx.insert_deposit(&no_wallet)).await);
    // The same hash and position on another network is another transfer.
    insert(s, vec![deposit(13, TRON_WALLET, "aa01", Some(3), 2_000)]).await;
    let listed = r(s, |tx| {
        tx.list_deposits(&tid("acme"), &DepositFilter::default(), 10)
    })
    .await;
    assert_eq!(ids(&listed), [13, 10]);
    assert_eq!(listed[1], first);
}

async fn an_update_moves_state_not_identity(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    let original = deposit(10, ALICE_WALLET, "aa01", Some(3), 1_000);
    insert(s, vec![original.clone()]).await;
    let mut moved = original.clone();
    moved.block_number = None;
    moved.block_hash = None;
    moved.confirmations = 0;
    moved
        .transition(DepositStatus::Orphaned, at(3_000))
        .unwrap();
    moved.credit_tx_id = Some(uid(77));
    // What the deposit is cannot change through an update.
    let mut attempt = moved.clone();
    attempt.tenant = tid("other");
    attempt.amount = Amount::from_units(1);
    attempt.address = addr(Network::Bsc, "0xB0B");
    attempt.from_address = "0xEVE".into();
    attempt.asset = "BNB".into();
    attempt.external_user_id = "bob".into();
    attempt.tx_hash = "ff99".into();
    attempt.log_index = Some(9);
    attempt.required_confirmations = 1;
    attempt.created_at = at(9_999);
    w(s, move |tx| tx.update_deposit(&attempt)).await.unwrap();
    let stored = r(s, |tx| tx.deposit_by_id(&tid("acme"), uid(10))).await;
    assert_eq!(stored, Some(moved));
    let mut missing = original;
    missing.id = uid(404);
    assert_port_error(w(s, move |tx| tx.update_deposit(&missing)).await);
}

async fn deposits_are_listed_newest_first_with_filters(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    insert(
        s,
        vec![
            deposit(1, ALICE_WALLET, "01", None, 10),
            with(
                deposit(2, BOB_WALLET, "02", None, 30),
                DepositStatus::Credited,
                Some(100),
            ),
            deposit(3, TRON_WALLET, "03", None, 20),
            deposit(4, ALICE_WALLET, "04", None, 30),
            deposit(5, OTHER_WALLET, "05", None, 40),
        ],
    )
    .await;
    let list = |status: Option<DepositStatus>, user: Option<&'static str>, limit: usize| {
        let filter = DepositFilter {
            status,
            external_user_id: user.map(str::to_owned),
        };
        r(s, move |tx| tx.list_deposits(&tid("acme"), &filter, limit))
    };
    // Newest first; equal times, the latest inserted first; the tenant's only.
    assert_eq!(ids(&list(None, None, 10).await), [4, 2, 3, 1]);
    assert_eq!(ids(&list(None, None, 2).await), [4, 2]);
    assert!(list(None, None, 0).await.is_empty());
    assert_eq!(ids(&list(None, Some("alice"), 10).await), [4, 3, 1]);
    assert_eq!(
        ids(&list(Some(DepositStatus::Credited), None, 10).await),
        [2]
    );
    assert_eq!(
        ids(&list(Some(DepositStatus::Detected), Some("alice"), 2).await),
        [4, 3]
    );
    assert!(list(Some(DepositStatus::Credited), Some("alice"), 10)
        .await
        .is_empty());
    let other = r(s, |tx| {
        tx.list_deposits(&tid("other"), &DepositFilter::default(), 10)
    })
    .await;
    assert_eq!(ids(&other), [5]);
}

async fn open_deposits_are_pending_or_credited_recently(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    use DepositStatus::*;
    insert(
        s,
        vec![
            with(
                deposit(1, ALICE_WALLET, "01", None, 1),
                Confirmed,
                Some(120),
            ),
            with(deposit(2, ALICE_WALLET, "02", None, 2), Detected, Some(110)),
            with(deposit(3, BOB_WALLET, "03", None, 3), Credited, Some(115)),
            with(deposit(4, BOB_WALLET, "04", None, 4), Credited, Some(99)),
            with(deposit(5, ALICE_WALLET, "05", None, 5), Orphaned, None),
            with(deposit(6, ALICE_WALLET, "06", None, 6), Reversed, Some(130)),
            with(
                deposit(7, TRON_WALLET, "07", None, 7),
                Confirming,
                Some(111),
            ),
            with(
                deposit(8, OTHER_WALLET, "08", None, 8),
                Confirming,
                Some(110),
            ),
            with(deposit(9, ALICE_WALLET, "09", None, 9), Credited, Some(100)),
        ],
    )
    .await;
    let open =
        |network: Network, min_block: u64| r(s, move |tx| tx.open_deposits(network, min_block));
    // By block, then insertion; credited ones only from `min_block` on.
    assert_eq!(ids(&open(Network::Bsc, 100).await), [9, 2, 8, 3, 1]);
    assert_eq!(ids(&open(Network::Bsc, 116).await), [2, 8, 1]);
    assert_eq!(ids(&open(Network::Bsc, u64::MAX).await), [2, 8, 1]);
    assert_eq!(ids(&open(Network::Bsc, 0).await), [4, 9, 2, 8, 3, 1]);
    assert_eq!(ids(&open(Network::Tron, 0).await), [7]);
}

async fn pending_figures_count_and_sum_pending_deposits(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    use DepositStatus::*;
    let units = |d: Deposit, n: u128| Deposit {
        amount: Amount::from_units(n),
        ..d
    };
    let mut bnb = units(deposit(6, ALICE_WALLET, "06", None, 6), 1_000);
    bnb.asset = "BNB".into();
    insert(
        s,
        vec![
            units(deposit(1, ALICE_WALLET, "01", None, 1), 5),
            units(
                with(
                    deposit(2, ALICE_WALLET, "02", None, 2),
                    Confirming,
                    Some(100),
                ),
                7,
            ),
            units(
                with(
                    deposit(3, ALICE_WALLET, "03", None, 3),
                    Confirmed,
                    Some(100),
                ),
                11,
            ),
            units(
                with(deposit(4, ALICE_WALLET, "04", None, 4), Credited, Some(100)),
                100,
            ),
            units(
                with(deposit(5, ALICE_WALLET, "05", None, 5), Orphaned, None),
                200,
            ),
            bnb,
            units(deposit(7, BOB_WALLET, "07", None, 7), 13),
            units(deposit(8, TRON_WALLET, "08", None, 8), 17),
            units(deposit(9, OTHER_WALLET, "09", None, 9), 19),
        ],
    )
    .await;
    let figures = r(s, |tx| {
        Ok((
            tx.pending_deposit_count(Network::Bsc)?,
            tx.pending_deposit_count(Network::Tron)?,
            tx.pending_deposit_units(&tid("acme"), "alice", Network::Bsc, "USDT")?,
            tx.pending_deposit_units(&tid("acme"), "alice", Network::Bsc, "BNB")?,
            tx.pending_deposit_units(&tid("acme"), "alice", Network::Tron, "USDT")?,
            tx.pending_deposit_units(&tid("acme"), "bob", Network::Bsc, "USDT")?,
            tx.pending_deposit_units(&tid("acme"), "carol", Network::Bsc, "USDT")?,
        ))
    })
    .await;
    assert_eq!(
        figures,
        (
            6,
            1,
            Amount::from_units(23),
            Amount::from_units(1_000),
            Amount::from_units(17),
            Amount::from_units(13),
            Amount::ZERO,
        )
    );
    let codes = |c: &[&str]| c.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let (bsc, none) = (codes(&["USDT", "USDC", "BNB", "USDT"]), codes(&[]));
    let at_once = r(s, move |tx| {
        Ok((
            tx.pending_deposit_units_of(&tid("acme"), "alice", Network::Bsc, &bsc)?,
            tx.pending_deposit_units_of(&tid("acme"), "alice", Network::Bsc, &none)?,
            tx.pending_deposit_units_of(&tid("acme"), "carol", Network::Bsc, &bsc)?,
        ))
    })
    .await;
    let u = Amount::from_units;
    assert_eq!(
        at_once,
        (
            vec![u(23), Amount::ZERO, u(1_000), u(23)],
            vec![],
            vec![Amount::ZERO; 4]
        ),
        "several assets at once, in the order asked"
    );
    // More assets than a store may ask at once (SQLite: 16), repeats included.
    let many: Vec<String> = ["USDT", "BNB", "USDC"]
        .iter()
        .cycle()
        .take(40)
        .map(|s| (*s).to_owned())
        .collect();
    let expected: Vec<Amount> = many
        .iter()
        .map(|a| match a.as_str() {
            "USDT" => u(23),
            "BNB" => u(1_000),
            _ => Amount::ZERO,
        })
        .collect();
    let got = r(s, move |tx| {
        tx.pending_deposit_units_of(&tid("acme"), "alice", Network::Bsc, &many)
    })
    .await;
    assert_eq!(got, expected, "forty assets, in the order asked");
}

async fn shortfalls_and_credited_sums_are_summed_per_user_and_address(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    let mut owing = with(
        deposit(1, ALICE_WALLET, "a1", None, 10),
        DepositStatus::Credited,
        Some(100),
    );
    owing.amount = Amount::from_units(50);
    let mut second = with(
        deposit(2, ALICE_WALLET, "a2", None, 20),
        DepositStatus::Credited,
        Some(101),
    );
    second.amount = Amount::from_units(7);
    let mut bobs = with(
        deposit(3, BOB_WALLET, "b1", None, 30),
        DepositStatus::Credited,
        Some(102),
    );
    bobs.amount = Amount::from_units(5);
    let mut gone = with(
        deposit(4, BOB_WALLET, "b2", None, 40),
        DepositStatus::Reversed,
        None,
    );
    gone.amount = Amount::from_units(9);
    insert(s, vec![owing.clone(), second, bobs, gone.clone()]).await;
    // A reversal the user could not cover: the shortfall is kept with the deposit.
    gone.shortfall = Amount::from_units(4);
    owing.shortfall = Amount::from_units(3);
    w(s, move |tx| {
        tx.update_deposit(&gone)?;
        tx.update_deposit(&owing)
    })
    .await
    .unwrap();
    let (bob_owes, alice_owes, carol_owes, other_asset, credited) = r(s, |tx| {
        Ok((
            tx.owed_after_reorg_units(&tid("acme"), "bob", Network::Bsc, "USDT")?,
            tx.owed_after_reorg_units(&tid("acme"), "alice", Network::Bsc, "USDT")?,
            tx.owed_after_reorg_units(&tid("acme"), "carol", Network::Bsc, "USDT")?,
            tx.owed_after_reorg_units(&tid("acme"), "bob", Network::Bsc, "BNB")?,
            tx.credited_by_address(Network::Bsc)?,
        ))
    })
    .await;
    assert_eq!(bob_owes, Amount::from_units(4));
    assert_eq!(alice_owes, Amount::from_units(3));
    assert_eq!(carol_owes, Amount::ZERO);
    assert_eq!(other_asset, Amount::ZERO);
    // Credited deposits only, summed per (address, asset), ordered by address then asset.
    assert_eq!(
        credited,
        vec![
            (
                addr(Network::Bsc, "0xA11CE"),
                "USDT".to_owned(),
                Amount::from_units(57)
            ),
            (
                addr(Network::Bsc, "0xB0B"),
                "USDT".to_owned(),
                Amount::from_units(5)
            ),
        ]
    );
}

async fn deposits_from_a_sender_are_paged_by_id(store: Arc<dyn Store>) {
    let s = store.as_ref();
    with_wallets(s).await;
    const HOT: &str = "0x00000000000000000000000000000000000000aa";
    let from_hot = |mut d: Deposit| {
        d.from_address = HOT.into();
        d
    };
    // Inserted out of id order, across tenants and networks; one from somebody else.
    insert(
        s,
        vec![
            from_hot(deposit(0x30, ALICE_WALLET, "c1", None, 10)),
            from_hot(deposit(0x10, OTHER_WALLET, "c2", None, 11)),
            deposit(0x15, BOB_WALLET, "c3", None, 12),
            from_hot(deposit(0x20, BOB_WALLET, "c4", Some(2), 13)),
            from_hot(deposit(0x25, TRON_WALLET, "c5", None, 14)),
        ],
    )
    .await;
    let page = |after: Option<uuid::Uuid>, limit: usize| {
        r(s, move |tx| {
            tx.deposits_from(Network::Bsc, HOT, after, limit)
        })
    };
    let ids = |v: Vec<Deposit>| v.into_iter().map(|d| d.id).collect::<Vec<_>>();
    assert_eq!(ids(page(None, 10).await), [uid(0x10), uid(0x20), uid(0x30)]);
    assert_eq!(ids(page(None, 2).await), [uid(0x10), uid(0x20)]);
    assert_eq!(ids(page(Some(uid(0x20)), 2).await), [uid(0x30)]);
    assert!(page(Some(uid(0x30)), 2).await.is_empty());
    let tron = r(s, |tx| tx.deposits_from(Network::Tron, HOT, None, 10)).await;
    assert_eq!(ids(tron), [uid(0x25)]);
}
