//! The withdrawal flow on the in-memory store: quote, execute with every refusal, the engine's
//! moves to broadcasted / confirmed / failed, and the books after each.

mod settle;

use std::sync::Arc;

use uuid::Uuid;

use custody_core::asset::{Asset, AssetCatalog, AssetId};
use custody_core::chain::ChainAddress;
use custody_core::error::{CoreError, ErrorCode};
use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
use custody_core::network::Network;
use custody_core::outgoing::{Included, OutStatus, OutgoingTx, Purpose};
use custody_core::ports::store::{read, write, Store};
use custody_core::tenant::TenantId;
use custody_core::time::Timestamp;
use custody_core::wallet::hot_wallet_path;
use custody_core::withdrawal::*;
use custody_core::Amount;
use custody_testkit::{block_on, CountingEntropy, MemoryStore};

const T0: i64 = 1_800_000_000_000;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0 + ms)
}

fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

fn acme() -> TenantId {
    TenantId::parse("acme").unwrap()
}

fn bnb() -> Asset {
    AssetCatalog::mainnet()
        .get(Network::Bsc, "BNB")
        .unwrap()
        .clone()
}

fn policy() -> FeePolicy {
    FeePolicy {
        min_amount_units: u(10),
        max_amount_units: u(1_000_000),
        markup_bps: 1_000,
        service_fee_units: u(7),
        service_fee_bps: 0,
        spread_bps: 0,
    }
}

fn hot() -> HotWallet {
    HotWallet {
        address: "0x00000000000000000000000000000000000000aa".into(),
        path: hot_wallet_path(Network::Bsc),
    }
}

struct Fx {
    store: Arc<dyn Store>,
    entropy: Arc<CountingEntropy>,
}

impl Fx {
    fn new(balance: u128) -> Self {
        let fx = Fx {
            store: Arc::new(MemoryStore::new()),
            entropy: Arc::new(CountingEntropy::new(1)),
        };
        block_on(write(fx.store.as_ref(), move |tx| {
            let meta = TxMeta {
                id: Uuid::new_v4(),
                reference_type: ReferenceType::Deposit,
                reference_id: Uuid::new_v4(),
                created_at: at(0),
            };
            Ok(ledger::credit_deposit(tx, &meta, &alice(), u(balance))?)
        }))
        .unwrap();
        fx
    }

    fn quote(&self, amount: u128, now: i64) -> Result<Quote, CoreError> {
        let request = QuoteRequest {
            tenant: acme(),
            external_user_id: "alice".into(),
            asset: bnb(),
            destination: ChainAddress::parse(
                Network::Bsc,
                "0x00000000000000000000000000000000000000bb",
            )
            .unwrap(),
            amount: u(amount),
            policy: policy(),
            network_native: u(50),
            rate: Rate::NATIVE,
        };
        let id = Uuid::new_v4();
        block_on(write(self.store.as_ref(), move |tx| {
            create_quote(tx, id, &request, at(now))
        }))
    }

    fn execute(&self, tenant: TenantId, quote: Uuid, now: i64) -> Result<Withdrawal, CoreError> {
        let ids = ExecuteIds {
            withdrawal: Uuid::new_v4(),
            outgoing: Uuid::new_v4(),
            hold_tx: Uuid::new_v4(),
            created_event: Uuid::new_v4(),
            balance_event: Uuid::new_v4(),
        };
        block_on(write(self.store.as_ref(), move |tx| {
            execute(tx, ids, &tenant, quote, &bnb(), &hot(), at(now))
        }))
    }

    /// Moves the withdrawal's outgoing transaction as the broadcaster would, with the hook.
    fn engine(&self, w: &Withdrawal, f: impl Fn(&mut OutgoingTx) + Send + Sync + 'static) {
        let (id, entropy) = (w.outgoing_id, Arc::clone(&self.entropy));
        block_on(write(self.store.as_ref(), move |tx| {
            let mut out = tx.outgoing(id)?.expect("the outgoing transaction");
            f(&mut out);
            tx.update_outgoing(&out)?;
            on_outgoing(
                tx,
                entropy.as_ref(),
                &out,
                &AssetId::new(Network::Bsc, "BNB".to_owned()),
                15,
                at(1_000),
            )
        }))
        .unwrap();
    }

    fn get(&self, w: &Withdrawal) -> Withdrawal {
        let id = w.id;
        block_on(read(self.store.as_ref(), move |tx| {
            Ok(tx.withdrawal(&acme(), id)?)
        }))
        .unwrap()
        .unwrap()
    }

    fn balance(&self) -> (u128, u128) {
        let b = block_on(read(self.store.as_ref(), |tx| {
            Ok(ledger::user_balance(tx, &alice())?)
        }))
        .unwrap();
        (b.available.units(), b.reserved.units())
    }

    fn reconciles(&self) {
        let report = block_on(read(self.store.as_ref(), |tx| Ok(ledger::reconcile(tx)?))).unwrap();
        assert!(report.balanced, "{:?}", report.discrepancies);
    }
}

fn alice() -> UserAccount {
    UserAccount::new(
        "acme".to_owned(),
        "alice".to_owned(),
        AssetId::new(Network::Bsc, "BNB".to_owned()),
    )
}

fn code(e: CoreError) -> ErrorCode {
    match e {
        CoreError::Refused(r) => r.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn sent(out: &mut OutgoingTx) {
    out.add_attempt(
        custody_core::outgoing::Attempt {
            hash: "ab".repeat(32),
            raw: vec![1],
            bid: custody_core::outgoing::Bid::Gas {
                gas_limit: 21_000,
                gas_price_wei: 1,
            },
            expires_at_ms: None,
            signed_at: at(10),
            sent_at: Some(at(11)),
            last_answer: Some(custody_core::ports::sender::BroadcastOutcome::Accepted),
            plan: None,
            reference_block: None,
            void: false,
        },
        at(10),
    )
    .unwrap();
    out.transition(OutStatus::Sent, "accepted", at(11)).unwrap();
}

fn included(fee: u128, succeeded: bool) -> impl Fn(&mut OutgoingTx) + Send + Sync {
    move |out: &mut OutgoingTx| {
        out.included = Some(Included {
            hash: "ab".repeat(32),
            block_number: 100,
            block_hash: "cd".repeat(32),
            succeeded,
            fee_native: u(fee),
            moves: Vec::new(),
            resources: None,
            block_time_ms: None,
        });
        out.transition(OutStatus::Included, "", at(20)).unwrap();
        let end = if succeeded {
            OutStatus::Final
        } else {
            out.failure_reason = Some("reverted".into());
            OutStatus::Failed
        };
        out.transition(end, "", at(30)).unwrap();
    }
}

#[test]
fn a_withdrawal_holds_its_total_then_settles_with_the_actual_gas() {
    let fx = Fx::new(10_000);
    let q = fx.quote(1_000, 0).unwrap();
    // 1,000 + 50 gas + 5 markup + 7 fee.
    assert_eq!(q.costs.total_debited_units, u(1_062));
    let w = fx.execute(acme(), q.id, 1).unwrap();
    assert_eq!(w.status, WithdrawalStatus::Reserved);
    assert_eq!(fx.balance(), (10_000 - 1_062, 1_062));
    let out = block_on(read(fx.store.as_ref(), move |tx| {
        Ok(tx.outgoing_for(Purpose::Withdrawal, w.id)?)
    }))
    .unwrap()
    .unwrap();
    assert_eq!(out.nonce, None, "allocated when it is signed");
    assert_eq!(out.from, hot().address);

    fx.engine(&w, sent);
    let b = fx.get(&w);
    assert_eq!(b.status, WithdrawalStatus::Broadcasted);
    assert_eq!(b.view().tx_hash, Some(format!("0x{}", "ab".repeat(32))));
    fx.engine(&w, included(40, true));
    let c = fx.get(&w);
    assert_eq!(c.status, WithdrawalStatus::Confirmed);
    assert_eq!(c.actual_network_cost_units, Some(u(40)));
    assert_eq!(c.block_number, Some(100));
    let steps: Vec<_> = c.history.iter().map(|s| s.status.as_str()).collect();
    assert_eq!(steps, ["reserved", "broadcasted", "confirmed"]);
    assert_eq!(
        fx.balance(),
        (10_000 - 1_062, 0),
        "the user pays the quoted total"
    );
    fx.reconciles();
    // Nothing moves a finished withdrawal again.
    fx.engine(&w, |_| {});
    assert_eq!(fx.get(&w), c);
}

#[test]
fn a_failed_transaction_releases_the_hold_and_the_house_pays_the_gas() {
    let fx = Fx::new(10_000);
    let q = fx.quote(1_000, 0).unwrap();
    let w = fx.execute(acme(), q.id, 1).unwrap();
    fx.engine(&w, sent);
    fx.engine(&w, included(40, false));
    let f = fx.get(&w);
    assert_eq!(f.status, WithdrawalStatus::Failed);
    assert_eq!(f.failure_reason.as_deref(), Some("reverted"));
    assert_eq!(fx.balance(), (10_000, 0), "released in full");
    fx.reconciles();
}

#[test]
fn quotes_are_single_use_bound_to_their_tenant_and_short_lived() {
    let fx = Fx::new(10_000);
    let q = fx.quote(1_000, 0).unwrap();
    let other = TenantId::parse("other").unwrap();
    assert_eq!(
        code(fx.execute(other, q.id, 1).unwrap_err()),
        ErrorCode::NotFound
    );
    fx.execute(acme(), q.id, 1).unwrap();
    assert_eq!(
        code(fx.execute(acme(), q.id, 2).unwrap_err()),
        ErrorCode::QuoteAlreadyUsed
    );
    let late = fx.quote(1_000, 0).unwrap();
    assert_eq!(
        code(fx.execute(acme(), late.id, QUOTE_LIFETIME_MS).unwrap_err()),
        ErrorCode::QuoteExpired
    );
    assert_eq!(code(fx.quote(9, 0).unwrap_err()), ErrorCode::AmountTooSmall);
    assert_eq!(
        code(fx.quote(1_000_001, 0).unwrap_err()),
        ErrorCode::AmountTooLarge
    );
}

#[test]
fn an_unaffordable_withdrawal_is_refused_and_leaves_the_quote_usable() {
    let fx = Fx::new(1_000);
    let q = fx.quote(1_000, 0).unwrap();
    assert_eq!(
        code(fx.execute(acme(), q.id, 1).unwrap_err()),
        ErrorCode::InsufficientBalance
    );
    assert_eq!(fx.balance(), (1_000, 0));
    let stored = block_on(read(fx.store.as_ref(), move |tx| {
        Ok(tx.quote(&acme(), q.id)?)
    }))
    .unwrap()
    .unwrap();
    assert_eq!(stored.used_at, None, "nothing of the refused job stays");
}

#[test]
fn of_many_withdrawals_against_one_balance_exactly_the_affordable_ones_reserve() {
    let fx = Fx::new(10_000);
    let quotes: Vec<_> = (0..64).map(|_| fx.quote(1_000, 0).unwrap()).collect();
    let outcomes: Vec<_> = quotes.iter().map(|q| fx.execute(acme(), q.id, 1)).collect();
    let ok = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(ok, 9, "10,000 / 1,062");
    assert!(outcomes
        .into_iter()
        .filter_map(Result::err)
        .all(|e| code(e) == ErrorCode::InsufficientBalance));
    assert_eq!(fx.balance(), (10_000 - 9 * 1_062, 9 * 1_062));
    fx.reconciles();
}

#[test]
fn controls_stop_new_withdrawals() {
    let fx = Fx::new(10_000);
    let q = fx.quote(1_000, 0).unwrap();
    for (key, refused) in [
        ("kill_switch.withdrawals", ErrorCode::KillSwitchActive),
        ("kill_switch.global", ErrorCode::KillSwitchActive),
        ("maintenance.BSC", ErrorCode::Maintenance),
        // The TREASURY reconciliation's automatic control of the withdrawn asset.
        ("treasury_shortfall.BSC.BNB", ErrorCode::KillSwitchActive),
    ] {
        block_on(write(fx.store.as_ref(), move |tx| {
            custody_core::admin::set_control(tx, Uuid::new_v4(), "ops", key, true, "test", at(0))
        }))
        .unwrap();
        assert_eq!(
            code(fx.execute(acme(), q.id, 1).unwrap_err()),
            refused,
            "{key}"
        );
        assert_eq!(
            code(fx.quote(1_000, 0).unwrap_err()),
            refused,
            "{key} quotes"
        );
        block_on(write(fx.store.as_ref(), move |tx| {
            custody_core::admin::set_control(tx, Uuid::new_v4(), "ops", key, false, "test", at(0))
        }))
        .unwrap();
    }
    fx.execute(acme(), q.id, 1).unwrap();
}
