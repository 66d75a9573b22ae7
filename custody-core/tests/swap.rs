//! The swap flow on the in-memory store: quote, execute with its refusals and the router
//! approvals, the engine's moves to broadcasted / confirmed / failed, and the books after each.

use std::sync::Arc;

use uuid::Uuid;

use custody_core::asset::{Asset, AssetCatalog, AssetId};
use custody_core::error::{CoreError, ErrorCode};
use custody_core::ledger::{
    self, AccountKey, ReferenceType, SystemAccount, TxKind, TxMeta, UserAccount,
};
use custody_core::network::Network;
use custody_core::outgoing::{Included, OutStatus, OutgoingTx, Purpose};
use custody_core::ports::sender::{MoveKind, Payment, TokenMove};
use custody_core::ports::store::{read, write, Store};
use custody_core::swap::*;
use custody_core::tenant::TenantId;
use custody_core::time::Timestamp;
use custody_core::wallet::hot_wallet_path;
use custody_core::withdrawal::{FeePolicy, HotWallet, Rate};
use custody_core::Amount;
use custody_testkit::{block_on, CountingEntropy, MemoryStore};

const T0: i64 = 1_800_000_000_000;
const HOT: &str = "0x00000000000000000000000000000000000000aA";
const ROUTER: &str = "0x10ED43C718714eb63d5aA57B78B54704E256024E";
const WBNB: &str = "0xbb4CdB9CBd36B01bD1cBaEBF2De08d9173bc095c";
const PAIR: &str = "0x00000000000000000000000000000000000000Cc";

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0 + ms)
}

fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

fn acme() -> TenantId {
    TenantId::parse("acme").unwrap()
}

fn asset(code: &str) -> Asset {
    AssetCatalog::mainnet()
        .get(Network::Bsc, code)
        .unwrap()
        .clone()
}

fn contract(code: &str) -> String {
    asset(code).contract.unwrap_or_else(|| WBNB.to_owned())
}

fn user(code: &str) -> UserAccount {
    UserAccount::new(
        "acme".to_owned(),
        "alice".to_owned(),
        AssetId::new(Network::Bsc, code.to_owned()),
    )
}

fn hot() -> HotWallet {
    HotWallet {
        address: HOT.into(),
        path: hot_wallet_path(Network::Bsc),
    }
}

fn router() -> RouterSettings {
    RouterSettings {
        router: ROUTER.into(),
        wrapped_native: WBNB.into(),
        deadline_s: 600,
    }
}

struct Fx {
    store: Arc<dyn Store>,
    entropy: Arc<CountingEntropy>,
}

impl Fx {
    /// Alice holds `balance` of `code`.
    fn new(code: &str, balance: u128) -> Self {
        let fx = Fx {
            store: Arc::new(MemoryStore::new()),
            entropy: Arc::new(CountingEntropy::new(1)),
        };
        let account = user(code);
        block_on(write(fx.store.as_ref(), move |tx| {
            let meta = TxMeta {
                id: Uuid::new_v4(),
                reference_type: ReferenceType::Deposit,
                reference_id: Uuid::new_v4(),
                created_at: at(0),
            };
            Ok(ledger::credit_deposit(tx, &meta, &account, u(balance))?)
        }))
        .unwrap();
        fx
    }

    fn quote(
        &self,
        from: &str,
        to: &str,
        amount: u128,
        expected: u128,
    ) -> Result<SwapQuote, CoreError> {
        let request = SwapQuoteRequest {
            tenant: acme(),
            external_user_id: "alice".into(),
            asset_in: asset(from),
            asset_out: asset(to),
            amount_in: u(amount),
            slippage_bps: 100,
            route: vec![from.into(), to.into()],
            path: vec![contract(from), contract(to)],
            expected_amount_out: u(expected),
            policy: FeePolicy {
                min_amount_units: u(10),
                max_amount_units: u(10u128.pow(24)),
                markup_bps: 1_000,
                service_fee_units: u(7),
                service_fee_bps: 0,
                spread_bps: 100,
            },
            network_native: u(50),
            rate: Rate::NATIVE,
        };
        let id = Uuid::new_v4();
        block_on(write(self.store.as_ref(), move |tx| {
            create_quote(tx, id, &request, at(0))
        }))
    }

    fn execute(&self, q: &SwapQuote, now: i64) -> Result<Swap, CoreError> {
        let ids = SwapExecuteIds {
            swap: Uuid::new_v4(),
            outgoing: Uuid::new_v4(),
            approvals: [Uuid::new_v4(), Uuid::new_v4()],
            hold_tx: Uuid::new_v4(),
            created_event: Uuid::new_v4(),
            balance_event: Uuid::new_v4(),
        };
        let (id, a_in, a_out) = (q.id, asset(&q.asset_in), asset(&q.asset_out));
        block_on(write(self.store.as_ref(), move |tx| {
            execute(
                tx,
                ids,
                &acme(),
                id,
                (&a_in, &a_out),
                &hot(),
                &router(),
                at(now),
            )
        }))
    }

    fn outgoing(&self, id: Uuid) -> OutgoingTx {
        block_on(read(self.store.as_ref(), move |tx| Ok(tx.outgoing(id)?)))
            .unwrap()
            .unwrap()
    }

    /// Moves `id` as the broadcaster would, with the hooks.
    fn engine(&self, id: Uuid, f: impl Fn(&mut OutgoingTx) + Send + Sync + 'static) {
        let entropy = Arc::clone(&self.entropy);
        block_on(write(self.store.as_ref(), move |tx| {
            let mut out = tx.outgoing(id)?.expect("the outgoing transaction");
            f(&mut out);
            tx.update_outgoing(&out)?;
            on_outgoing(
                tx,
                entropy.as_ref(),
                &out,
                &AssetId::new(Network::Bsc, "BNB".to_owned()),
                at(1_000),
            )
        }))
        .unwrap();
    }

    fn get(&self, s: &Swap) -> Swap {
        let id = s.id;
        block_on(read(self.store.as_ref(), move |tx| {
            Ok(tx.swap(&acme(), id)?)
        }))
        .unwrap()
        .unwrap()
    }

    fn balance(&self, code: &str) -> (u128, u128) {
        let account = user(code);
        let b = block_on(read(self.store.as_ref(), move |tx| {
            Ok(ledger::user_balance(tx, &account)?)
        }))
        .unwrap();
        (b.available.units(), b.reserved.units())
    }

    /// The approvals of the hot wallet still in flight, by nonce: (id, nonce, amount approved).
    /// The unfinished approvals as (id, the one it goes out after, amount), in the order
    /// they go out (each after the one it names).
    fn approvals(&self) -> Vec<(Uuid, Option<Uuid>, Amount)> {
        let mut left: Vec<_> = block_on(read(self.store.as_ref(), |tx| {
            Ok(tx.outgoing_in_flight(Network::Bsc, HOT)?)
        }))
        .unwrap()
        .into_iter()
        .filter(|t| t.purpose == Purpose::Approval)
        .map(|t| match t.payment {
            Payment::Approve { amount, .. } => (t.id, t.after, amount),
            other => panic!("{other:?}"),
        })
        .collect();
        let mut ordered = Vec::new();
        while !left.is_empty() {
            let ready = left
                .iter()
                .position(|(_, after, _)| {
                    after.is_none_or(|a| left.iter().all(|(id, _, _)| *id != a))
                })
                .expect("the order has no cycle");
            ordered.push(left.remove(ready));
        }
        ordered
    }

    /// (debits, credits) posted on the house's BNB account `name`.
    fn house(&self, name: &str) -> (u128, u128) {
        let account = match name {
            "network_fees" => SystemAccount::NetworkFees,
            "treasury" => SystemAccount::Treasury,
            other => panic!("{other}"),
        };
        let key = AccountKey::system(account, AssetId::new(Network::Bsc, "BNB".to_owned()));
        let b = block_on(read(self.store.as_ref(), move |tx| {
            Ok(tx.ledger_account(&key)?)
        }))
        .unwrap()
        .unwrap_or_default();
        (b.debits_posted.units(), b.credits_posted.units())
    }

    fn reconciles(&self) {
        let report = block_on(read(self.store.as_ref(), |tx| Ok(ledger::reconcile(tx)?))).unwrap();
        assert!(report.balanced, "{:?}", report.discrepancies);
    }
}

fn code(e: CoreError) -> ErrorCode {
    match e {
        CoreError::Refused(r) => r.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A hash of its own per transaction (the store refuses one attempt shared by two).
fn hash_of(out: &OutgoingTx) -> String {
    format!("{:0>64}", out.id.simple())
}

fn sent(out: &mut OutgoingTx) {
    out.add_attempt(
        custody_core::outgoing::Attempt {
            hash: hash_of(out),
            raw: vec![1],
            bid: custody_core::outgoing::Bid::Gas {
                gas_limit: 200_000,
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

fn mined(
    fee: u128,
    succeeded: bool,
    moves: Vec<TokenMove>,
) -> impl Fn(&mut OutgoingTx) + Send + Sync {
    mined_at(fee, succeeded, moves, None)
}

/// Mined in a block of time `block_time_ms` (when the adapter read it).
fn mined_at(
    fee: u128,
    succeeded: bool,
    moves: Vec<TokenMove>,
    block_time_ms: Option<i64>,
) -> impl Fn(&mut OutgoingTx) + Send + Sync {
    move |out: &mut OutgoingTx| {
        out.included = Some(Included {
            hash: hash_of(out),
            block_number: 100,
            block_hash: "cd".repeat(32),
            succeeded,
            fee_native: u(fee),
            moves: moves.clone(),
            resources: None,
            block_time_ms,
        });
        out.transition(OutStatus::Included, "", at(20)).unwrap();
        if succeeded {
            out.transition(OutStatus::Final, "final", at(30)).unwrap();
        } else {
            out.failure_reason = Some("the transaction failed on chain".into());
            out.transition(OutStatus::Failed, "final with a failed receipt", at(30))
                .unwrap();
        }
    }
}

fn transfer(token: &str, from: &str, to: &str, amount: u128) -> TokenMove {
    TokenMove {
        contract: token.to_lowercase(),
        kind: MoveKind::Transfer,
        from: from.to_lowercase(),
        to: to.to_lowercase(),
        amount: u(amount),
    }
}

#[test]
fn a_token_swap_approves_the_router_once_then_swaps_after_the_approval() {
    let fx = Fx::new("USDT", 10_000_000);
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    // 1 % slippage of 990,000, rounded down.
    assert_eq!(q.min_amount_out, u(980_100));
    // network 50, markup 5, fee 7, spread 1 % of the amount.
    assert_eq!(
        q.costs.total_debited_units,
        u(1_000_000 + 50 + 5 + 7 + 10_000)
    );
    let s = fx.execute(&q, 1).unwrap();
    assert_eq!(s.status, SwapStatus::Reserved);
    assert_eq!(fx.balance("USDT"), (10_000_000 - 1_010_062, 1_010_062));
    let swap_tx = fx.outgoing(s.outgoing_id);
    assert_eq!(
        swap_tx.nonce, None,
        "a nonce is allocated when it is signed"
    );
    let Payment::Swap {
        min_out,
        deadline_s,
        native_in,
        native_out,
        ..
    } = &swap_tx.payment
    else {
        panic!("{:?}", swap_tx.payment)
    };
    assert_eq!(
        (*min_out, *native_in, *native_out),
        (u(980_100), false, false)
    );
    assert_eq!(*deadline_s, (T0 as u64 + 1) / 1_000 + 600);
    // The store has no count: the chain's allowance is not known, so zero first, then all.
    let approvals = fx.approvals();
    let amounts: Vec<_> = approvals.iter().map(|(_, _, a)| *a).collect();
    assert_eq!(amounts, [u(0), u(u128::MAX)]);
    assert_eq!(approvals[0].1, None);
    assert_eq!(
        approvals[1].1,
        Some(approvals[0].0),
        "everything after the zero"
    );
    assert_eq!(
        swap_tx.after,
        Some(approvals[1].0),
        "the swap after the approvals"
    );
    // A second swap of the same token needs no approval of its own, but it relies on the
    // first one's: it goes out after it too.
    let q2 = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s2 = fx.execute(&q2, 2).unwrap();
    assert_eq!(fx.outgoing(s2.outgoing_id).after, Some(approvals[1].0));
    assert_eq!(fx.approvals().len(), 2);
}

#[test]
fn approval_fees_are_booked_to_the_swap_when_final_and_when_reverted() {
    let fx = Fx::new("USDT", 10_000_000);
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s = fx.execute(&q, 1).unwrap();
    let approvals = fx.approvals();
    let (zero, all) = (approvals[0].0, approvals[1].0);
    // approve(0) succeeds and burns 25; approve(everything) reverts and still burns 35.
    fx.engine(zero, sent);
    fx.engine(zero, mined(25, true, Vec::new()));
    fx.engine(all, sent);
    fx.engine(all, mined(35, false, Vec::new()));
    assert_eq!(fx.house("network_fees"), (60, 0), "debited 25 + 35");
    assert_eq!(
        fx.house("treasury"),
        (0, 60),
        "the hot wallet's BNB paid it"
    );
    for id in [zero, all] {
        let booked = block_on(read(fx.store.as_ref(), move |tx| {
            Ok(tx.ledger_transaction(id)?)
        }))
        .unwrap()
        .expect("the approval's fee is booked");
        assert_eq!(booked.kind, TxKind::NetworkFee);
        assert_eq!(
            (booked.reference_type, booked.reference_id),
            (ReferenceType::Swap, s.id)
        );
    }
    // Its final state saved again books nothing twice.
    fx.engine(all, |_| {});
    assert_eq!(fx.house("network_fees"), (60, 0));
    fx.reconciles();
}

#[test]
fn after_a_failed_approval_the_next_swap_sets_the_allowance_to_zero_first() {
    let fx = Fx::new("USDT", 10_000_000);
    // A data dir rebuilt from the same seed: the chain kept an allowance the store never
    // counted, so approving everything over it reverts (USDT-style tokens).
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s = fx.execute(&q, 1).unwrap();
    let first = fx.approvals();
    let all = first.last().unwrap().0;
    fx.engine(all, sent);
    fx.engine(all, mined(35, false, Vec::new()));
    fx.engine(s.outgoing_id, sent);
    fx.engine(s.outgoing_id, mined(30, false, Vec::new()));
    let none = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.allowance(Network::Bsc, HOT, &contract("USDT"), ROUTER)?)
    }))
    .unwrap();
    assert_eq!(none, None, "the failed approval voids the count");
    let q2 = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s2 = fx.execute(&q2, 2).unwrap();
    let again: Vec<_> = fx
        .approvals()
        .into_iter()
        .filter(|(id, _, _)| first.iter().all(|(f, _, _)| f != id))
        .collect();
    let amounts: Vec<_> = again.iter().map(|(_, _, amount)| *amount).collect();
    assert_eq!(amounts, [u(0), u(u128::MAX)], "to zero, then everything");
    assert_eq!(again[1].1, Some(again[0].0));
    assert_eq!(fx.outgoing(s2.outgoing_id).after, Some(again[1].0));
    fx.reconciles();
}

#[test]
fn a_confirmed_swap_credits_what_the_router_actually_gave() {
    let fx = Fx::new("USDT", 10_000_000);
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s = fx.execute(&q, 1).unwrap();
    fx.engine(s.outgoing_id, sent);
    assert_eq!(fx.get(&s).status, SwapStatus::Broadcasted);
    // The router gave 985,000, less than expected, more than the minimum.
    let moves = vec![
        transfer(&contract("USDT"), HOT, PAIR, 1_000_000),
        transfer(&contract("USDC"), PAIR, HOT, 985_000),
    ];
    fx.engine(s.outgoing_id, mined(40, true, moves));
    let done = fx.get(&s);
    assert_eq!(done.status, SwapStatus::Confirmed);
    assert_eq!(done.actual_amount_in, Some(u(1_000_000)));
    assert_eq!(done.actual_amount_out, Some(u(985_000)));
    assert_eq!(done.actual_network_cost_units, Some(u(40)));
    assert_eq!(fx.balance("USDT"), (10_000_000 - 1_010_062, 0));
    assert_eq!(fx.balance("USDC"), (985_000, 0));
    let steps: Vec<_> = done.history.iter().map(|h| h.status.clone()).collect();
    assert_eq!(steps, ["reserved", "broadcasted", "confirmed"]);
    fx.reconciles();
}

#[test]
fn a_reverted_swap_releases_the_hold_and_gives_the_allowance_back() {
    let fx = Fx::new("USDT", 10_000_000);
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s = fx.execute(&q, 1).unwrap();
    fx.engine(s.outgoing_id, sent);
    fx.engine(s.outgoing_id, mined(30, false, Vec::new()));
    let done = fx.get(&s);
    assert_eq!(done.status, SwapStatus::Failed);
    assert!(done.failure_reason.unwrap().contains("minimum output"));
    assert_eq!(fx.balance("USDT"), (10_000_000, 0), "released in full");
    let left = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.allowance(Network::Bsc, HOT, &contract("USDT"), ROUTER)?)
    }))
    .unwrap()
    .unwrap();
    assert_eq!(left.remaining, u(u128::MAX));
    fx.reconciles();
}

#[test]
fn a_revert_says_the_deadline_passed_only_when_the_block_is_past_it() {
    let fx = Fx::new("USDT", 10_000_000);
    // Executed at T0 + 1 ms with a deadline of 600 s.
    let deadline_ms = (T0 + 1) / 1_000 * 1_000 + 600_000;
    for (block_time, says) in [
        (deadline_ms + 3_000, "deadline passed"),
        (deadline_ms, "price moved past the minimum output"),
    ] {
        let q = fx.quote("USDT", "USDC", 1_000, 990).unwrap();
        let s = fx.execute(&q, 1).unwrap();
        fx.engine(s.outgoing_id, sent);
        fx.engine(
            s.outgoing_id,
            mined_at(30, false, Vec::new(), Some(block_time)),
        );
        let reason = fx.get(&s).failure_reason.unwrap();
        assert!(reason.contains(says), "{block_time}: {reason}");
        let other = if says.starts_with("deadline") {
            "price"
        } else {
            "deadline"
        };
        assert!(!reason.contains(other), "one cause, not a list: {reason}");
    }
    fx.reconciles();
}

#[test]
fn bnb_in_and_bnb_out_read_the_wrapped_coin_moves() {
    let fx = Fx::new("BNB", 10_000_000);
    let q = fx.quote("BNB", "USDT", 1_000_000, 600_000).unwrap();
    let s = fx.execute(&q, 1).unwrap();
    let out = fx.outgoing(s.outgoing_id);
    assert_eq!(out.after, None, "no approval for the native coin");
    assert!(matches!(
        out.payment,
        Payment::Swap {
            native_in: true,
            ..
        }
    ));
    fx.engine(s.outgoing_id, sent);
    let moves = vec![
        TokenMove {
            contract: WBNB.to_lowercase(),
            kind: MoveKind::Wrap,
            from: ROUTER.to_lowercase(),
            to: ROUTER.to_lowercase(),
            amount: u(1_000_000),
        },
        transfer(WBNB, ROUTER, PAIR, 1_000_000),
        transfer(&contract("USDT"), PAIR, HOT, 601_000),
    ];
    fx.engine(s.outgoing_id, mined(40, true, moves));
    assert_eq!(fx.get(&s).actual_amount_out, Some(u(601_000)));
    assert_eq!(fx.balance("USDT"), (601_000, 0));
    // Native coin: the user pays the quoted total; the house keeps what gas did not burn.
    assert_eq!(fx.balance("BNB").1, 0);
    fx.reconciles();

    let moves = actual_amounts(
        &[
            transfer(&contract("USDT"), HOT, PAIR, 5),
            TokenMove {
                contract: WBNB.into(),
                kind: MoveKind::Unwrap,
                from: ROUTER.into(),
                to: ROUTER.into(),
                amount: u(3),
            },
        ],
        &[contract("USDT"), WBNB.into()],
        ROUTER,
        HOT,
        false,
        true,
    );
    assert_eq!(moves, Some((u(5), u(3))));
}

#[test]
fn refusals_keep_the_books_as_they_were() {
    let fx = Fx::new("USDT", 1_000);
    let small = fx.quote("USDT", "USDC", 5, 5).unwrap_err();
    assert_eq!(code(small), ErrorCode::AmountTooSmall);
    let tron = SwapQuoteRequest {
        tenant: acme(),
        external_user_id: "alice".into(),
        asset_in: AssetCatalog::mainnet()
            .get(Network::Tron, "USDT")
            .unwrap()
            .clone(),
        asset_out: asset("USDC"),
        amount_in: u(100),
        slippage_bps: 50,
        route: vec![],
        path: vec![],
        expected_amount_out: u(100),
        policy: FeePolicy {
            min_amount_units: u(1),
            max_amount_units: u(1_000),
            markup_bps: 0,
            service_fee_units: u(0),
            service_fee_bps: 0,
            spread_bps: 0,
        },
        network_native: u(0),
        rate: Rate::NATIVE,
    };
    let e = block_on(write(fx.store.as_ref(), move |tx| {
        create_quote(tx, Uuid::new_v4(), &tron, at(0))
    }))
    .unwrap_err();
    assert_eq!(code(e), ErrorCode::CrossChainNotSupported);
    let q = fx.quote("USDT", "USDC", 950, 950).unwrap();
    assert_eq!(
        code(fx.execute(&q, 1).unwrap_err()),
        ErrorCode::InsufficientBalance
    );
    let q = fx.quote("USDT", "USDC", 100, 100).unwrap();
    assert_eq!(
        code(fx.execute(&q, 30_000).unwrap_err()),
        ErrorCode::QuoteExpired
    );
    fx.execute(&q, 1).unwrap();
    assert_eq!(
        code(fx.execute(&q, 2).unwrap_err()),
        ErrorCode::QuoteAlreadyUsed
    );
    fx.reconciles();
}

#[test]
fn an_allowance_left_but_short_is_set_to_zero_before_it_is_raised() {
    let fx = Fx::new("USDT", 10_000_000);
    // The count says 10 units are left: too few, and some tokens refuse a non-zero change.
    let approval = Uuid::new_v4();
    block_on(write(fx.store.as_ref(), move |tx| {
        Ok(tx.put_allowance(&Allowance {
            network: Network::Bsc,
            owner: HOT.into(),
            token: contract("USDT"),
            spender: ROUTER.into(),
            remaining: u(10),
            approval_outgoing_id: approval,
        })?)
    }))
    .unwrap();
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s = fx.execute(&q, 1).unwrap();
    let mut approvals: Vec<_> = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.outgoing_in_flight(Network::Bsc, HOT)?)
    }))
    .unwrap()
    .into_iter()
    .filter(|t| t.purpose == Purpose::Approval)
    .collect();
    // In the order they must go out: the zero first, then the new allowance, then the swap.
    approvals.sort_by_key(|t| t.after.is_some());
    let amounts: Vec<_> = approvals
        .iter()
        .map(|t| match &t.payment {
            Payment::Approve { amount, .. } => *amount,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(amounts, [u(0), u(u128::MAX)]);
    assert_eq!(approvals[0].after, None);
    assert_eq!(approvals[1].after, Some(approvals[0].id));
    assert_eq!(
        fx.outgoing(s.outgoing_id).after,
        Some(approvals[1].id),
        "the swap after both"
    );
    let counted = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.allowance(Network::Bsc, HOT, &contract("USDT"), ROUTER)?)
    }))
    .unwrap()
    .unwrap();
    assert_eq!(counted.remaining, u(u128::MAX - 1_000_000));
    assert_eq!(counted.approval_outgoing_id, approvals[1].id);
}

#[test]
fn a_treasury_shortfall_of_either_asset_stops_quotes_and_executions() {
    let fx = Fx::new("USDT", 1_000);
    let q = fx.quote("USDT", "USDC", 100, 100).unwrap();
    let set = |key: &'static str, on: bool| {
        block_on(write(fx.store.as_ref(), move |tx| {
            custody_core::admin::set_control(tx, Uuid::new_v4(), "ops", key, on, "test", at(0))
        }))
        .unwrap();
    };
    for key in ["treasury_shortfall.BSC.USDT", "treasury_shortfall.BSC.USDC"] {
        set(key, true);
        assert_eq!(
            code(fx.quote("USDT", "USDC", 100, 100).unwrap_err()),
            ErrorCode::KillSwitchActive,
            "{key} quotes"
        );
        assert_eq!(
            code(fx.execute(&q, 1).unwrap_err()),
            ErrorCode::KillSwitchActive,
            "{key} executions"
        );
        set(key, false);
    }
    // Another asset's shortfall leaves this pair alone.
    set("treasury_shortfall.BSC.BNB", true);
    fx.execute(&q, 1).unwrap();
    fx.reconciles();
}

#[test]
fn a_zero_approval_that_reverts_voids_the_count_of_the_approval_it_went_first_for() {
    let fx = Fx::new("USDT", 10_000_000);
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    fx.execute(&q, 1).unwrap();
    let approvals = fx.approvals();
    let zero = approvals[0].0;
    fx.engine(zero, sent);
    fx.engine(zero, mined(25, false, Vec::new()));
    let counted = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.allowance(Network::Bsc, HOT, &contract("USDT"), ROUTER)?)
    }))
    .unwrap();
    assert_eq!(
        counted, None,
        "the allowance the zero did not clear makes the approval of everything count for nothing"
    );
    fx.reconciles();
}

/// Issue 31, F14: an approval without limit outlives a router change unless revoked. After
/// the router changes, the first start queues an `approve(0)` of the old router for each token
/// it was approved for (after the approval still on its way), counts it zero, audits it, and
/// a second start queues nothing; the new router is approved afresh by its first swap.
#[test]
fn a_router_change_revokes_the_old_routers_approvals_once() {
    let fx = Fx::new("USDT", 10_000_000);
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    fx.execute(&q, 1).unwrap();
    let approved = fx.approvals();
    let all = approved[1].0;
    let new_router = "0x00000000000000000000000000000000000000e2";
    let revoke = |now: i64| {
        let entropy = Arc::clone(&fx.entropy);
        block_on(write(fx.store.as_ref(), move |tx| {
            custody_core::swap::revoke_stale_approvals(
                tx,
                entropy.as_ref(),
                &hot(),
                new_router,
                at(now),
            )
        }))
        .unwrap()
    };
    // The configured router is the one approved: nothing to revoke.
    let same = {
        let entropy = Arc::clone(&fx.entropy);
        block_on(write(fx.store.as_ref(), move |tx| {
            custody_core::swap::revoke_stale_approvals(
                tx,
                entropy.as_ref(),
                &hot(),
                &ROUTER.to_uppercase().replace("0X", "0x"),
                at(2),
            )
        }))
        .unwrap()
    };
    assert!(same.is_empty());
    let queued = revoke(3);
    assert_eq!(queued.len(), 1);
    let r = fx.outgoing(queued[0]);
    assert_eq!(r.purpose, Purpose::Approval);
    assert_eq!(r.from, HOT);
    assert_eq!(r.after, Some(all), "after the approval still on its way");
    let Payment::Approve {
        token,
        spender,
        amount,
    } = &r.payment
    else {
        panic!("{:?}", r.payment)
    };
    assert!(token.eq_ignore_ascii_case(&contract("USDT")));
    assert!(spender.eq_ignore_ascii_case(ROUTER));
    assert_eq!(*amount, Amount::ZERO);
    let counted = || {
        block_on(read(fx.store.as_ref(), |tx| {
            Ok(tx.allowance(Network::Bsc, HOT, &contract("USDT"), ROUTER)?)
        }))
        .unwrap()
        .unwrap()
    };
    // Counted as it stands until the revocation is final.
    assert_eq!(counted().approval_outgoing_id, queued[0]);
    assert!(counted().remaining > Amount::ZERO);
    let audit = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx
            .list_audit(custody_core::page::Page::first(10))?
            .unwrap_or_default())
    }))
    .unwrap();
    assert_eq!(audit[0].action, "swap.router_approval_revoked");
    assert!(
        revoke(4).is_empty(),
        "a second start while it is on its way queues nothing"
    );
    // Nothing moved on any ledger account: a revocation spends only its fee.
    assert_eq!(fx.balance("USDT"), (10_000_000 - 1_010_062, 1_010_062));
    assert_eq!(fx.house("network_fees"), (0, 0));
    // Reverted on chain: the count stays, and the next start revokes again.
    fx.engine(queued[0], |out| {
        sent(out);
        mined(40, false, vec![])(out);
    });
    assert!(counted().remaining > Amount::ZERO);
    assert_eq!(fx.house("network_fees"), (40, 0), "its gas is the house's");
    let again = revoke(5);
    assert_eq!(again.len(), 1);
    // Final: counted zero, and never revoked again.
    fx.engine(again[0], |out| {
        sent(out);
        mined(40, true, vec![])(out);
    });
    assert_eq!(counted().remaining, Amount::ZERO);
    assert!(revoke(6).is_empty());
    assert_eq!(fx.balance("USDT"), (10_000_000 - 1_010_062, 1_010_062));
    fx.reconciles();
}

/// A revocation moves no money and is what an operator wants while swaps are stopped: the
/// swaps switch holds the swaps and their approvals, not a revocation; the global one holds
/// everything.
#[test]
fn the_swaps_switch_holds_approvals_but_not_a_revocation() {
    let fx = Fx::new("USDT", 10_000_000);
    let q = fx.quote("USDT", "USDC", 1_000_000, 990_000).unwrap();
    let s = fx.execute(&q, 1).unwrap();
    let approval = fx.approvals()[1].0;
    let entropy = Arc::clone(&fx.entropy);
    let revocation = block_on(write(fx.store.as_ref(), move |tx| {
        custody_core::swap::revoke_stale_approvals(
            tx,
            entropy.as_ref(),
            &hot(),
            "0x00000000000000000000000000000000000000e2",
            at(2),
        )
    }))
    .unwrap()[0];
    let may = |purpose: Purpose, reference: Uuid| {
        block_on(read(fx.store.as_ref(), move |tx| {
            Ok(custody_core::outgoing::may_sign_new(
                tx,
                purpose,
                reference,
                Network::Bsc,
            )?)
        }))
        .unwrap()
    };
    let switch = |key: &'static str, on: bool| {
        block_on(write(fx.store.as_ref(), move |tx| {
            custody_core::admin::set_control(
                tx,
                Uuid::new_v4(),
                "cli:test",
                key,
                on,
                "drill",
                at(3),
            )
        }))
        .unwrap();
    };
    switch("kill_switch.swaps", true);
    assert!(!may(Purpose::Swap, s.id));
    assert!(
        !may(Purpose::Approval, approval),
        "an approval serves a swap"
    );
    assert!(may(Purpose::Approval, revocation), "a revocation goes on");
    switch("kill_switch.swaps", false);
    switch("kill_switch.global", true);
    assert!(
        !may(Purpose::Approval, revocation),
        "the global switch holds it too"
    );
}
