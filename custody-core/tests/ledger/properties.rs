//! Random sequences of operations against a model that is obviously right: a map of
//! (available, reserved) per user account and a list of holds. After every step the ledger must
//! agree with the model, conserve every asset and overdraw no one; a refused step and a replayed
//! settle or release must change nothing; and the final ledger must reconcile.

use std::collections::HashMap;

use proptest::prelude::*;
use uuid::Uuid;

use custody_core::amount::Amount;
use custody_core::asset::AssetId;
use custody_core::error::ErrorCode;
use custody_core::network::Network;
use custody_core::time::Timestamp;

use custody_core::ledger::*;
use custody_testkit::MemoryLedger;

const USERS: [&str; 3] = ["ann", "ben", "cy:x"];
const TENANT: &str = "t1";

fn asset_id(i: usize) -> AssetId {
    AssetId::new(Network::Bsc, ["USDT", "BNB"][i])
}

fn account(user: usize, a: usize) -> UserAccount {
    UserAccount::new(TENANT, USERS[user], asset_id(a))
}

#[derive(Debug, Clone, Copy)]
enum SettleAmount {
    Full,
    Percent(u8),
    Over,
}

#[derive(Debug, Clone)]
enum Op {
    Deposit {
        user: usize,
        asset: usize,
        amount: u128,
    },
    /// Reverses one of the credited deposits not yet reversed (a no-op when there is none).
    Reverse {
        deposit: usize,
    },
    Transfer {
        from: usize,
        to: usize,
        asset: usize,
        amount: u128,
    },
    Adjust {
        user: usize,
        asset: usize,
        credit: bool,
        amount: u128,
    },
    Reserve {
        user: usize,
        asset: usize,
        amount: u128,
    },
    Settle {
        hold: usize,
        amount: SettleAmount,
        fee: u128,
    },
    Release {
        hold: usize,
    },
}

fn amount() -> impl Strategy<Value = u128> {
    prop_oneof![8 => 1u128..300, 1 => Just(0u128)]
}

fn op() -> impl Strategy<Value = Op> {
    let user = 0..USERS.len();
    let a = 0usize..2;
    let settle_amount = prop_oneof![
        3 => Just(SettleAmount::Full),
        3 => (0u8..=100).prop_map(SettleAmount::Percent),
        1 => Just(SettleAmount::Over),
    ];
    prop_oneof![
        3 => (user.clone(), a.clone(), amount())
            .prop_map(|(user, asset, amount)| Op::Deposit { user, asset, amount }),
        1 => any::<usize>().prop_map(|deposit| Op::Reverse { deposit }),
        3 => (user.clone(), user.clone(), a.clone(), amount())
            .prop_map(|(from, to, asset, amount)| Op::Transfer { from, to, asset, amount }),
        2 => (user.clone(), a.clone(), any::<bool>(), amount())
            .prop_map(|(user, asset, credit, amount)| Op::Adjust { user, asset, credit, amount }),
        3 => (user, a, amount()).prop_map(|(user, asset, amount)| Op::Reserve { user, asset, amount }),
        3 => (any::<usize>(), settle_amount, 0u128..5)
            .prop_map(|(hold, amount, fee)| Op::Settle { hold, amount, fee }),
        2 => any::<usize>().prop_map(|hold| Op::Release { hold }),
    ]
}

#[derive(Debug, Clone)]
struct ModelDeposit {
    id: Uuid,
    user: usize,
    asset: usize,
    amount: u128,
}

#[derive(Debug, Clone)]
struct ModelHold {
    id: Uuid,
    user: usize,
    asset: usize,
    amount: u128,
    pending: bool,
}

/// What the model says must happen.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Ok,
    Refused(ErrorCode),
    HoldNotFound,
    HoldNotPending,
}

#[derive(Debug, Default)]
struct Model {
    /// (available, reserved) per (user, asset).
    balances: HashMap<(usize, usize), (u128, u128)>,
    holds: Vec<ModelHold>,
    /// Credited and not reversed.
    deposits: Vec<ModelDeposit>,
}

impl Model {
    fn available(&self, user: usize, asset: usize) -> u128 {
        self.balances.get(&(user, asset)).map_or(0, |b| b.0)
    }

    fn add(&mut self, user: usize, asset: usize, available: i128, reserved: i128) {
        let b = self.balances.entry((user, asset)).or_default();
        b.0 =
            b.0.checked_add_signed(available)
                .expect("model available stays >= 0");
        b.1 =
            b.1.checked_add_signed(reserved)
                .expect("model reserved stays >= 0");
    }
}

fn signed(n: u128) -> i128 {
    i128::try_from(n).unwrap()
}

fn spend(model: &Model, user: usize, asset: usize, amount: u128) -> Expect {
    if amount == 0 {
        Expect::Refused(ErrorCode::AmountTooSmall)
    } else if model.available(user, asset) < amount {
        Expect::Refused(ErrorCode::InsufficientBalance)
    } else {
        Expect::Ok
    }
}

fn outcome<T>(result: &Result<T, LedgerError>) -> Expect {
    match result {
        Ok(_) => Expect::Ok,
        Err(LedgerError::Refused(r)) => Expect::Refused(r.code),
        Err(LedgerError::HoldNotFound(_)) => Expect::HoldNotFound,
        Err(LedgerError::HoldNotPending { .. }) => Expect::HoldNotPending,
        Err(other) => panic!("unexpected ledger error {other:?}"),
    }
}

/// How a step that succeeded changes the model.
type ApplyToModel = Box<dyn FnOnce(&mut Model)>;

struct Run {
    ledger: MemoryLedger,
    model: Model,
    next_id: u128,
}

impl Run {
    fn id(&mut self) -> Uuid {
        self.next_id += 1;
        Uuid::from_u128(self.next_id)
    }

    fn meta(&mut self, reference_type: ReferenceType) -> TxMeta {
        let id = self.id();
        let reference_id = self.id();
        let created_at = Timestamp::from_unix_millis(i64::try_from(self.next_id).unwrap());
        TxMeta {
            id,
            reference_type,
            reference_id,
            created_at,
        }
    }

    fn pick_hold(&mut self, pick: usize) -> (Uuid, Option<usize>) {
        if self.model.holds.is_empty() {
            (self.id(), None)
        } else {
            let i = pick % self.model.holds.len();
            (self.model.holds[i].id, Some(i))
        }
    }

    /// Runs one op on the ledger, checks the outcome against the model and applies it.
    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let before = self.ledger.clone();
        let units = Amount::from_units;
        let (expect, result, apply): (Expect, Expect, ApplyToModel) = match *op {
            Op::Deposit {
                user,
                asset,
                amount,
            } => {
                let expect = if amount == 0 {
                    Expect::Refused(ErrorCode::AmountTooSmall)
                } else {
                    Expect::Ok
                };
                let meta = self.meta(ReferenceType::Deposit);
                let r = credit_deposit(
                    &mut self.ledger,
                    &meta,
                    &account(user, asset),
                    units(amount),
                );
                let id = meta.reference_id;
                let apply = move |m: &mut Model| {
                    m.add(user, asset, signed(amount), 0);
                    m.deposits.push(ModelDeposit {
                        id,
                        user,
                        asset,
                        amount,
                    });
                };
                (expect, outcome(&r), Box::new(apply))
            }
            Op::Reverse { deposit } => {
                if self.model.deposits.is_empty() {
                    return Ok(());
                }
                let i = deposit % self.model.deposits.len();
                let ModelDeposit {
                    id,
                    user,
                    asset,
                    amount,
                } = self.model.deposits[i].clone();
                // A reversal always posts: what is available, the rest as a receivable.
                let expect = if amount == 0 {
                    Expect::Refused(ErrorCode::AmountTooSmall)
                } else {
                    Expect::Ok
                };
                let taken = self.model.available(user, asset).min(amount);
                let meta = TxMeta {
                    reference_id: id,
                    ..self.meta(ReferenceType::Deposit)
                };
                let r = reverse_deposit(
                    &mut self.ledger,
                    &meta,
                    &account(user, asset),
                    units(amount),
                );
                if let Ok((_, shortfall)) = &r {
                    prop_assert_eq!(*shortfall, units(amount - taken));
                }
                let apply = move |m: &mut Model| {
                    m.add(user, asset, -signed(taken), 0);
                    m.deposits.swap_remove(i);
                };
                (expect, outcome(&r), Box::new(apply))
            }
            Op::Transfer {
                from,
                to,
                asset,
                amount,
            } => {
                let expect = match spend(&self.model, from, asset, amount) {
                    Expect::Ok if from == to => Expect::Refused(ErrorCode::ValidationFailed),
                    Expect::Refused(ErrorCode::InsufficientBalance) if from == to => {
                        Expect::Refused(ErrorCode::ValidationFailed)
                    }
                    other => other,
                };
                let meta = self.meta(ReferenceType::InternalTransfer);
                let sender = account(from, asset);
                let r = transfer(&mut self.ledger, &meta, &sender, USERS[to], units(amount));
                let apply = move |m: &mut Model| {
                    m.add(from, asset, -signed(amount), 0);
                    m.add(to, asset, signed(amount), 0);
                };
                (expect, outcome(&r), Box::new(apply))
            }
            Op::Adjust {
                user,
                asset,
                credit,
                amount,
            } => {
                let (expect, direction, delta) = if credit {
                    let e = if amount == 0 {
                        Expect::Refused(ErrorCode::AmountTooSmall)
                    } else {
                        Expect::Ok
                    };
                    (e, Direction::Credit, signed(amount))
                } else {
                    (
                        spend(&self.model, user, asset, amount),
                        Direction::Debit,
                        -signed(amount),
                    )
                };
                let meta = self.meta(ReferenceType::Adjustment);
                let r = adjust(
                    &mut self.ledger,
                    &meta,
                    &account(user, asset),
                    direction,
                    units(amount),
                );
                (
                    expect,
                    outcome(&r),
                    Box::new(move |m| m.add(user, asset, delta, 0)),
                )
            }
            Op::Reserve {
                user,
                asset,
                amount,
            } => {
                let expect = spend(&self.model, user, asset, amount);
                let meta = self.meta(ReferenceType::Withdrawal);
                let hold = NewHold {
                    id: self.id(),
                    purpose: HoldPurpose::Withdrawal,
                    user: account(user, asset),
                    counter: AccountKey::system(SystemAccount::Treasury, asset_id(asset)),
                    amount: units(amount),
                };
                let r = reserve(&mut self.ledger, &meta, &hold);
                let id = hold.id;
                let apply = move |m: &mut Model| {
                    m.add(user, asset, -signed(amount), signed(amount));
                    m.holds.push(ModelHold {
                        id,
                        user,
                        asset,
                        amount,
                        pending: true,
                    });
                };
                (expect, outcome(&r), Box::new(apply))
            }
            Op::Settle { hold, amount, fee } => {
                let (id, index) = self.pick_hold(hold);
                let held = index.map(|i| self.model.holds[i].clone());
                let settled = match (amount, &held) {
                    (_, None) => 1,
                    (SettleAmount::Full, Some(h)) => h.amount,
                    (SettleAmount::Percent(p), Some(h)) => h.amount * u128::from(p) / 100,
                    (SettleAmount::Over, Some(h)) => h.amount + 1,
                };
                let expect = match &held {
                    None => Expect::HoldNotFound,
                    Some(h) if !h.pending => Expect::HoldNotPending,
                    Some(_) if settled == 0 => Expect::Refused(ErrorCode::AmountTooSmall),
                    Some(h) if settled > h.amount => Expect::Refused(ErrorCode::AmountTooLarge),
                    Some(_) => Expect::Ok,
                };
                let a = held.as_ref().map_or(0, |h| h.asset);
                let also = if fee == 0 {
                    vec![]
                } else {
                    vec![
                        Leg::debit(
                            AccountKey::system(SystemAccount::Treasury, asset_id(a)),
                            units(fee),
                        ),
                        Leg::credit(
                            AccountKey::system(SystemAccount::Revenue, asset_id(a)),
                            units(fee),
                        ),
                    ]
                };
                let tx_id = self.id();
                let request = Settle {
                    hold_id: id,
                    tx_id,
                    amount: units(settled),
                    also,
                    at: Timestamp::default(),
                };
                let r = settle(&mut self.ledger, &request);
                let replay = Settle {
                    tx_id: self.id(),
                    ..request
                };
                let apply = move |m: &mut Model| {
                    let h = held.expect("a settled hold exists");
                    m.add(
                        h.user,
                        h.asset,
                        signed(h.amount - settled),
                        -signed(h.amount),
                    );
                    m.holds[index.unwrap()].pending = false;
                };
                if r.is_ok() {
                    self.assert_replay_changes_nothing(|l| settle(l, &replay))?;
                }
                (expect, outcome(&r), Box::new(apply))
            }
            Op::Release { hold } => {
                let (id, index) = self.pick_hold(hold);
                let held = index.map(|i| self.model.holds[i].clone());
                let expect = match &held {
                    None => Expect::HoldNotFound,
                    Some(h) if !h.pending => Expect::HoldNotPending,
                    Some(_) => Expect::Ok,
                };
                let tx_id = self.id();
                let r = release(&mut self.ledger, id, tx_id, Timestamp::default());
                let replay_id = self.id();
                if r.is_ok() {
                    self.assert_replay_changes_nothing(|l| {
                        release(l, id, replay_id, Timestamp::default())
                    })?;
                }
                let apply = move |m: &mut Model| {
                    let h = held.expect("a released hold exists");
                    m.add(h.user, h.asset, signed(h.amount), -signed(h.amount));
                    m.holds[index.unwrap()].pending = false;
                };
                (expect, outcome(&r), Box::new(apply))
            }
        };
        prop_assert_eq!(&result, &expect, "op {:?}", op);
        if result == Expect::Ok {
            apply(&mut self.model);
        } else {
            prop_assert_eq!(&self.ledger, &before, "a refused op changed the ledger");
        }
        self.check_invariants()
    }

    fn assert_replay_changes_nothing(
        &mut self,
        replay: impl FnOnce(&mut MemoryLedger) -> Result<HoldOutcome, LedgerError>,
    ) -> Result<(), TestCaseError> {
        let before = self.ledger.clone();
        let r = replay(&mut self.ledger);
        prop_assert!(
            matches!(r, Err(LedgerError::HoldNotPending { .. })),
            "replay gave {:?}",
            r
        );
        prop_assert_eq!(&self.ledger, &before);
        Ok(())
    }

    fn check_invariants(&mut self) -> Result<(), TestCaseError> {
        for user in 0..USERS.len() {
            for a in 0..2 {
                let b = user_balance(&mut self.ledger, &account(user, a))
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let model = self
                    .model
                    .balances
                    .get(&(user, a))
                    .copied()
                    .unwrap_or_default();
                prop_assert_eq!((b.available.units(), b.reserved.units()), model);
            }
        }
        let mut sums: HashMap<&AssetId, [u128; 4]> = HashMap::new();
        for (key, b) in self.ledger.accounts() {
            let s = sums.entry(key.asset()).or_default();
            s[0] += b.debits_posted.units();
            s[1] += b.credits_posted.units();
            s[2] += b.debits_pending.units();
            s[3] += b.credits_pending.units();
            if key.as_user().is_some() {
                prop_assert!(b.available().is_some(), "{} is overdrawn", key);
            }
        }
        for (asset, [dp, cp, dq, cq]) in sums {
            prop_assert_eq!(dp, cp, "posted conservation of {:?}", asset);
            prop_assert_eq!(dq, cq, "pending conservation of {:?}", asset);
        }
        Ok(())
    }

    fn check_history(&mut self) -> Result<(), TestCaseError> {
        for (user, name) in USERS.iter().enumerate() {
            let page = history(
                &mut self.ledger,
                &custody_core::TenantId::parse(TENANT).unwrap(),
                name,
                Network::Bsc,
                100,
            )
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
            for a in 0..2 {
                let code = &asset_id(a).code;
                if let Some(newest) = page.data.iter().find(|h| &h.asset == code) {
                    prop_assert_eq!(
                        newest.balance_after_units.units(),
                        self.model.available(user, a)
                    );
                }
            }
        }
        Ok(())
    }
}

proptest! {
    // No regression file: this crate's tree is shared; a failure prints its minimal input.
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_operations_match_the_model(ops in prop::collection::vec(op(), 1..80)) {
        let mut run = Run { ledger: MemoryLedger::new(), model: Model::default(), next_id: 0 };
        for op in &ops {
            run.step(op)?;
        }
        run.check_history()?;
        let report = reconcile(&mut run.ledger).unwrap();
        prop_assert!(report.balanced, "{:#?}", report.discrepancies);
    }
}
