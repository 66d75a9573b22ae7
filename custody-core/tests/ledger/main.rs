//! Each operation of the ledger, each refusal, history and reconciliation, on the memory
//! ledger; and random sequences of operations against a model (`properties`).

mod properties;

use uuid::Uuid;

use custody_core::amount::Amount;
use custody_core::asset::AssetId;
use custody_core::error::{CoreError, ErrorCode};
use custody_core::network::Network;
use custody_core::time::Timestamp;

use custody_core::ledger::*;
use custody_testkit::MemoryLedger;

fn usdt() -> AssetId {
    AssetId::new(Network::Bsc, "USDT")
}

fn bnb() -> AssetId {
    AssetId::new(Network::Bsc, "BNB")
}

fn units(n: u128) -> Amount {
    Amount::from_units(n)
}

fn user(name: &str) -> UserAccount {
    UserAccount::new("t1", name, usdt())
}

fn system(account: SystemAccount, asset: AssetId) -> AccountKey {
    AccountKey::system(account, asset)
}

/// A ledger plus a source of distinct ids and increasing times.
struct Fx {
    ledger: MemoryLedger,
    next: u128,
}

impl Fx {
    fn new() -> Self {
        Fx {
            ledger: MemoryLedger::new(),
            next: 1,
        }
    }

    fn id(&mut self) -> Uuid {
        self.next += 1;
        Uuid::from_u128(self.next)
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(1_700_000_000_000 + i64::try_from(self.next).unwrap())
    }

    fn meta(&mut self, reference_type: ReferenceType) -> TxMeta {
        let id = self.id();
        let reference_id = self.id();
        TxMeta {
            id,
            reference_type,
            reference_id,
            created_at: self.now(),
        }
    }

    fn deposit(&mut self, account: &UserAccount, n: u128) {
        let meta = self.meta(ReferenceType::Deposit);
        credit_deposit(&mut self.ledger, &meta, account, units(n)).unwrap();
    }

    fn balance(&mut self, account: &UserAccount) -> (u128, u128) {
        let b = user_balance(&mut self.ledger, account).unwrap();
        (b.available.units(), b.reserved.units())
    }

    fn reserve(&mut self, account: &UserAccount, n: u128) -> Result<Hold, LedgerError> {
        let meta = self.meta(ReferenceType::Withdrawal);
        let hold = NewHold {
            id: self.id(),
            purpose: HoldPurpose::Withdrawal,
            user: account.clone(),
            counter: system(SystemAccount::Treasury, account.asset.clone()),
            amount: units(n),
        };
        reserve(&mut self.ledger, &meta, &hold)
    }

    fn settle(&mut self, hold: Uuid, n: u128, also: Vec<Leg>) -> Result<HoldOutcome, LedgerError> {
        let tx_id = self.id();
        let at = self.now();
        settle(
            &mut self.ledger,
            &Settle {
                hold_id: hold,
                tx_id,
                amount: units(n),
                also,
                at,
            },
        )
    }

    fn release(&mut self, hold: Uuid) -> Result<HoldOutcome, LedgerError> {
        let tx_id = self.id();
        let at = self.now();
        release(&mut self.ledger, hold, tx_id, at)
    }

    fn assert_reconciles(&mut self) {
        let report = reconcile(&mut self.ledger).unwrap();
        assert!(report.balanced, "{:#?}", report.discrepancies);
    }
}

fn code(result: Result<impl std::fmt::Debug, LedgerError>) -> ErrorCode {
    match result {
        Err(LedgerError::Refused(r)) => r.code,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

// ---- transfers ----

#[test]
fn transfer_moves_available_between_users() {
    let mut fx = Fx::new();
    let (alice, bob) = (user("alice"), user("bob"));
    fx.deposit(&alice, 100);
    let meta = fx.meta(ReferenceType::InternalTransfer);
    let tx = transfer(&mut fx.ledger, &meta, &alice, "bob", units(30)).unwrap();
    assert_eq!(tx.kind, TxKind::InternalTransfer);
    assert_eq!(tx.entries.len(), 2);
    assert_eq!(tx.entries[0].balance_after, Some(units(70)));
    assert_eq!(tx.entries[1].balance_after, Some(units(30)));
    assert_eq!(fx.balance(&alice), (70, 0));
    assert_eq!(fx.balance(&bob), (30, 0));
    fx.assert_reconciles();
}

#[test]
fn transfer_refuses_insufficient_balance_and_writes_nothing() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 10);
    let before = fx.ledger.clone();
    let meta = fx.meta(ReferenceType::InternalTransfer);
    assert_eq!(
        code(transfer(&mut fx.ledger, &meta, &alice, "bob", units(11))),
        ErrorCode::InsufficientBalance
    );
    assert_eq!(fx.ledger, before);
}

#[test]
fn transfer_refuses_zero_and_self() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 10);
    let before = fx.ledger.clone();
    let meta = fx.meta(ReferenceType::InternalTransfer);
    assert_eq!(
        code(transfer(&mut fx.ledger, &meta, &alice, "bob", Amount::ZERO)),
        ErrorCode::AmountTooSmall
    );
    assert_eq!(
        code(transfer(&mut fx.ledger, &meta, &alice, "alice", units(1))),
        ErrorCode::ValidationFailed
    );
    assert_eq!(fx.ledger, before);
}

#[test]
fn reserved_money_cannot_be_transferred() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    fx.reserve(&alice, 60).unwrap();
    let meta = fx.meta(ReferenceType::InternalTransfer);
    assert_eq!(
        code(transfer(&mut fx.ledger, &meta, &alice, "bob", units(41))),
        ErrorCode::InsufficientBalance
    );
    transfer(&mut fx.ledger, &meta, &alice, "bob", units(40)).unwrap();
    assert_eq!(fx.balance(&alice), (0, 60));
}

// ---- adjustments and deposits ----

#[test]
fn adjust_credits_and_debits_against_adjustments() {
    let mut fx = Fx::new();
    let alice = user("alice");
    let meta = fx.meta(ReferenceType::Adjustment);
    adjust(&mut fx.ledger, &meta, &alice, Direction::Credit, units(50)).unwrap();
    let meta = fx.meta(ReferenceType::Adjustment);
    adjust(&mut fx.ledger, &meta, &alice, Direction::Debit, units(20)).unwrap();
    assert_eq!(fx.balance(&alice), (30, 0));
    let adjustments = fx.ledger.accounts()[&system(SystemAccount::Adjustments, usdt())];
    assert_eq!(adjustments.debits_posted, units(50));
    assert_eq!(adjustments.credits_posted, units(20));
    fx.assert_reconciles();
}

#[test]
fn adjust_debit_refuses_to_overdraw_including_reserved() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 30);
    fx.reserve(&alice, 10).unwrap();
    let before = fx.ledger.clone();
    let meta = fx.meta(ReferenceType::Adjustment);
    assert_eq!(
        code(adjust(
            &mut fx.ledger,
            &meta,
            &alice,
            Direction::Debit,
            units(21)
        )),
        ErrorCode::InsufficientBalance
    );
    assert_eq!(
        code(adjust(
            &mut fx.ledger,
            &meta,
            &alice,
            Direction::Credit,
            Amount::ZERO
        )),
        ErrorCode::AmountTooSmall
    );
    assert_eq!(fx.ledger, before);
}

#[test]
fn deposit_credit_and_reversal_go_through_clearing() {
    let mut fx = Fx::new();
    let alice = user("alice");
    let meta = fx.meta(ReferenceType::Deposit);
    credit_deposit(&mut fx.ledger, &meta, &alice, units(80)).unwrap();
    let reversal = TxMeta {
        id: fx.id(),
        ..meta.clone()
    };
    reverse_deposit(&mut fx.ledger, &reversal, &alice, units(80)).unwrap();
    assert_eq!(fx.balance(&alice), (0, 0));
    let clearing = fx.ledger.accounts()[&system(SystemAccount::DepositClearing, usdt())];
    assert_eq!(
        (clearing.debits_posted, clearing.credits_posted),
        (units(80), units(80))
    );
    fx.assert_reconciles();
}

#[test]
fn reversal_of_a_spent_deposit_books_the_shortfall_as_a_receivable() {
    let mut fx = Fx::new();
    let alice = user("alice");
    let credit = fx.meta(ReferenceType::Deposit);
    credit_deposit(&mut fx.ledger, &credit, &alice, units(80)).unwrap();
    let meta = fx.meta(ReferenceType::InternalTransfer);
    transfer(&mut fx.ledger, &meta, &alice, "bob", units(50)).unwrap();
    let meta = TxMeta {
        id: fx.id(),
        ..credit.clone()
    };
    let (_, shortfall) = reverse_deposit(&mut fx.ledger, &meta, &alice, units(80)).unwrap();
    assert_eq!(shortfall, units(50));
    // Never overdrawn: the 30 still there are taken back, the 50 spent are owed.
    assert_eq!(fx.balance(&alice), (0, 0));
    let owed = fx.ledger.accounts()[&system(SystemAccount::ReorgReceivable, usdt())];
    assert_eq!(
        (owed.debits_posted, owed.credits_posted),
        (units(50), units(0))
    );
    fx.assert_reconciles();

    // Mined again: the receivable is settled first, alice gets back the 30 taken.
    let again = TxMeta {
        id: fx.id(),
        ..credit.clone()
    };
    recredit_deposit(&mut fx.ledger, &again, &alice, units(80), shortfall).unwrap();
    assert_eq!(fx.balance(&alice), (30, 0));
    let owed = fx.ledger.accounts()[&system(SystemAccount::ReorgReceivable, usdt())];
    assert_eq!(owed.debits_posted, owed.credits_posted);
    fx.assert_reconciles();
    assert_eq!(
        code(credit_deposit(&mut fx.ledger, &meta, &alice, Amount::ZERO)),
        ErrorCode::AmountTooSmall
    );
}

// ---- holds ----

#[test]
fn reserve_moves_available_to_reserved() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let hold = fx.reserve(&alice, 70).unwrap();
    assert_eq!(hold.state, HoldState::Pending);
    assert_eq!(fx.balance(&alice), (30, 70));
    let treasury = fx.ledger.accounts()[&system(SystemAccount::Treasury, usdt())];
    assert_eq!(treasury.credits_pending, units(70));
    fx.assert_reconciles();
}

#[test]
fn reserve_refusals() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let before = fx.ledger.clone();
    assert_eq!(
        code(fx.reserve(&alice, 101)),
        ErrorCode::InsufficientBalance
    );
    assert_eq!(code(fx.reserve(&alice, 0)), ErrorCode::AmountTooSmall);
    assert_eq!(fx.ledger, before);

    let meta = fx.meta(ReferenceType::Withdrawal);
    let mut new = NewHold {
        id: fx.id(),
        purpose: HoldPurpose::Withdrawal,
        user: alice.clone(),
        counter: alice.key(),
        amount: units(1),
    };
    assert!(matches!(
        reserve(&mut fx.ledger, &meta, &new),
        Err(LedgerError::Invariant(_))
    ));
    new.counter = system(SystemAccount::Treasury, bnb());
    assert!(matches!(
        reserve(&mut fx.ledger, &meta, &new),
        Err(LedgerError::Invariant(_))
    ));
    assert_eq!(fx.ledger, before);

    let hold = fx.reserve(&alice, 1).unwrap();
    new.id = hold.id;
    new.counter = system(SystemAccount::Treasury, usdt());
    let meta = fx.meta(ReferenceType::Withdrawal);
    assert_eq!(
        reserve(&mut fx.ledger, &meta, &new),
        Err(LedgerError::HoldExists(hold.id))
    );
    new.id = fx.id();
    let reused = TxMeta {
        id: hold.reserve_tx_id,
        ..meta
    };
    assert_eq!(
        reserve(&mut fx.ledger, &reused, &new),
        Err(LedgerError::TransactionExists(hold.reserve_tx_id))
    );
}

#[test]
fn full_settle_posts_the_hold() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let hold = fx.reserve(&alice, 70).unwrap();
    let out = fx.settle(hold.id, 70, vec![]).unwrap();
    assert!(matches!(out.hold.state, HoldState::Settled { amount, .. } if amount == units(70)));
    assert_eq!(out.tx.kind, TxKind::WithdrawalSettle);
    assert_eq!(out.tx.hold_id, Some(hold.id));
    assert_eq!(out.tx.reference_id, hold.reference_id);
    assert_eq!(out.tx.entries.len(), 2);
    assert_eq!(fx.balance(&alice), (30, 0));
    let treasury = fx.ledger.accounts()[&system(SystemAccount::Treasury, usdt())];
    assert_eq!(
        (treasury.credits_posted, treasury.credits_pending),
        (units(70), Amount::ZERO)
    );
    fx.assert_reconciles();
}

#[test]
fn partial_settle_releases_the_rest_and_books_fees() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let hold = fx.reserve(&alice, 70).unwrap();
    let treasury = system(SystemAccount::Treasury, usdt());
    let also = vec![
        // The 5 of fees inside the 65 settled go to revenue.
        Leg::debit(treasury.clone(), units(5)),
        Leg::credit(system(SystemAccount::Revenue, usdt()), units(5)),
        // Gas is paid in BNB: a second asset, balanced on its own.
        Leg::debit(system(SystemAccount::NetworkFees, bnb()), units(3)),
        Leg::credit(system(SystemAccount::Treasury, bnb()), units(3)),
    ];
    let out = fx.settle(hold.id, 65, also).unwrap();
    assert_eq!(out.tx.entries.len(), 8);
    assert_eq!(fx.balance(&alice), (35, 0));
    let t = fx.ledger.accounts()[&treasury];
    assert_eq!((t.credits_posted, t.debits_posted), (units(65), units(5)));
    fx.assert_reconciles();
}

#[test]
fn settle_refusals_change_nothing() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let hold = fx.reserve(&alice, 70).unwrap();
    let before = fx.ledger.clone();
    assert_eq!(
        code(fx.settle(hold.id, 71, vec![])),
        ErrorCode::AmountTooLarge
    );
    assert_eq!(
        code(fx.settle(hold.id, 0, vec![])),
        ErrorCode::AmountTooSmall
    );
    let unbalanced = vec![Leg::credit(
        system(SystemAccount::Revenue, usdt()),
        units(1),
    )];
    assert!(matches!(
        fx.settle(hold.id, 70, unbalanced),
        Err(LedgerError::Invariant(_))
    ));
    let overdraw = vec![
        Leg::debit(alice.key(), units(31)),
        Leg::credit(system(SystemAccount::Revenue, usdt()), units(31)),
    ];
    assert_eq!(
        code(fx.settle(hold.id, 70, overdraw)),
        ErrorCode::InsufficientBalance
    );
    let missing = fx.id();
    assert_eq!(
        fx.settle(missing, 1, vec![]).unwrap_err(),
        LedgerError::HoldNotFound(missing)
    );
    assert_eq!(
        fx.release(missing).unwrap_err(),
        LedgerError::HoldNotFound(missing)
    );
    assert_eq!(fx.ledger, before);
}

#[test]
fn release_returns_the_whole_hold() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let hold = fx.reserve(&alice, 70).unwrap();
    let out = fx.release(hold.id).unwrap();
    assert!(matches!(out.hold.state, HoldState::Released { .. }));
    assert_eq!(out.tx.kind, TxKind::WithdrawalRelease);
    assert_eq!(fx.balance(&alice), (100, 0));
    fx.assert_reconciles();
}

#[test]
fn a_hold_ends_exactly_once() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let settled = fx.reserve(&alice, 10).unwrap();
    let released = fx.reserve(&alice, 20).unwrap();
    fx.settle(settled.id, 10, vec![]).unwrap();
    fx.release(released.id).unwrap();
    let before = fx.ledger.clone();
    let not_pending = |id, state| LedgerError::HoldNotPending { id, state };
    assert_eq!(
        fx.settle(settled.id, 10, vec![]).unwrap_err(),
        not_pending(settled.id, "settled")
    );
    assert_eq!(
        fx.release(settled.id).unwrap_err(),
        not_pending(settled.id, "settled")
    );
    assert_eq!(
        fx.settle(released.id, 5, vec![]).unwrap_err(),
        not_pending(released.id, "released")
    );
    assert_eq!(
        fx.release(released.id).unwrap_err(),
        not_pending(released.id, "released")
    );
    assert_eq!(fx.ledger, before);
    assert!(matches!(
        CoreError::from(not_pending(settled.id, "settled")),
        CoreError::Invariant(_)
    ));
    fx.assert_reconciles();
}

#[test]
fn swap_hold_uses_swap_kinds_and_credits_the_output() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let meta = fx.meta(ReferenceType::Swap);
    let new = NewHold {
        id: fx.id(),
        purpose: HoldPurpose::Swap,
        user: alice.clone(),
        counter: system(SystemAccount::Treasury, usdt()),
        amount: units(50),
    };
    let hold = reserve(&mut fx.ledger, &meta, &new).unwrap();
    let alice_bnb = UserAccount::new("t1", "alice", bnb());
    let also = vec![
        Leg::debit(system(SystemAccount::Treasury, bnb()), units(7)),
        Leg::credit(alice_bnb.key(), units(7)),
    ];
    let out = fx.settle(hold.id, 50, also).unwrap();
    assert_eq!(out.tx.kind, TxKind::SwapSettle);
    assert_eq!(fx.balance(&alice), (50, 0));
    assert_eq!(fx.balance(&alice_bnb), (7, 0));
    fx.assert_reconciles();
}

// ---- the posting engine ----

#[test]
fn post_requires_balance_per_asset() {
    let mut fx = Fx::new();
    let meta = fx.meta(ReferenceType::Sweep);
    let cross_asset = [
        Leg::debit(system(SystemAccount::Treasury, usdt()), units(5)),
        Leg::credit(system(SystemAccount::DepositClearing, bnb()), units(5)),
    ];
    assert!(matches!(
        post(&mut fx.ledger, &meta, TxKind::Sweep, &cross_asset),
        Err(LedgerError::Invariant(_))
    ));
    assert!(matches!(
        post(&mut fx.ledger, &meta, TxKind::Sweep, &[]),
        Err(LedgerError::Invariant(_))
    ));
    let two_assets = [
        Leg::debit(system(SystemAccount::Treasury, usdt()), units(5)),
        Leg::credit(system(SystemAccount::DepositClearing, usdt()), units(5)),
        Leg::debit(system(SystemAccount::NetworkFees, bnb()), units(2)),
        Leg::credit(system(SystemAccount::Treasury, bnb()), units(2)),
    ];
    let tx = post(&mut fx.ledger, &meta, TxKind::Sweep, &two_assets).unwrap();
    assert!(
        tx.entries.iter().all(|e| e.balance_after.is_none()),
        "system accounts have none"
    );
    assert_eq!(
        post(&mut fx.ledger, &meta, TxKind::Sweep, &two_assets),
        Err(LedgerError::TransactionExists(meta.id))
    );
    fx.assert_reconciles();
}

#[test]
fn post_refuses_hold_kinds() {
    let mut fx = Fx::new();
    let meta = fx.meta(ReferenceType::Withdrawal);
    let legs = [
        Leg::debit(system(SystemAccount::Treasury, usdt()), units(5)),
        Leg::credit(system(SystemAccount::Revenue, usdt()), units(5)),
    ];
    for kind in TxKind::ALL.iter().filter(|k| k.is_hold_kind()) {
        assert!(matches!(
            post(&mut fx.ledger, &meta, *kind, &legs),
            Err(LedgerError::Invariant(_))
        ));
    }
}

#[test]
fn overflow_is_amount_too_large_not_a_panic() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, u128::MAX);
    let before = fx.ledger.clone();
    let meta = fx.meta(ReferenceType::Deposit);
    assert_eq!(
        code(credit_deposit(
            &mut fx.ledger,
            &meta,
            &user("bob"),
            units(1)
        )),
        ErrorCode::AmountTooLarge,
        "deposit_clearing's debits would overflow"
    );
    let meta = fx.meta(ReferenceType::Adjustment);
    assert_eq!(
        code(adjust(
            &mut fx.ledger,
            &meta,
            &alice,
            Direction::Credit,
            units(1)
        )),
        ErrorCode::AmountTooLarge
    );
    assert_eq!(fx.ledger, before);
    fx.assert_reconciles();
}

#[test]
fn postings_carry_derived_entry_ids_and_others_are_named() {
    let mut fx = Fx::new();
    let meta = fx.meta(ReferenceType::Deposit);
    let tx = credit_deposit(&mut fx.ledger, &meta, &user("carol"), units(3)).unwrap();
    assert_eq!(check_entry_ids(&tx), Ok(()));
    let mut moved = tx.clone();
    moved.entries.swap(0, 1);
    let err = check_entry_ids(&moved).unwrap_err();
    assert!(err.contains("entry 0 of transaction"), "{err}");
    let mut renamed = tx.clone();
    renamed.id = fx.id();
    assert!(check_entry_ids(&renamed).is_err());
}

// ---- history ----

#[test]
fn history_shows_moves_of_available_newest_first() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let hold = fx.reserve(&alice, 70).unwrap();
    fx.settle(hold.id, 65, vec![]).unwrap();
    let meta = fx.meta(ReferenceType::InternalTransfer);
    transfer(&mut fx.ledger, &meta, &alice, "bob", units(5)).unwrap();
    let alice_bnb = UserAccount::new("t1", "alice", bnb());
    fx.deposit(&alice_bnb, 9);
    fx.deposit(
        &UserAccount::new("t1", "alice", AssetId::new(Network::Tron, "USDT")),
        1,
    );
    fx.deposit(&UserAccount::new("t2", "alice", usdt()), 1);

    let page = history(
        &mut fx.ledger,
        &custody_core::TenantId::parse("t1").unwrap(),
        "alice",
        Network::Bsc,
        100,
    )
    .unwrap();
    assert!(!page.has_more);
    let rows: Vec<(TxKind, &str, Direction, u128, u128)> = page
        .data
        .iter()
        .map(|h| {
            (
                h.kind,
                h.asset.as_str(),
                h.direction,
                h.amount_units.units(),
                h.balance_after_units.units(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (TxKind::DepositCredit, "BNB", Direction::Credit, 9, 9),
            (TxKind::InternalTransfer, "USDT", Direction::Debit, 5, 30),
            // The settle only shows the released rest: the 65 left `available` at reserve.
            (TxKind::WithdrawalSettle, "USDT", Direction::Credit, 5, 35),
            (TxKind::WithdrawalHold, "USDT", Direction::Debit, 70, 30),
            (TxKind::DepositCredit, "USDT", Direction::Credit, 100, 100),
        ]
    );
    assert_eq!(page.data[3].reference_type, ReferenceType::Withdrawal);
    assert_eq!(page.data[3].reference_id, hold.reference_id);

    let page = history(
        &mut fx.ledger,
        &custody_core::TenantId::parse("t1").unwrap(),
        "alice",
        Network::Bsc,
        2,
    )
    .unwrap();
    assert_eq!((page.data.len(), page.has_more), (2, true));
    for bad in [0, HISTORY_LIMIT_MAX + 1] {
        assert_eq!(
            code(history(
                &mut fx.ledger,
                &custody_core::TenantId::parse("t1").unwrap(),
                "alice",
                Network::Bsc,
                bad
            )),
            ErrorCode::ValidationFailed
        );
    }
}

#[test]
fn history_entry_serializes_to_the_contract_shape() {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let page = history(
        &mut fx.ledger,
        &custody_core::TenantId::parse("t1").unwrap(),
        "alice",
        Network::Bsc,
        1,
    )
    .unwrap();
    let json = serde_json::to_value(&page).unwrap();
    let row = &json["data"][0];
    let mut keys: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "amount_units",
            "asset",
            "balance_after_units",
            "created_at",
            "direction",
            "id",
            "kind",
            "reference_id",
            "reference_type"
        ]
    );
    assert_eq!(row["kind"], "deposit_credit");
    assert_eq!(row["direction"], "credit");
    assert_eq!(row["amount_units"], "100");
    assert_eq!(row["balance_after_units"], "100");
    assert_eq!(row["reference_type"], "deposit");
    assert!(row["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(json["has_more"], false);
}

// ---- reconciliation ----

fn discrepancies(fx: &mut Fx) -> Vec<String> {
    let report = reconcile(&mut fx.ledger).unwrap();
    assert_eq!(report.balanced, report.discrepancies.is_empty());
    report.discrepancies
}

fn busy_ledger() -> (Fx, Hold) {
    let mut fx = Fx::new();
    let alice = user("alice");
    fx.deposit(&alice, 100);
    let settled = fx.reserve(&alice, 10).unwrap();
    fx.settle(settled.id, 8, vec![]).unwrap();
    let pending = fx.reserve(&alice, 20).unwrap();
    let meta = fx.meta(ReferenceType::InternalTransfer);
    transfer(&mut fx.ledger, &meta, &alice, "bob", units(5)).unwrap();
    (fx, pending)
}

#[test]
fn reconcile_counts_a_clean_ledger() {
    let (mut fx, _) = busy_ledger();
    let report = reconcile(&mut fx.ledger).unwrap();
    assert!(report.balanced, "{:?}", report.discrepancies);
    assert_eq!((report.transactions, report.holds), (5, 2));
    assert_eq!(report.accounts, 4);
    assert!(reconcile(&mut MemoryLedger::new()).unwrap().balanced);
}

#[test]
fn reconcile_finds_tampered_totals() {
    let (mut fx, _) = busy_ledger();
    let key = user("bob").key();
    let mut bob = fx.ledger.accounts()[&key];
    bob.credits_posted = units(500);
    fx.ledger.put_ledger_account(&key, &bob).unwrap();
    let found = discrepancies(&mut fx);
    assert!(
        found.iter().any(|d| d.contains("entries sum to")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|d| d.contains("debits and credits differ")),
        "{found:?}"
    );
}

#[test]
fn reconcile_finds_negative_available() {
    let (mut fx, _) = busy_ledger();
    let key = user("bob").key();
    let mut bob = fx.ledger.accounts()[&key];
    bob.debits_posted = units(6);
    fx.ledger.put_ledger_account(&key, &bob).unwrap();
    let found = discrepancies(&mut fx);
    assert!(
        found
            .iter()
            .any(|d| d.contains("available balance is negative")),
        "{found:?}"
    );
}

#[test]
fn reconcile_finds_unbalanced_and_duplicate_credits() {
    let (mut fx, _) = busy_ledger();
    let meta = fx.meta(ReferenceType::Deposit);
    let tx = credit_deposit(&mut fx.ledger, &meta, &user("carol"), units(3)).unwrap();
    let mut twice = tx.clone();
    twice.id = fx.id();
    twice
        .entries
        .iter_mut()
        .enumerate()
        .for_each(|(i, e)| e.id = entry_id(twice.id, i));
    twice.entries[1].amount = units(4);
    fx.ledger.insert_ledger_transaction(&twice).unwrap();
    let found = discrepancies(&mut fx);
    assert!(
        found.iter().any(|d| d.contains("is unbalanced")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|d| d.contains("credited 2 times")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|d| d.contains("balance_after 3 but replaying gives 7")),
        "{found:?}"
    );
}

#[test]
fn reconcile_finds_a_pending_total_without_its_hold() {
    let (mut fx, pending) = busy_ledger();
    // A hold released behind the ledger's back: state says released, totals still pending.
    let state = HoldState::Released {
        tx_id: fx.id(),
        at: fx.now(),
    };
    fx.ledger.finish_ledger_hold(pending.id, &state).unwrap();
    let found = discrepancies(&mut fx);
    assert!(
        found.iter().any(|d| d.contains("pending holds explain")),
        "{found:?}"
    );
    assert!(found
        .iter()
        .any(|d| d.contains(&format!("hold {} is released", pending.id))));
}

#[test]
fn memory_ledger_enforces_its_constraints() {
    let (mut fx, pending) = busy_ledger();
    let tx = fx.ledger.transactions()[0].clone();
    assert!(fx.ledger.insert_ledger_transaction(&tx).is_err());
    let hold = fx.ledger.ledger_hold(pending.id).unwrap().unwrap();
    assert!(fx.ledger.insert_ledger_hold(&hold).is_err());
    assert!(fx
        .ledger
        .finish_ledger_hold(pending.id, &HoldState::Pending)
        .is_err());
    assert!(fx
        .ledger
        .finish_ledger_hold(Uuid::nil(), &HoldState::Pending)
        .is_err());
    fx.release(pending.id).unwrap();
    let again = HoldState::Released {
        tx_id: fx.id(),
        at: fx.now(),
    };
    assert!(fx.ledger.finish_ledger_hold(pending.id, &again).is_err());
}
