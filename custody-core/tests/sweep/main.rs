//! The sweep flow on the in-memory store: a native sweep, a token sweep after its funding is
//! final, one open sweep per address, a failed funding, and the house's books after each.

mod delegation;
mod drain;

use std::sync::Arc;

use uuid::Uuid;

use custody_core::asset::{Asset, AssetCatalog, AssetId};
use custody_core::ledger::{self, AccountKey, ReferenceType, SystemAccount, TxMeta, UserAccount};
use custody_core::network::Network;
use custody_core::outgoing::{Attempt, Bid, Included, OutStatus, OutgoingTx, Purpose};
use custody_core::ports::sender::Payment;
use custody_core::ports::signer::HdPath;
use custody_core::ports::store::{read, write, Store};
use custody_core::sweep::*;
use custody_core::time::Timestamp;
use custody_core::wallet::hot_wallet_path;
use custody_core::withdrawal::HotWallet;
use custody_core::Amount;
use custody_testkit::{block_on, CountingEntropy, MemoryStore};

const T0: i64 = 1_800_000_000_000;
pub(crate) const HOT: &str = "0x00000000000000000000000000000000000000aA";
pub(crate) const ADDR: &str = "0x00000000000000000000000000000000000000bB";

pub(crate) fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0 + ms)
}

pub(crate) fn u(n: u128) -> Amount {
    Amount::from_units(n)
}

pub(crate) fn asset(code: &str) -> Asset {
    AssetCatalog::mainnet()
        .get(Network::Bsc, code)
        .unwrap()
        .clone()
}

pub(crate) fn bnb() -> AssetId {
    asset("BNB").id()
}

fn hot() -> HotWallet {
    HotWallet {
        address: HOT.into(),
        path: hot_wallet_path(Network::Bsc),
    }
}

fn source() -> SweepSource {
    SweepSource {
        address: ADDR.into(),
        path: HdPath {
            network: Network::Bsc,
            account: 0,
            index: 3,
        },
    }
}

pub(crate) struct Fx {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) entropy: Arc<CountingEntropy>,
}

impl Fx {
    /// Alice's deposits of `code` were credited: `units` sit on her deposit address.
    pub(crate) fn new(credits: &[(&str, u128)]) -> Self {
        let fx = Fx {
            store: Arc::new(MemoryStore::new()),
            entropy: Arc::new(CountingEntropy::new(1)),
        };
        for (code, units) in credits {
            let account = UserAccount::new(
                "acme".to_owned(),
                "alice".to_owned(),
                AssetId::new(Network::Bsc, (*code).to_owned()),
            );
            let units = *units;
            block_on(write(fx.store.as_ref(), move |tx| {
                let meta = TxMeta {
                    id: Uuid::new_v4(),
                    reference_type: ReferenceType::Deposit,
                    reference_id: Uuid::new_v4(),
                    created_at: at(0),
                };
                Ok(ledger::credit_deposit(tx, &meta, &account, u(units))?)
            }))
            .unwrap();
        }
        fx
    }

    pub(crate) fn order(&self, code: &str, plan: Plan) -> SweepOrder {
        SweepOrder {
            asset: asset(code),
            source: source(),
            hot: hot(),
            plan,
            native: bnb(),
            planned_fee_native: u(21_000),
        }
    }

    pub(crate) fn create(&self, order: SweepOrder, n: u128) -> Option<Sweep> {
        let ids = SweepIds {
            sweep: Uuid::from_u128(n),
            outgoing: Uuid::from_u128(n + 1),
            funding: Uuid::from_u128(n + 2),
            delegation: Uuid::from_u128(n + 3),
            delegation_outgoing: Uuid::from_u128(n + 4),
        };
        block_on(write(self.store.as_ref(), move |tx| {
            create_sweep(tx, ids, &order, at(1))
        }))
        .unwrap()
    }

    pub(crate) fn outgoing_for(&self, purpose: Purpose, id: Uuid) -> OutgoingTx {
        block_on(read(self.store.as_ref(), move |tx| {
            Ok(tx.outgoing_for(purpose, id)?)
        }))
        .unwrap()
        .expect("an outgoing transaction")
    }

    /// Records `out` after `step`, running the flow in the same job as the broadcaster does.
    pub(crate) fn moved(&self, mut out: OutgoingTx, step: impl Fn(&mut OutgoingTx)) {
        step(&mut out);
        let entropy = Arc::clone(&self.entropy);
        block_on(write(self.store.as_ref(), move |tx| {
            tx.update_outgoing(&out)?;
            on_outgoing(tx, entropy.as_ref(), &out, &bnb(), at(50))
        }))
        .unwrap();
    }

    pub(crate) fn sweep(&self, id: Uuid) -> Sweep {
        block_on(read(self.store.as_ref(), move |tx| Ok(tx.sweep_by_id(id)?)))
            .unwrap()
            .unwrap()
    }

    pub(crate) fn funding(&self, id: Uuid) -> Funding {
        block_on(read(self.store.as_ref(), move |tx| {
            Ok(tx.funding_by_id(id)?)
        }))
        .unwrap()
        .unwrap()
    }

    /// Net posted balance of a system account, debits positive.
    pub(crate) fn system(&self, account: SystemAccount, code: &str) -> i128 {
        let key = AccountKey::system(account, AssetId::new(Network::Bsc, code.to_owned()));
        let b = block_on(read(self.store.as_ref(), move |tx| {
            Ok(tx.ledger_account(&key)?)
        }))
        .unwrap()
        .unwrap_or_default();
        i128::try_from(b.debits_posted.units()).unwrap()
            - i128::try_from(b.credits_posted.units()).unwrap()
    }

    pub(crate) fn reconciles(&self) {
        let report = block_on(read(self.store.as_ref(), |tx| Ok(ledger::reconcile(tx)?))).unwrap();
        assert!(report.balanced, "{:?}", report.discrepancies);
    }
}

/// A hash of its own per transaction (the store refuses one attempt shared by two).
pub(crate) fn hash_of(out: &OutgoingTx) -> String {
    format!("{:0>64}", out.id.simple())
}

pub(crate) fn sent(out: &mut OutgoingTx) {
    out.add_attempt(
        Attempt {
            hash: hash_of(out),
            raw: vec![1],
            bid: Bid::Gas {
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

pub(crate) fn mined(fee: u128, succeeded: bool) -> impl Fn(&mut OutgoingTx) {
    move |out: &mut OutgoingTx| {
        out.included = Some(Included {
            hash: hash_of(out),
            block_number: 100,
            block_hash: "cd".repeat(32),
            succeeded,
            fee_native: u(fee),
            moves: Vec::new(),
            resources: None,
            block_time_ms: None,
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

#[test]
fn a_native_sweep_moves_clearing_to_treasury_and_books_its_fee() {
    let fx = Fx::new(&[("BNB", 1_000_000)]);
    let s = fx
        .create(fx.order("BNB", Plan::Sweep { amount: u(979_000) }), 10)
        .expect("a sweep");
    assert_eq!(s.status, SweepStatus::Planned);
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    assert_eq!(out.from, ADDR);
    assert_eq!(out.nonce, None, "allocated when it is signed");
    assert_eq!(
        out.payment,
        Payment::Native {
            to: HOT.into(),
            amount: u(979_000)
        }
    );
    fx.moved(out, sent);
    assert_eq!(fx.sweep(s.id).status, SweepStatus::Broadcasted);
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, mined(21_000, true));
    let done = fx.sweep(s.id);
    assert_eq!(done.status, SweepStatus::Confirmed);
    assert_eq!(done.fee_native, Some(u(21_000)));
    assert_eq!(
        done.history
            .iter()
            .map(|h| h.status.as_str())
            .collect::<Vec<_>>(),
        ["planned", "broadcasted", "confirmed"]
    );
    // The address is empty on the books: credited 1,000,000, swept 979,000, fee 21,000.
    assert_eq!(fx.system(SystemAccount::DepositClearing, "BNB"), 0);
    assert_eq!(fx.system(SystemAccount::Treasury, "BNB"), 979_000);
    assert_eq!(fx.system(SystemAccount::NetworkFees, "BNB"), 21_000);
    fx.reconciles();
    // Moving it again does nothing more.
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    let entropy = Arc::clone(&fx.entropy);
    block_on(write(fx.store.as_ref(), move |tx| {
        on_outgoing(tx, entropy.as_ref(), &out, &bnb(), at(60))
    }))
    .unwrap();
    assert_eq!(fx.system(SystemAccount::Treasury, "BNB"), 979_000);
}

#[test]
fn a_token_sweep_waits_for_its_funding_to_be_final() {
    let fx = Fx::new(&[("USDT", 5_000_000)]);
    let s = fx
        .create(
            fx.order(
                "USDT",
                Plan::Fund {
                    amount: u(5_000_000),
                    funding: u(60_000),
                },
            ),
            20,
        )
        .expect("a sweep");
    assert_eq!(s.status, SweepStatus::Funding);
    let funding_id = s.funding_id.expect("a funding");
    assert!(s.outgoing_id.is_none(), "no transfer before the funding");
    let f = fx.funding(funding_id);
    assert_eq!(
        (f.status, f.amount, f.address.as_str()),
        (FundingStatus::Planned, u(60_000), ADDR)
    );
    let fout = fx.outgoing_for(Purpose::Funding, funding_id);
    assert_eq!(fout.from, HOT, "the hot wallet pays the funding");
    assert_eq!(
        fout.payment,
        Payment::Native {
            to: ADDR.into(),
            amount: u(60_000)
        }
    );
    let usdt = asset("USDT");
    let start = |fx: &Fx, amount: u128| {
        let usdt = usdt.clone();
        block_on(write(fx.store.as_ref(), move |tx| {
            start_funded_sweep(
                tx,
                Uuid::from_u128(20),
                Uuid::from_u128(99),
                &usdt,
                u(amount),
                at(40),
            )
        }))
        .unwrap()
    };
    fx.moved(fout, sent);
    assert_eq!(fx.funding(funding_id).status, FundingStatus::Broadcasted);
    // Included is not final: the transfer still waits.
    let fout = fx.outgoing_for(Purpose::Funding, funding_id);
    fx.moved(fout, |o| {
        o.included = Some(Included {
            hash: hash_of(o),
            block_number: 100,
            block_hash: "cd".repeat(32),
            succeeded: true,
            fee_native: u(21_000),
            moves: Vec::new(),
            resources: None,
            block_time_ms: None,
        });
        o.transition(OutStatus::Included, "", at(20)).unwrap();
    });
    assert!(
        start(&fx, 5_000_000).is_none(),
        "not before the funding is final"
    );
    let fout = fx.outgoing_for(Purpose::Funding, funding_id);
    fx.moved(fout, |o| {
        o.transition(OutStatus::Final, "final", at(30)).unwrap()
    });
    assert_eq!(fx.funding(funding_id).status, FundingStatus::Confirmed);
    // Tokens that arrived meanwhile go too.
    let started = start(&fx, 5_000_100).expect("the transfer");
    assert_eq!(started.amount, u(5_000_100));
    assert!(start(&fx, 5_000_100).is_none(), "once");
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    assert_eq!(out.from, ADDR);
    assert_eq!(
        out.payment,
        Payment::Token {
            contract: usdt.contract.clone().unwrap(),
            to: HOT.into(),
            amount: u(5_000_100)
        }
    );
    fx.moved(out, sent);
    let out = fx.outgoing_for(Purpose::Sweep, s.id);
    fx.moved(out, mined(45_000, true));
    assert_eq!(fx.sweep(s.id).status, SweepStatus::Confirmed);
    // Tokens: clearing → treasury. BNB: the funding left the treasury (and paid its fee);
    // the sweep's gas was paid from what the funding brought, 15,000 stay on the address.
    assert_eq!(fx.system(SystemAccount::Treasury, "USDT"), 5_000_100);
    assert_eq!(fx.system(SystemAccount::Treasury, "BNB"), -60_000 - 21_000);
    assert_eq!(
        fx.system(SystemAccount::DepositClearing, "BNB"),
        60_000 - 45_000
    );
    assert_eq!(
        fx.system(SystemAccount::NetworkFees, "BNB"),
        21_000 + 45_000
    );
    fx.reconciles();
    let flows = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.sweep_flows(Network::Bsc, "BNB")?)
    }))
    .unwrap();
    let of = |a: &str| flows.iter().find(|f| f.asset == a).unwrap().clone();
    assert_eq!((of("USDT").arrived, of("USDT").left), (u(0), u(5_000_100)));
    assert_eq!((of("BNB").arrived, of("BNB").left), (u(60_000), u(45_000)));
}

#[test]
fn one_open_sweep_per_address() {
    let fx = Fx::new(&[("BNB", 1_000_000), ("USDT", 100)]);
    assert!(fx
        .create(fx.order("BNB", Plan::Sweep { amount: u(900_000) }), 30)
        .is_some());
    assert!(fx
        .create(fx.order("USDT", Plan::Sweep { amount: u(100) }), 40)
        .is_none());
    assert!(fx
        .create(fx.order("BNB", Plan::Skip("no".into())), 50)
        .is_none());
    // The store refuses a second open one even when asked directly.
    let mut second = fx.sweep(Uuid::from_u128(30));
    second.id = Uuid::from_u128(60);
    let refused = block_on(write(fx.store.as_ref(), move |tx| {
        Ok(tx.insert_sweep(&second)?)
    }));
    assert!(refused.is_err());
    // Once it ends, the address may be swept again.
    let out = fx.outgoing_for(Purpose::Sweep, Uuid::from_u128(30));
    fx.moved(out, sent);
    let out = fx.outgoing_for(Purpose::Sweep, Uuid::from_u128(30));
    fx.moved(out, mined(21_000, false));
    let failed = fx.sweep(Uuid::from_u128(30));
    assert_eq!(failed.status, SweepStatus::Failed);
    assert!(failed.failure_reason.is_some());
    // A failed sweep's gas is still the house's expense, paid from the address.
    assert_eq!(fx.system(SystemAccount::NetworkFees, "BNB"), 21_000);
    let alerts = block_on(read(fx.store.as_ref(), |tx| {
        Ok(tx.list_alerts(custody_core::page::Page::first(10))?)
    }))
    .unwrap()
    .expect("a first page");
    assert_eq!(
        alerts
            .iter()
            .filter(|a| a.kind == "sweep_failed" && a.reference_id == Some(Uuid::from_u128(30)))
            .count(),
        1,
        "an operator is told why the funds stay"
    );
    fx.reconciles();
    assert!(fx
        .create(fx.order("USDT", Plan::Sweep { amount: u(100) }), 70)
        .is_some());
}

#[test]
fn a_failed_funding_fails_its_sweep_and_frees_the_address() {
    let fx = Fx::new(&[("USDT", 5_000)]);
    let s = fx
        .create(
            fx.order(
                "USDT",
                Plan::Fund {
                    amount: u(5_000),
                    funding: u(100),
                },
            ),
            80,
        )
        .unwrap();
    let fout = fx.outgoing_for(Purpose::Funding, s.funding_id.unwrap());
    fx.moved(fout, |o| {
        o.failure_reason = Some("refused".into());
        o.transition(OutStatus::Failed, "refused", at(20)).unwrap();
    });
    assert_eq!(
        fx.funding(s.funding_id.unwrap()).status,
        FundingStatus::Failed
    );
    let failed = fx.sweep(s.id);
    assert_eq!(failed.status, SweepStatus::Failed);
    assert!(failed.failure_reason.unwrap().contains("funding"));
    assert_eq!(
        fx.system(SystemAccount::Treasury, "BNB"),
        0,
        "nothing moved"
    );
    assert!(fx
        .create(fx.order("USDT", Plan::Sweep { amount: u(5_000) }), 90)
        .is_some());
}
