//! The deposit pipeline on the memory store with scripted blocks: states, exactly-once credit,
//! reorgs before and after credit, and the crediting kill switch. (The store side of these is
//! covered by the conformance suites, run against every store.)

use std::sync::Arc;

use custody_core::admin::Control;
use custody_core::deposit::{self, DepositFilter, DepositStatus, PipelineSettings, WatchSet};
use custody_core::ledger::{self, UserAccount};
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};
use custody_core::ports::store::{read, write};
use custody_core::wallet::{self, Wallet};
use custody_core::{Amount, AssetCatalog, AssetId, Network, Timestamp};
use custody_testkit::{block_on, test_signer, CountingEntropy, MemoryStore};

const NOW: Timestamp = Timestamp::from_unix_millis(1_800_000_000_000);

struct Chain {
    store: MemoryStore,
    entropy: Arc<CountingEntropy>,
    watch: Arc<WatchSet>,
    settings: PipelineSettings,
    wallet: Wallet,
}

fn hash(number: u64, fork: u8) -> String {
    format!("{fork:02x}{number:062x}")
}

fn block(number: u64, fork: u8, parent_fork: u8, transfers: Vec<ObservedTransfer>) -> ScannedBlock {
    ScannedBlock {
        header: BlockHeader {
            number,
            hash: hash(number, fork),
            parent_hash: hash(number - 1, parent_fork),
            timestamp_ms: 0,
        },
        transfers,
    }
}

fn usdt_to(address: &str, units: u128, tx: &str) -> ObservedTransfer {
    ObservedTransfer {
        tx_hash: custody_core::chain::TxHash::parse(&format!("{tx:0>64}")).expect("hex tag"),
        log_index: Some(3),
        asset_code: "USDT".into(),
        from: custody_core::chain::ChainAddress::parse(
            Network::Bsc,
            "0x0000000000000000000000000000000000000001",
        )
        .expect("an address"),
        to: custody_core::chain::ChainAddress::parse(Network::Bsc, address).expect("an address"),
        amount: Amount::from_units(units),
        succeeded: true,
    }
}

impl Chain {
    async fn new() -> Chain {
        let store = MemoryStore::new();
        let entropy = Arc::new(CountingEntropy::default());
        let signer = test_signer();
        let ids = [uuid::Uuid::from_u128(1), uuid::Uuid::from_u128(2)];
        let created = write(&store, move |tx| {
            wallet::create_wallet(tx, &signer, ids, &tid("acme"), "alice", Network::Bsc, NOW)
        })
        .await
        .unwrap();
        let watch = Arc::new(WatchSet::new());
        watch.extend(Network::Bsc, [created.wallet.address.clone()]);
        let settings = PipelineSettings {
            network: Network::Bsc,
            required_confirmations: 3,
            blocks_kept: 100,
            hot_wallets: Vec::new(),
        };
        Chain {
            store,
            entropy,
            watch,
            settings,
            wallet: created.wallet,
        }
    }

    async fn apply(&self, b: ScannedBlock) -> deposit::BlockOutcome {
        let number = b.header.number;
        let (e, w, s) = (
            Arc::clone(&self.entropy),
            Arc::clone(&self.watch),
            self.settings.clone(),
        );
        write(&self.store, move |tx| {
            deposit::apply_block(tx, e.as_ref(), &s, &AssetCatalog::mainnet(), &w, &b, NOW)
        })
        .await
        .map(|applied| match applied {
            deposit::Applied::Block(outcome) => outcome,
            other => panic!("block {number} not applied: {other:?}"),
        })
        .unwrap()
    }

    async fn rewind(&self, ancestor: u64) -> u32 {
        let (e, s) = (Arc::clone(&self.entropy), self.settings.clone());
        write(&self.store, move |tx| {
            deposit::rewind(tx, e.as_ref(), &s, ancestor, NOW)
        })
        .await
        .unwrap()
    }

    async fn only_deposit(&self) -> deposit::Deposit {
        let mut all = read(&self.store, |tx| {
            Ok(tx.list_deposits(&tid("acme"), &DepositFilter::default(), 10)?)
        })
        .await
        .unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        all.pop().unwrap()
    }

    async fn available(&self) -> Amount {
        read(&self.store, |tx| {
            let a = UserAccount::new("acme", "alice", AssetId::new(Network::Bsc, "USDT"));
            Ok(ledger::user_balance(tx, &a)?.available)
        })
        .await
        .unwrap()
    }

    async fn statuses(&self) -> Vec<String> {
        self.only_deposit()
            .await
            .history
            .into_iter()
            .map(|h| h.status)
            .collect()
    }
}

#[test]
fn a_deposit_is_credited_once_after_the_required_depth() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        let out = chain
            .apply(block(10, 0, 0, vec![usdt_to(&addr, 500, "aa")]))
            .await;
        assert_eq!(out.detected, 1);
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Detected);
        chain.apply(block(11, 0, 0, vec![])).await;
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Confirming);
        assert_eq!(chain.available().await, Amount::ZERO);
        let out = chain.apply(block(12, 0, 0, vec![])).await;
        assert_eq!((out.confirmed, out.credited), (1, 1));
        let d = chain.only_deposit().await;
        assert_eq!((d.status, d.confirmations), (DepositStatus::Credited, 3));
        assert_eq!(chain.available().await, Amount::from_units(500));
        for n in 13..20 {
            chain.apply(block(n, 0, 0, vec![])).await;
        }
        assert_eq!(
            chain.available().await,
            Amount::from_units(500),
            "credited exactly once"
        );
        assert_eq!(
            chain.statuses().await,
            ["detected", "confirming", "confirmed", "credited"]
        );
    });
}

#[test]
fn failed_foreign_and_unknown_transfers_are_never_deposits() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        let mut failed = usdt_to(&addr, 5, "f1");
        failed.succeeded = false;
        let mut unknown_asset = usdt_to(&addr, 5, "f2");
        unknown_asset.asset_code = "SHIB".into();
        let not_ours = usdt_to("0x00000000000000000000000000000000000000ff", 5, "f3");
        let zero = usdt_to(&addr, 0, "f4");
        let out = chain
            .apply(block(10, 0, 0, vec![failed, unknown_asset, not_ours, zero]))
            .await;
        assert_eq!(out.detected, 0);
    });
}

#[test]
fn a_reorg_before_credit_orphans_and_the_remined_transfer_is_credited_once() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        chain
            .apply(block(10, 0, 0, vec![usdt_to(&addr, 70, "bb")]))
            .await;
        chain.apply(block(11, 0, 0, vec![])).await;
        assert_eq!(chain.rewind(9).await, 1);
        let d = chain.only_deposit().await;
        assert_eq!((d.status, d.block_number), (DepositStatus::Orphaned, None));
        // The new chain carries the same transfer one block later.
        chain.apply(block(10, 1, 0, vec![])).await;
        chain
            .apply(block(11, 1, 1, vec![usdt_to(&addr, 70, "bb")]))
            .await;
        chain.apply(block(12, 1, 1, vec![])).await;
        chain.apply(block(13, 1, 1, vec![])).await;
        let d = chain.only_deposit().await;
        assert_eq!(d.status, DepositStatus::Credited);
        assert_eq!(d.block_hash.as_deref(), Some(hash(11, 1).as_str()));
        assert_eq!(
            chain.statuses().await,
            [
                "detected",
                "confirming",
                "orphaned",
                "detected",
                "confirming",
                "confirmed",
                "credited"
            ],
            "history is never erased"
        );
        assert_eq!(chain.available().await, Amount::from_units(70));
    });
}

#[test]
fn a_reorg_after_credit_reverses_with_an_alert() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        for n in 10..=12 {
            let t = if n == 10 {
                vec![usdt_to(&addr, 9, "cc")]
            } else {
                vec![]
            };
            chain.apply(block(n, 0, 0, t)).await;
        }
        assert_eq!(chain.available().await, Amount::from_units(9));
        chain.rewind(9).await;
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Reversed);
        assert_eq!(
            chain.available().await,
            Amount::ZERO,
            "compensating entry posted"
        );
        let alerts = read(&chain.store, |tx| {
            Ok(tx
                .list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default())
        })
        .await
        .unwrap();
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].kind, "deposit_reversed");
        let report = read(&chain.store, |tx| Ok(ledger::reconcile(tx)?))
            .await
            .unwrap();
        assert!(report.balanced, "{:?}", report.discrepancies);
    });
}

#[test]
fn the_crediting_kill_switch_holds_deposits_at_confirmed() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        write(&chain.store, |tx| {
            Ok(tx.put_control(&Control {
                control_key: "kill_switch.deposit_crediting".into(),
                enabled: true,
                reason: "incident".into(),
                updated_by: "test".into(),
                updated_at: NOW,
            })?)
        })
        .await
        .unwrap();
        for n in 10..=14 {
            let t = if n == 10 {
                vec![usdt_to(&addr, 1, "dd")]
            } else {
                vec![]
            };
            chain.apply(block(n, 0, 0, t)).await;
        }
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Confirmed);
        assert_eq!(chain.available().await, Amount::ZERO);
        write(&chain.store, |tx| {
            Ok(tx.put_control(&Control {
                control_key: "kill_switch.deposit_crediting".into(),
                enabled: false,
                reason: "resolved".into(),
                updated_by: "test".into(),
                updated_at: NOW,
            })?)
        })
        .await
        .unwrap();
        let (e, s) = (Arc::clone(&chain.entropy), chain.settings.clone());
        write(&chain.store, move |tx| {
            deposit::advance(tx, e.as_ref(), &s, 14, NOW)
        })
        .await
        .unwrap();
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Credited);
        assert_eq!(chain.available().await, Amount::from_units(1));
    });
}

#[test]
fn a_reversed_deposit_re_mined_is_credited_again_once() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        for n in 10..=12 {
            let t = if n == 10 {
                vec![usdt_to(&addr, 40, "ee")]
            } else {
                vec![]
            };
            chain.apply(block(n, 0, 0, t)).await;
        }
        chain.rewind(9).await;
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Reversed);
        assert_eq!(chain.available().await, Amount::ZERO);
        // The new chain mines the same transfer two blocks later.
        chain.apply(block(10, 1, 0, vec![])).await;
        chain.apply(block(11, 1, 1, vec![])).await;
        chain
            .apply(block(12, 1, 1, vec![usdt_to(&addr, 40, "ee")]))
            .await;
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Detected);
        chain.apply(block(13, 1, 1, vec![])).await;
        chain.apply(block(14, 1, 1, vec![])).await;
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Credited);
        assert_eq!(
            chain.available().await,
            Amount::from_units(40),
            "credited again, once"
        );
        for n in 15..18 {
            chain.apply(block(n, 1, 1, vec![])).await;
        }
        assert_eq!(chain.available().await, Amount::from_units(40));
        let report = read(&chain.store, |tx| Ok(ledger::reconcile(tx)?))
            .await
            .unwrap();
        assert!(report.balanced, "{:?}", report.discrepancies);
    });
}

#[test]
fn a_held_deposit_is_credited_only_at_full_depth_after_a_rewind() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        let switch = |enabled: bool| Control {
            control_key: "kill_switch.deposit_crediting".into(),
            enabled,
            reason: "test".into(),
            updated_by: "test".into(),
            updated_at: NOW,
        };
        let on = switch(true);
        write(&chain.store, move |tx| Ok(tx.put_control(&on)?))
            .await
            .unwrap();
        for n in 10..=13 {
            let t = if n == 10 {
                vec![usdt_to(&addr, 8, "ff")]
            } else {
                vec![]
            };
            chain.apply(block(n, 0, 0, t)).await;
        }
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Confirmed);
        // Blocks 12 and 13 are replaced; the deposit's block 10 stays, at depth 2 (tip 11).
        chain.rewind(11).await;
        let off = switch(false);
        write(&chain.store, move |tx| Ok(tx.put_control(&off)?))
            .await
            .unwrap();
        let (e, s) = (Arc::clone(&chain.entropy), chain.settings.clone());
        write(&chain.store, move |tx| {
            deposit::advance(tx, e.as_ref(), &s, 11, NOW)
        })
        .await
        .unwrap();
        assert_eq!(
            chain.available().await,
            Amount::ZERO,
            "depth 2 of 3: not yet"
        );
        chain.apply(block(12, 1, 0, vec![])).await;
        assert_eq!(chain.only_deposit().await.status, DepositStatus::Credited);
        assert_eq!(chain.available().await, Amount::from_units(8));
    });
}

#[test]
fn a_revived_transfer_with_other_content_is_refused_with_an_alert() {
    block_on(async {
        let chain = Chain::new().await;
        let addr = chain.wallet.address.clone();
        chain
            .apply(block(10, 0, 0, vec![usdt_to(&addr, 5, "ab")]))
            .await;
        chain.rewind(9).await;
        chain
            .apply(block(10, 1, 0, vec![usdt_to(&addr, 6, "ab")]))
            .await;
        let d = chain.only_deposit().await;
        assert_eq!(
            (d.status, d.amount),
            (DepositStatus::Orphaned, Amount::from_units(5))
        );
        let alerts = read(&chain.store, |tx| {
            Ok(tx
                .list_alerts(custody_core::page::Page::first(10))?
                .unwrap_or_default())
        })
        .await
        .unwrap();
        assert_eq!(alerts[0].kind, "deposit_identity_mismatch");
    });
}

#[test]
fn deposits_to_a_migrated_wallets_old_and_new_addresses_are_both_its_own() {
    block_on(async {
        let chain = Chain::new().await;
        let old = chain.wallet.address.clone();
        let moved = write(&chain.store, |tx| {
            let mut n = 900u128;
            let mut ids = || {
                n += 1;
                uuid::Uuid::from_u128(n)
            };
            wallet::migration::migrate_tenant(
                tx,
                &test_signer(),
                &mut ids,
                &tid("acme"),
                None,
                "cli:ops",
                "drill",
                NOW,
            )
        })
        .await
        .unwrap();
        let new = moved[0].new_address.clone();
        // The watch set as a scanner loads it: both addresses.
        let watched = read(&chain.store, |tx| Ok(tx.wallet_addresses(Network::Bsc)?))
            .await
            .unwrap();
        chain.watch.extend(Network::Bsc, watched);
        chain
            .apply(block(
                10,
                0,
                0,
                vec![usdt_to(&old, 500, "aa"), usdt_to(&new, 70, "bb")],
            ))
            .await;
        for n in 11..13 {
            chain.apply(block(n, 0, 0, vec![])).await;
        }
        let mut all = read(&chain.store, |tx| {
            Ok(tx.list_deposits(&tid("acme"), &DepositFilter::default(), 10)?)
        })
        .await
        .unwrap();
        all.sort_by_key(|d| d.amount);
        let seen: Vec<_> = all
            .iter()
            .map(|d| {
                (
                    d.address.as_str(),
                    d.wallet_id,
                    d.external_user_id.as_str(),
                    d.status,
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    new.as_str(),
                    chain.wallet.id,
                    "alice",
                    DepositStatus::Credited
                ),
                (
                    old.as_str(),
                    chain.wallet.id,
                    "alice",
                    DepositStatus::Credited
                ),
            ]
        );
        assert_eq!(chain.available().await, Amount::from_units(570));
    });
}

fn tid(s: &str) -> custody_core::TenantId {
    custody_core::TenantId::parse(s).expect("a valid tenant id")
}

/// The service's own moves into deposit addresses (decisions §13, the treasury's gas top-ups)
/// against a user's deposit: each test snapshots every ledger account, every deposit and every
/// event, so a credit of the wrong asset cannot hide.
mod treasury_moves {
    use std::collections::BTreeMap;

    use super::*;
    use custody_core::chain::{ChainAddress, TxHash};
    use custody_core::deposit::{classify, Arrival, TreasuryMove};
    use custody_core::ledger::AccountBalances;
    use custody_core::outgoing::{Attempt, Bid, OutgoingTx, Purpose};
    use custody_core::page::Page;
    use custody_core::ports::sender::Payment;
    use custody_core::wallet::{hot_wallet_address, hot_wallet_path};

    fn hot() -> ChainAddress {
        let address = hot_wallet_address(&test_signer(), Network::Bsc).unwrap();
        ChainAddress::parse(Network::Bsc, &address).unwrap()
    }

    fn tx_hash(tag: &str) -> TxHash {
        TxHash::parse(&format!("{tag:0>64}")).unwrap()
    }

    /// Native BNB from `from` to `to` in transaction `tag`.
    fn bnb(from: &ChainAddress, to: &str, units: u128, tag: &str) -> ObservedTransfer {
        ObservedTransfer {
            tx_hash: tx_hash(tag),
            log_index: None,
            asset_code: "BNB".into(),
            from: from.clone(),
            to: ChainAddress::parse(Network::Bsc, to).unwrap(),
            amount: Amount::from_units(units),
            succeeded: true,
        }
    }

    /// An outgoing transaction of `purpose` whose one attempt is transaction `tag`.
    fn outgoing(purpose: Purpose, id: u128, from: &str, to: &str, tag: &str) -> OutgoingTx {
        let mut out = OutgoingTx::new(
            uuid::Uuid::from_u128(id),
            Network::Bsc,
            purpose,
            uuid::Uuid::from_u128(id + 1000),
            from.to_owned(),
            hot_wallet_path(Network::Bsc),
            Payment::Native {
                to: to.to_owned(),
                amount: Amount::from_units(7),
            },
            Some(u64::try_from(id).unwrap()),
            NOW,
        );
        out.attempts.push(Attempt {
            hash: tx_hash(tag).to_hex(),
            raw: vec![1, 2, 3],
            bid: Bid::Gas {
                gas_limit: 21_000,
                gas_price_wei: 1,
            },
            expires_at_ms: None,
            signed_at: NOW,
            sent_at: Some(NOW),
            last_answer: None,
            plan: None,
            reference_block: None,
            void: false,
        });
        out
    }

    /// Everything a credit could touch: every ledger account, deposit and event.
    #[derive(Debug, PartialEq)]
    struct Books {
        accounts: BTreeMap<String, AccountBalances>,
        deposits: Vec<(String, String, DepositStatus)>,
        events: Vec<String>,
    }

    impl Chain {
        async fn record(&self, out: OutgoingTx) {
            write(&self.store, move |tx| Ok(tx.insert_outgoing(&out)?))
                .await
                .unwrap();
        }

        async fn books(&self) -> Books {
            read(&self.store, |tx| {
                let mut accounts = BTreeMap::new();
                tx.scan_ledger_accounts(&mut |k, b| {
                    accounts.insert(k.to_string(), *b);
                })?;
                let deposits = tx
                    .list_deposits(&tid("acme"), &DepositFilter::default(), 100)?
                    .into_iter()
                    .map(|d| (d.external_user_id, d.asset, d.status))
                    .collect();
                let events = tx
                    .list_webhook_events(Page::first(100))?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|e| e.event_type.to_string())
                    .collect();
                Ok(Books {
                    accounts,
                    deposits,
                    events,
                })
            })
            .await
            .unwrap()
        }

        async fn alerts(&self) -> Vec<String> {
            read(&self.store, |tx| {
                Ok(tx
                    .list_alerts(Page::first(100))?
                    .unwrap_or_default()
                    .into_iter()
                    .map(|a| a.kind)
                    .collect())
            })
            .await
            .unwrap()
        }

        /// Applies `transfers` in block 10, then enough blocks to credit anything credible.
        async fn mine(&self, transfers: Vec<ObservedTransfer>) {
            self.apply(block(10, 0, 0, transfers)).await;
            for n in 11..14 {
                self.apply(block(n, 0, 0, vec![])).await;
            }
        }
    }

    async fn chain_with_hot_wallet() -> Chain {
        let mut chain = Chain::new().await;
        chain.settings.hot_wallets = vec![hot()];
        chain
    }

    #[test]
    fn a_funding_a_sweep_and_a_withdrawal_to_a_deposit_address_are_classified() {
        block_on(async {
            let chain = chain_with_hot_wallet().await;
            let alice = chain.wallet.address.clone();
            let hot = hot();
            let outsider =
                ChainAddress::parse(Network::Bsc, "0x00000000000000000000000000000000000000aa")
                    .unwrap();
            let funding = outgoing(Purpose::Funding, 1, hot.as_str(), &alice, "f1");
            let sweep = outgoing(Purpose::Sweep, 2, &alice, hot.as_str(), "f2");
            let withdrawal = outgoing(Purpose::Withdrawal, 3, hot.as_str(), &alice, "f3");
            for out in [funding.clone(), sweep.clone(), withdrawal.clone()] {
                chain.record(out).await;
            }
            let classified = |t: ObservedTransfer| {
                let settings = chain.settings.clone();
                read(&chain.store, move |tx| {
                    Ok(classify(tx, Network::Bsc, &settings.hot_wallets, &t)?)
                })
            };
            assert_eq!(
                classified(bnb(&hot, &alice, 7, "f1")).await.unwrap(),
                Arrival::Treasury(TreasuryMove::Own {
                    purpose: Purpose::Funding,
                    outgoing_id: funding.id
                })
            );
            let mut swept = usdt_to(hot.as_str(), 7, "f2");
            swept.from = ChainAddress::parse(Network::Bsc, &alice).unwrap();
            assert_eq!(
                classified(swept).await.unwrap(),
                Arrival::Treasury(TreasuryMove::Own {
                    purpose: Purpose::Sweep,
                    outgoing_id: sweep.id
                })
            );
            assert_eq!(
                classified(bnb(&hot, &alice, 7, "f3")).await.unwrap(),
                Arrival::Deposit,
                "a withdrawal to another user's deposit address is that user's deposit"
            );
            assert_eq!(
                classified(bnb(&hot, &alice, 7, "f4")).await.unwrap(),
                Arrival::Treasury(TreasuryMove::FromHotWallet {
                    from: hot.as_str().to_owned()
                }),
                "native coin from the hot wallet that is no payment of ours"
            );
            assert_eq!(
                classified(bnb(&outsider, &alice, 7, "f5")).await.unwrap(),
                Arrival::Deposit
            );
        });
    }

    #[test]
    fn a_gas_top_up_is_never_credited_and_the_token_deposit_is_credited_once() {
        block_on(async {
            let chain = chain_with_hot_wallet().await;
            let alice = chain.wallet.address.clone();
            let hot = hot();
            chain
                .record(outgoing(Purpose::Funding, 1, hot.as_str(), &alice, "f1"))
                .await;
            let before = chain.books().await;
            chain
                .mine(vec![usdt_to(&alice, 500, "aa"), bnb(&hot, &alice, 7, "f1")])
                .await;
            let after = chain.books().await;
            assert_eq!(
                after.deposits,
                [("alice".into(), "USDT".into(), DepositStatus::Credited)],
                "one deposit: the token's"
            );
            let user =
                |asset: &str| UserAccount::new("acme", "alice", AssetId::new(Network::Bsc, asset));
            let changed: Vec<_> = after
                .accounts
                .iter()
                .filter(|(k, v)| before.accounts.get(*k) != Some(*v))
                .map(|(k, _)| k.clone())
                .collect();
            assert_eq!(
                changed,
                [
                    custody_core::ledger::AccountKey::system(
                        custody_core::ledger::SystemAccount::DepositClearing,
                        AssetId::new(Network::Bsc, "USDT")
                    )
                    .to_string(),
                    user("USDT").key().to_string(),
                ],
                "only the USDT deposit moved the books: {after:?}"
            );
            let bnb_balance = read(&chain.store, move |tx| {
                Ok(ledger::user_balance(tx, &user("BNB"))?)
            })
            .await
            .unwrap();
            assert_eq!(
                (bnb_balance.available, bnb_balance.reserved),
                (Amount::ZERO, Amount::ZERO)
            );
            assert_eq!(
                after.events.len(),
                before.events.len() + 4,
                "detected, confirmed, credited and balance.updated of the USDT deposit only: {:?}",
                after.events
            );
            assert!(chain.alerts().await.is_empty());
        });
    }

    #[test]
    fn a_withdrawal_to_a_deposit_address_is_credited_to_its_user() {
        block_on(async {
            let chain = chain_with_hot_wallet().await;
            let alice = chain.wallet.address.clone();
            let hot = hot();
            chain
                .record(outgoing(Purpose::Withdrawal, 3, hot.as_str(), &alice, "f3"))
                .await;
            chain.mine(vec![bnb(&hot, &alice, 7, "f3")]).await;
            let after = chain.books().await;
            assert_eq!(
                after.deposits,
                [("alice".into(), "BNB".into(), DepositStatus::Credited)]
            );
            let bnb_balance = read(&chain.store, move |tx| {
                let a = UserAccount::new("acme", "alice", AssetId::new(Network::Bsc, "BNB"));
                Ok(ledger::user_balance(tx, &a)?.available)
            })
            .await
            .unwrap();
            assert_eq!(bnb_balance, Amount::from_units(7));
            assert_eq!(chain.available().await, Amount::ZERO, "no USDT moved");
        });
    }

    #[test]
    fn native_coin_from_the_hot_wallet_that_is_no_payment_is_not_credited_and_is_reported() {
        block_on(async {
            let chain = chain_with_hot_wallet().await;
            let alice = chain.wallet.address.clone();
            let before = chain.books().await;
            chain.mine(vec![bnb(&hot(), &alice, 9, "e1")]).await;
            assert_eq!(chain.books().await, before, "nothing of any user moved");
            assert_eq!(chain.alerts().await, ["treasury_transfer_unrecognized"]);
        });
    }

    mod repair {
        use super::*;
        use custody_core::adjustment::{self, AdjustmentIds, AdjustmentRequest};
        use custody_core::deposit::repair::{
            repair_treasury_deposits, settle_owed, RepairRequest, SettleRequest, Settlement,
        };
        use custody_core::ledger::Direction;

        fn bnb_of(user: &str) -> UserAccount {
            UserAccount::new("acme", user, AssetId::new(Network::Bsc, "BNB"))
        }

        /// The store as an older version left it: a funding of alice's address (transaction
        /// f1) credited to her, and a withdrawal to it (f3), credited too, as it should be.
        async fn credited_by_an_older_version() -> Chain {
            let mut chain = Chain::new().await;
            let alice = chain.wallet.address.clone();
            let hot = hot();
            chain
                .mine(vec![bnb(&hot, &alice, 7, "f1"), bnb(&hot, &alice, 5, "f3")])
                .await;
            chain
                .record(outgoing(Purpose::Funding, 1, hot.as_str(), &alice, "f1"))
                .await;
            chain
                .record(outgoing(Purpose::Withdrawal, 3, hot.as_str(), &alice, "f3"))
                .await;
            chain.settings.hot_wallets = vec![hot];
            assert_eq!(chain.bnb("alice").await, Amount::from_units(12));
            chain
        }

        impl Chain {
            async fn bnb(&self, user: &'static str) -> Amount {
                read(&self.store, move |tx| {
                    Ok(ledger::user_balance(tx, &bnb_of(user))?.available)
                })
                .await
                .unwrap()
            }

            async fn repair(&self, dry_run: bool) -> Vec<(String, &'static str, Amount)> {
                let (e, hot_wallets) =
                    (Arc::clone(&self.entropy), self.settings.hot_wallets.clone());
                let request = RepairRequest {
                    network: Network::Bsc,
                    hot_wallets,
                    dry_run,
                    actor: "cli:test".into(),
                };
                let batch = write(&self.store, move |tx| {
                    repair_treasury_deposits(tx, e.as_ref(), &request, None, NOW)
                })
                .await
                .unwrap();
                assert_eq!(batch.next, None);
                batch
                    .repaired
                    .into_iter()
                    .map(|r| (r.tx_hash, r.action, r.owed_units))
                    .collect()
            }

            async fn debit_bnb(&self, units: u128) {
                self.debit_bnb_with(units, 901).await;
            }

            async fn debit_bnb_with(&self, units: u128, ids_from: u128) {
                self.adjust_bnb(Direction::Debit, units, ids_from).await;
            }

            async fn credit_bnb(&self, units: u128) {
                self.adjust_bnb(Direction::Credit, units, 931 + units * 10)
                    .await;
            }

            async fn adjust_bnb(&self, direction: Direction, units: u128, ids_from: u128) {
                let req = AdjustmentRequest {
                    tenant: tid("acme"),
                    external_user_id: "alice".into(),
                    network: Network::Bsc,
                    asset: "BNB".into(),
                    direction,
                    amount: Amount::from_units(units),
                    reason: "spent".into(),
                    actor: "cli:test".into(),
                };
                let ids = AdjustmentIds {
                    audit: uuid::Uuid::from_u128(ids_from),
                    ledger_tx: uuid::Uuid::from_u128(ids_from + 1),
                    event: uuid::Uuid::from_u128(ids_from + 2),
                };
                write(&self.store, move |tx| {
                    adjustment::execute(tx, ids, &req, NOW)
                })
                .await
                .unwrap();
            }

            async fn statuses_by_tx(&self) -> Vec<(String, DepositStatus, Amount)> {
                let mut all: Vec<_> = read(&self.store, |tx| {
                    Ok(tx.list_deposits(&tid("acme"), &DepositFilter::default(), 100)?)
                })
                .await
                .unwrap()
                .into_iter()
                .map(|d| (d.tx_hash, d.status, d.shortfall))
                .collect();
                all.sort_by(|a, b| a.0.cmp(&b.0));
                all
            }
        }

        #[test]
        fn a_credited_funding_is_reversed_once_and_a_withdrawal_stays_credited() {
            block_on(async {
                let chain = credited_by_an_older_version().await;
                let before = chain.books().await;
                let planned = chain.repair(true).await;
                assert_eq!(
                    planned,
                    [(tx_hash("f1").to_hex(), "would_reverse", Amount::ZERO)]
                );
                assert_eq!(chain.books().await, before, "a dry run changes nothing");

                let done = chain.repair(false).await;
                assert_eq!(done, [(tx_hash("f1").to_hex(), "reversed", Amount::ZERO)]);
                assert_eq!(chain.bnb("alice").await, Amount::from_units(5));
                assert_eq!(
                    chain.statuses_by_tx().await,
                    [
                        (
                            tx_hash("f1").to_hex(),
                            DepositStatus::Reversed,
                            Amount::ZERO
                        ),
                        (
                            tx_hash("f3").to_hex(),
                            DepositStatus::Credited,
                            Amount::ZERO
                        ),
                    ]
                );
                let after = chain.books().await;
                let clearing = custody_core::ledger::AccountKey::system(
                    custody_core::ledger::SystemAccount::DepositClearing,
                    AssetId::new(Network::Bsc, "BNB"),
                )
                .to_string();
                let net = |b: &Books, k: &str| {
                    b.accounts.get(k).map_or(0_i128, |a| {
                        i128::try_from(a.credits_posted.units()).unwrap()
                            - i128::try_from(a.debits_posted.units()).unwrap()
                    })
                };
                assert_eq!(
                    net(&after, &clearing),
                    -5,
                    "only the withdrawal is still owed"
                );
                assert_eq!(net(&after, &bnb_of("alice").key().to_string()), 5);
                assert_eq!(
                    after.events.len(),
                    before.events.len() + 1,
                    "one balance.updated"
                );
                assert!(
                    chain.alerts().await.is_empty(),
                    "nothing owed: nothing for an operator to do"
                );
                let audited = read(&chain.store, |tx| {
                    Ok(tx.list_audit(Page::first(10))?.unwrap_or_default())
                })
                .await
                .unwrap();
                assert_eq!(audited.len(), 1);
                assert_eq!(audited[0].action, "deposit.treasury_move_repaired");
                assert!(
                    chain.repair(false).await.is_empty(),
                    "a second run does nothing"
                );
                // The reversed transfer stays the treasury's on later blocks.
                chain.apply(block(14, 0, 0, vec![])).await;
                assert_eq!(chain.bnb("alice").await, Amount::from_units(5));
            });
        }

        #[test]
        fn what_the_user_spent_of_a_credited_funding_is_owed_not_overdrawn() {
            block_on(async {
                let chain = credited_by_an_older_version().await;
                chain.debit_bnb(10).await;
                assert_eq!(chain.bnb("alice").await, Amount::from_units(2));
                let done = chain.repair(false).await;
                assert_eq!(
                    done,
                    [(tx_hash("f1").to_hex(), "reversed", Amount::from_units(5))]
                );
                assert_eq!(chain.bnb("alice").await, Amount::ZERO, "never below zero");
                assert_eq!(
                    chain.statuses_by_tx().await[0],
                    (
                        tx_hash("f1").to_hex(),
                        DepositStatus::Reversed,
                        Amount::from_units(5)
                    )
                );
                // She owes the rest: her BNB debits are refused until it is settled.
                let req = AdjustmentRequest {
                    tenant: tid("acme"),
                    external_user_id: "alice".into(),
                    network: Network::Bsc,
                    asset: "BNB".into(),
                    direction: Direction::Debit,
                    amount: Amount::from_units(1),
                    reason: "again".into(),
                    actor: "cli:test".into(),
                };
                let ids = AdjustmentIds {
                    audit: uuid::Uuid::from_u128(911),
                    ledger_tx: uuid::Uuid::from_u128(912),
                    event: uuid::Uuid::from_u128(913),
                };
                let refused = write(&chain.store, move |tx| {
                    adjustment::execute(tx, ids, &req, NOW)
                })
                .await;
                assert!(refused.is_err(), "{refused:?}");
                let alerts = read(&chain.store, |tx| {
                    Ok(tx.list_alerts(Page::first(10))?.unwrap_or_default())
                })
                .await
                .unwrap();
                assert_eq!(alerts[0].severity, "critical");

                // An operator settles it: from what she holds (3 of the 5), then writes off the rest.
                let f1 = read(&chain.store, |tx| {
                    Ok(tx.deposit_by_identity(Network::Bsc, &tx_hash("f1"), None)?)
                })
                .await
                .unwrap()
                .unwrap();
                let settle = |how| {
                    let (e, request) = (
                        Arc::clone(&chain.entropy),
                        SettleRequest {
                            tenant: tid("acme"),
                            hot_wallets: chain.settings.hot_wallets.clone(),
                            deposit_id: f1.id,
                            how,
                            reason: "top-up credited by an older version".into(),
                            actor: "cli:test".into(),
                        },
                    );
                    write(&chain.store, move |tx| {
                        settle_owed(tx, e.as_ref(), &request, NOW)
                    })
                };
                assert!(
                    settle(Settlement::FromUser).await.is_err(),
                    "she holds nothing"
                );
                chain.credit_bnb(3).await;
                let s = settle(Settlement::FromUser).await.unwrap();
                assert_eq!(
                    (s.settled_units, s.still_owed_units),
                    (Amount::from_units(3), Amount::from_units(2))
                );
                assert_eq!(chain.bnb("alice").await, Amount::ZERO);
                let s = settle(Settlement::WriteOff).await.unwrap();
                assert_eq!(
                    (s.settled_units, s.still_owed_units),
                    (Amount::from_units(2), Amount::ZERO)
                );
                assert!(settle(Settlement::WriteOff).await.is_err(), "nothing owed");
                let books = chain.books().await;
                let net = |k: custody_core::ledger::AccountKey| {
                    books.accounts.get(&k.to_string()).map_or(0_i128, |a| {
                        i128::try_from(a.credits_posted.units()).unwrap()
                            - i128::try_from(a.debits_posted.units()).unwrap()
                    })
                };
                let bnb = AssetId::new(Network::Bsc, "BNB");
                let system = |a| custody_core::ledger::AccountKey::system(a, bnb.clone());
                assert_eq!(
                    net(system(custody_core::ledger::SystemAccount::ReorgReceivable)),
                    0
                );
                // The adjustments account paid the 2 written off, and took in what alice
                // spent (10) less what she was credited (3).
                assert_eq!(
                    net(system(custody_core::ledger::SystemAccount::Adjustments)),
                    10 - 3 - 2
                );
                // She owes nothing more: her debits go through again.
                chain.credit_bnb(1).await;
                chain.debit_bnb_with(1, 921).await;
                assert_eq!(chain.bnb("alice").await, Amount::ZERO);
            });
        }

        #[test]
        fn a_pending_funding_left_by_an_older_version_is_voided_by_the_pipeline_itself() {
            block_on(async {
                let mut chain = Chain::new().await;
                let alice = chain.wallet.address.clone();
                let hot = hot();
                chain
                    .apply(block(10, 0, 0, vec![bnb(&hot, &alice, 7, "f1")]))
                    .await;
                chain
                    .record(outgoing(Purpose::Funding, 1, hot.as_str(), &alice, "f1"))
                    .await;
                // The new version starts; its scanner goes on before anyone runs the repair.
                chain.settings.hot_wallets = vec![hot];
                for n in 11..20 {
                    chain.apply(block(n, 0, 0, vec![])).await;
                }
                assert_eq!(chain.bnb("alice").await, Amount::ZERO, "never credited");
                assert_eq!(
                    chain.statuses_by_tx().await,
                    [(
                        tx_hash("f1").to_hex(),
                        DepositStatus::Orphaned,
                        Amount::ZERO
                    )]
                );
                assert_eq!(chain.alerts().await, ["treasury_deposit_voided"]);
                assert!(chain.repair(false).await.is_empty());
            });
        }

        #[test]
        fn a_top_up_a_reorganization_reversed_before_the_repair_is_reported_owed() {
            block_on(async {
                let chain = credited_by_an_older_version().await;
                chain.debit_bnb(10).await;
                // The old version's scanner saw the top-up's block leave the chain.
                let (e, mut s) = (Arc::clone(&chain.entropy), chain.settings.clone());
                s.hot_wallets.clear();
                write(&chain.store, move |tx| {
                    deposit::rewind(tx, e.as_ref(), &s, 9, NOW)
                })
                .await
                .unwrap();
                let owed = chain.repair(false).await;
                assert!(
                    owed.contains(&(tx_hash("f1").to_hex(), "owes", Amount::from_units(5))),
                    "{owed:?}"
                );
            });
        }

        #[test]
        fn a_real_deposits_reorganization_debt_is_not_settled_by_hand() {
            block_on(async {
                let mut chain = Chain::new().await;
                let alice = chain.wallet.address.clone();
                let outsider =
                    ChainAddress::parse(Network::Bsc, "0x00000000000000000000000000000000000000aa")
                        .unwrap();
                chain.mine(vec![bnb(&outsider, &alice, 7, "d1")]).await;
                chain.debit_bnb(5).await;
                chain.rewind(9).await;
                chain.settings.hot_wallets = vec![hot()];
                let d1 = read(&chain.store, |tx| {
                    Ok(tx.deposit_by_identity(Network::Bsc, &tx_hash("d1"), None)?)
                })
                .await
                .unwrap()
                .unwrap();
                assert_eq!(d1.shortfall, Amount::from_units(5));
                let (e, request) = (
                    Arc::clone(&chain.entropy),
                    SettleRequest {
                        tenant: tid("acme"),
                        hot_wallets: chain.settings.hot_wallets.clone(),
                        deposit_id: d1.id,
                        how: Settlement::WriteOff,
                        reason: "no".into(),
                        actor: "cli:test".into(),
                    },
                );
                let refused = write(&chain.store, move |tx| {
                    settle_owed(tx, e.as_ref(), &request, NOW)
                })
                .await;
                assert!(refused.is_err(), "{refused:?}");
            });
        }

        #[test]
        fn a_pending_funding_is_orphaned_and_never_credited() {
            block_on(async {
                let mut chain = Chain::new().await;
                let alice = chain.wallet.address.clone();
                let hot = hot();
                chain
                    .apply(block(10, 0, 0, vec![bnb(&hot, &alice, 7, "f1")]))
                    .await;
                chain
                    .record(outgoing(Purpose::Funding, 1, hot.as_str(), &alice, "f1"))
                    .await;
                chain.settings.hot_wallets = vec![hot];
                let done = chain.repair(false).await;
                assert_eq!(done, [(tx_hash("f1").to_hex(), "orphaned", Amount::ZERO)]);
                for n in 11..20 {
                    chain.apply(block(n, 0, 0, vec![])).await;
                }
                assert_eq!(chain.bnb("alice").await, Amount::ZERO);
                assert_eq!(
                    chain.statuses_by_tx().await,
                    [(
                        tx_hash("f1").to_hex(),
                        DepositStatus::Orphaned,
                        Amount::ZERO
                    )]
                );
            });
        }
    }
}
