//! The broadcaster against a real SQLite store and a scripted chain that can lose answers,
//! drop transactions from its pool, and mine at most one transaction per nonce (so paying
//! twice would show as two mined payments).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use custody_core::admin::{restricted, set_control};
use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::outgoing::{OutStatus, Wait, DOUBLE_PAYMENT_NOTE};
use custody_core::ports::sender::{
    FeeEstimate, Inclusion, Payment, SignedTx, TxLookup, UnsignedTx,
};
use custody_core::ports::signer::RecoverableSignature;
use custody_core::wallet::hot_wallet_path;
use custody_store_sqlite::{SqliteStore, StoreOptions};
use custody_testkit::ManualClock;
use uuid::Uuid;

use super::*;
use crate::system::OsEntropy;

const T0: i64 = 1_800_000_000_000;
/// The fixture's hot wallet.
const HOT: &str = "0x00000000000000000000000000000000000000aa";

/// A chain that keeps a pool and mined blocks. A payment is identified by its nonce: two
/// transactions of one nonce can never both be mined, as on a real EVM chain.
#[derive(Default)]
struct ScriptedChain {
    /// hash -> (nonce, gas price) of pooled transactions.
    pool: Mutex<HashMap<String, (u64, u128)>>,
    /// hash -> block number.
    mined: Mutex<BTreeMap<String, u64>>,
    head: Mutex<u64>,
    /// Broadcasts whose answer is lost (the bytes still reach the pool).
    lose_answers: AtomicUsize,
    /// Broadcasts that reach the pool but are answered with a refusal (a failover to an
    /// endpoint that refused after another took the bytes).
    refuse_after_pooling: AtomicUsize,
    broadcasts: Mutex<Vec<String>>,
    /// The hot wallet's native balance (wei).
    balance: Mutex<u128>,
    /// The hot wallet's token balance (any token).
    token_balance: Mutex<u128>,
    /// What `eth_gasPrice` says; the node refuses anything below `min_price`.
    node_price: Mutex<u128>,
    min_price: Mutex<u128>,
    /// A permanent refusal to price anything (a frozen recipient, a paused token).
    price_refusal: Mutex<Option<String>>,
    /// A control an operator turns on while the next payment is built and signed: after the
    /// broadcaster's check, before the write that stores the attempt.
    switch_on_build: Mutex<Option<(Arc<dyn Store>, &'static str)>>,
    /// hash -> the payment its bytes make, for the receipt's logs.
    payments: Mutex<HashMap<String, Payment>>,
    /// Receipts of token payments show no `Transfer` (a token whose `transfer` returns false
    /// without reverting, or a node that strips logs).
    hide_transfers: std::sync::atomic::AtomicBool,
    /// What the chain says the hot wallet's confirmed nonce is (`None`: 0).
    confirmed: Mutex<Option<u64>>,
    /// Another instance's payment of the hot wallet, recorded signed (with the store) while
    /// the next payment is built: after this instance's funds check, before its write.
    signed_elsewhere_on_build: Mutex<Option<(Arc<dyn Store>, OutgoingTx)>>,
    /// Lookups by hash answer "unknown" (a lagging index); blocks and nonces still tell.
    lookups_blind: std::sync::atomic::AtomicBool,
    /// nonce -> block: a transaction that is none of ours took the nonce (the key used
    /// elsewhere); a node answers "nonce too low" to ours.
    foreign: Mutex<BTreeMap<u64, u64>>,
}

impl ScriptedChain {
    /// Mines the best-paying pooled transaction of each nonce not mined yet.
    fn mine(&self) {
        let mut head = self.head.lock().unwrap();
        *head += 1;
        let pool = self.pool.lock().unwrap();
        let mut mined = self.mined.lock().unwrap();
        let mut best: BTreeMap<u64, (String, u128)> = BTreeMap::new();
        for (hash, &(nonce, price)) in pool.iter() {
            if best.get(&nonce).is_none_or(|(_, p)| price > *p) {
                best.insert(nonce, (hash.clone(), price));
            }
        }
        let foreign = self.foreign.lock().unwrap();
        for (nonce, (hash, _)) in best {
            let taken = foreign.contains_key(&nonce)
                || mined
                    .keys()
                    .any(|h| pool.get(h).is_some_and(|(n, _)| *n == nonce));
            if !taken {
                mined.insert(hash, *head);
            }
        }
    }

    /// A transaction that is none of ours takes `nonce` in a new block.
    fn take_nonce_elsewhere(&self, nonce: u64) {
        let mut head = self.head.lock().unwrap();
        *head += 1;
        self.foreign.lock().unwrap().insert(nonce, *head);
    }

    fn empty_blocks(&self, n: u64) {
        *self.head.lock().unwrap() += n;
    }

    /// Forgets pooled transactions that were not mined (a node that dropped them).
    fn drop_pool(&self) {
        let mined = self.mined.lock().unwrap();
        self.pool
            .lock()
            .unwrap()
            .retain(|h, _| mined.contains_key(h));
    }

    fn mined_payments(&self) -> usize {
        self.mined.lock().unwrap().len()
    }
}

fn decode(raw: &[u8]) -> (u64, u128) {
    let v: serde_json::Value = serde_json::from_slice(raw).unwrap();
    (
        v["nonce"].as_u64().unwrap(),
        v["gas_price"].as_str().unwrap().parse().unwrap(),
    )
}

#[async_trait]
impl ChainSender for ScriptedChain {
    fn network(&self) -> Network {
        Network::Bsc
    }

    async fn price(&self, _: &str, payment: &Payment) -> Result<FeeEstimate, PortError> {
        if let Some(why) = self.price_refusal.lock().unwrap().clone() {
            return Err(PortError::permanent("scripted", why));
        }
        // As a node's gas estimate: a token transfer the wallet cannot cover reverts.
        if let Some((_, amount)) = payment.spends().token {
            if amount.units() > *self.token_balance.lock().unwrap() {
                return Err(PortError::permanent("scripted", "execution reverted"));
            }
        }
        let price = *self.node_price.lock().unwrap();
        Ok(FeeEstimate {
            expected_native: Amount::from_units(21_000 * price),
            max_native: Amount::from_units(21_000 * price),
            bid: FeeBid::Gas {
                gas_limit: 21_000,
                gas_price_wei: price,
            },
            plan: None,
        })
    }

    async fn confirmed_nonce(&self, _: &str) -> Result<Option<u64>, PortError> {
        Ok(Some(self.confirmed.lock().unwrap().unwrap_or(0)))
    }

    async fn final_transaction_at_nonce(
        &self,
        _: &str,
        nonce: u64,
        confirmations: u32,
    ) -> Result<Option<String>, PortError> {
        let head = *self.head.lock().unwrap();
        let deep = |block: u64| head + 1 >= block + u64::from(confirmations);
        if let Some(&block) = self.foreign.lock().unwrap().get(&nonce) {
            return Ok(deep(block).then(|| format!("{:064x}", 0xf0 + nonce)));
        }
        let pool = self.pool.lock().unwrap();
        Ok(self
            .mined
            .lock()
            .unwrap()
            .iter()
            .find(|(h, b)| pool.get(*h).is_some_and(|(n, _)| *n == nonce) && deep(**b))
            .map(|(h, _)| h.clone()))
    }

    async fn build(&self, r: &BuildRequest) -> Result<UnsignedTx, PortError> {
        let elsewhere = self.signed_elsewhere_on_build.lock().unwrap().take();
        if let Some((store, other)) = elsewhere {
            write(store.as_ref(), move |tx| Ok(tx.update_outgoing(&other)?))
                .await
                .unwrap();
        }
        let switch = self.switch_on_build.lock().unwrap().take();
        if let Some((store, key)) = switch {
            write(store.as_ref(), move |tx| {
                set_control(
                    tx,
                    Uuid::new_v4(),
                    "ops",
                    key,
                    true,
                    "test",
                    Timestamp::from_unix_millis(T0),
                )
            })
            .await
            .unwrap();
        }
        let FeeBid::Gas { gas_price_wei, .. } = r.bid else {
            panic!("an EVM bid");
        };
        let payload = serde_json::to_vec(&serde_json::json!({
            "nonce": r.nonce.unwrap(),
            "gas_price": gas_price_wei.to_string(),
            "payment": r.payment,
        }))
        .unwrap();
        let digest: [u8; 32] = {
            use sha2::Digest;
            sha2::Sha256::digest(&payload).into()
        };
        Ok(UnsignedTx {
            digest,
            payload,
            expires_at_ms: None,
            reference_block: None,
        })
    }

    fn assemble(
        &self,
        unsigned: &UnsignedTx,
        signature: &RecoverableSignature,
    ) -> Result<SignedTx, PortError> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(&unsigned.payload);
        h.update(signature.to_rsv());
        Ok(SignedTx {
            hash: hex::encode(h.finalize()),
            raw: unsigned.payload.clone(),
        })
    }

    async fn broadcast(&self, signed: &SignedTx) -> BroadcastOutcome {
        self.broadcasts.lock().unwrap().push(signed.hash.clone());
        let (nonce, price) = decode(&signed.raw);
        let mined_ours = {
            let pool = self.pool.lock().unwrap();
            self.mined
                .lock()
                .unwrap()
                .keys()
                .any(|h| *h != signed.hash && pool.get(h).is_some_and(|(n, _)| *n == nonce))
        };
        if self.foreign.lock().unwrap().contains_key(&nonce) || mined_ours {
            return BroadcastOutcome::NonceUsed;
        }
        if price < *self.min_price.lock().unwrap() {
            return BroadcastOutcome::Rejected("transaction underpriced".into());
        }
        self.pool
            .lock()
            .unwrap()
            .insert(signed.hash.clone(), (nonce, price));
        let v: serde_json::Value = serde_json::from_slice(&signed.raw).unwrap();
        self.payments.lock().unwrap().insert(
            signed.hash.clone(),
            serde_json::from_value(v["payment"].clone()).unwrap(),
        );
        if self
            .refuse_after_pooling
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return BroadcastOutcome::Rejected("insufficient funds for gas * price + value".into());
        }
        if self
            .lose_answers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return BroadcastOutcome::Unknown("connection cut after sending".into());
        }
        BroadcastOutcome::Accepted
    }

    async fn lookup(&self, hash: &str) -> Result<TxLookup, PortError> {
        if self.lookups_blind.load(Ordering::SeqCst) {
            return Ok(TxLookup::Unknown);
        }
        if let Some(&block) = self.mined.lock().unwrap().get(hash) {
            // A token transfer logs its `Transfer(hot wallet → to, amount)`.
            let moves = match self.payments.lock().unwrap().get(hash) {
                Some(Payment::Token {
                    contract,
                    to,
                    amount,
                }) if !self.hide_transfers.load(Ordering::SeqCst) => {
                    vec![custody_core::ports::sender::TokenMove {
                        contract: contract.clone(),
                        kind: custody_core::ports::sender::MoveKind::Transfer,
                        from: HOT.into(),
                        to: to.clone(),
                        amount: *amount,
                    }]
                }
                _ => Vec::new(),
            };
            return Ok(TxLookup::Included(Inclusion {
                block_number: block,
                block_hash: format!("{block:064x}"),
                succeeded: true,
                fee_native: Amount::from_units(21_000_000_000_000),
                moves,
                resources: None,
                block_time_ms: None,
                head_number: None,
            }));
        }
        Ok(if self.pool.lock().unwrap().contains_key(hash) {
            TxLookup::Pending
        } else {
            TxLookup::Unknown
        })
    }

    async fn head(&self) -> Result<(u64, i64), PortError> {
        Ok((*self.head.lock().unwrap(), T0))
    }

    async fn block_time(&self, number: u64) -> Result<Option<i64>, PortError> {
        Ok((number <= *self.head.lock().unwrap()).then_some(T0))
    }

    async fn block_listing(
        &self,
        _: u64,
    ) -> Result<Option<custody_core::ports::sender::BlockListing>, PortError> {
        Err(PortError::permanent(
            "scripted",
            "a BSC chain lists no blocks",
        ))
    }

    async fn inclusion_in_block(&self, _: &str, _: u64) -> Result<Option<Inclusion>, PortError> {
        Err(PortError::permanent(
            "scripted",
            "a BSC chain lists no blocks",
        ))
    }

    async fn balances(
        &self,
        _: &str,
        token: Option<&str>,
    ) -> Result<(Amount, Option<Amount>), PortError> {
        Ok((
            Amount::from_units(*self.balance.lock().unwrap()),
            token.map(|_| Amount::from_units(*self.token_balance.lock().unwrap())),
        ))
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    chain: Arc<ScriptedChain>,
    clock: Arc<ManualClock>,
    b: Broadcaster,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(&dir.path().join("custody.db"), StoreOptions::default()).unwrap(),
        );
        let phrase = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about";
        let signer =
            Arc::new(HdSigner::from_seed(&Mnemonic::parse(phrase).unwrap().to_seed()).unwrap());
        let chain = Arc::new(ScriptedChain::default());
        *chain.balance.lock().unwrap() = 10u128.pow(24);
        *chain.node_price.lock().unwrap() = 1_000_000_000;
        let clock = Arc::new(ManualClock::new(Timestamp::from_unix_millis(T0)));
        let b = Broadcaster {
            network: Network::Bsc,
            sender: Arc::clone(&chain) as Arc<dyn ChainSender>,
            signer,
            store,
            clock: Arc::clone(&clock) as Arc<dyn Clock>,
            entropy: Arc::new(OsEntropy),
            policy: EnginePolicy::defaults(Network::Bsc, 3),
            poll_interval: Duration::from_millis(10),
            lease: Duration::from_secs(30),
            batch: 16,
            native: custody_core::AssetId::new(Network::Bsc, "BNB".to_owned()),
            exclusive: Arc::new(custody_core::ports::Alone),
        };
        Fixture {
            _dir: dir,
            chain,
            clock,
            b,
        }
    }

    fn advance(&self, ms: i64) {
        self.clock.advance_millis(ms);
    }

    /// A funded user's BNB withdrawal, executed: its outgoing transaction's id.
    async fn create(&self) -> Uuid {
        self.create_of("BNB").await
    }

    /// A funded user's withdrawal of `code` (BSC), executed: its outgoing transaction's id.
    async fn create_of(&self, code: &'static str) -> Uuid {
        use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
        use custody_core::withdrawal::{
            self, ExecuteIds, FeePolicy, HotWallet, QuoteRequest, Rate,
        };
        let now = self.clock.now();
        let tenant = custody_core::TenantId::parse("acme").unwrap();
        let asset = custody_core::AssetCatalog::mainnet()
            .get(Network::Bsc, code)
            .unwrap()
            .clone();
        let (quote_id, ids) = (
            Uuid::new_v4(),
            ExecuteIds {
                withdrawal: Uuid::new_v4(),
                outgoing: Uuid::new_v4(),
                hold_tx: Uuid::new_v4(),
                created_event: Uuid::new_v4(),
                balance_event: Uuid::new_v4(),
            },
        );
        write(self.b.store.as_ref(), move |tx| {
            let user = UserAccount::new(
                "acme".to_owned(),
                "alice".to_owned(),
                custody_core::AssetId::new(Network::Bsc, code.to_owned()),
            );
            let meta = TxMeta {
                id: Uuid::new_v4(),
                reference_type: ReferenceType::Deposit,
                reference_id: Uuid::new_v4(),
                created_at: now,
            };
            ledger::credit_deposit(tx, &meta, &user, Amount::from_units(1_000_000))?;
            let request = QuoteRequest {
                tenant: tenant.clone(),
                external_user_id: "alice".into(),
                asset: asset.clone(),
                destination: custody_core::chain::ChainAddress::parse(
                    Network::Bsc,
                    "0x00000000000000000000000000000000000000bb",
                )
                .expect("an address"),
                amount: Amount::from_units(5),
                policy: FeePolicy {
                    min_amount_units: Amount::from_units(1),
                    max_amount_units: Amount::from_units(1_000),
                    markup_bps: 0,
                    service_fee_units: Amount::ZERO,
                    service_fee_bps: 0,
                    spread_bps: 0,
                },
                network_native: Amount::from_units(100),
                rate: Rate::NATIVE,
            };
            withdrawal::create_quote(tx, quote_id, &request, now)?;
            let hot = HotWallet {
                address: HOT.into(),
                path: hot_wallet_path(Network::Bsc),
            };
            withdrawal::execute(tx, ids, &tenant, quote_id, &asset, &hot, now)
        })
        .await
        .unwrap();
        ids.outgoing
    }

    /// A funded user's BNB→USDT swap, executed (no approval for the native coin): its
    /// outgoing transaction's id.
    async fn create_swap(&self) -> Uuid {
        use custody_core::ledger::{self, ReferenceType, TxMeta, UserAccount};
        use custody_core::swap::{self, RouterSettings, SwapExecuteIds, SwapQuoteRequest};
        use custody_core::withdrawal::{FeePolicy, HotWallet, Rate};
        let now = self.clock.now();
        let tenant = custody_core::TenantId::parse("acme").unwrap();
        let catalog = custody_core::AssetCatalog::mainnet();
        let (bnb, usdt) = (
            catalog.get(Network::Bsc, "BNB").unwrap().clone(),
            catalog.get(Network::Bsc, "USDT").unwrap().clone(),
        );
        let wbnb = "0xbb4CdB9CBd36B01bD1cBaEBF2De08d9173bc095c";
        let quote_id = Uuid::new_v4();
        let ids = SwapExecuteIds {
            swap: Uuid::new_v4(),
            outgoing: Uuid::new_v4(),
            approvals: [Uuid::new_v4(), Uuid::new_v4()],
            hold_tx: Uuid::new_v4(),
            created_event: Uuid::new_v4(),
            balance_event: Uuid::new_v4(),
        };
        write(self.b.store.as_ref(), move |tx| {
            let user = UserAccount::new(
                "acme".to_owned(),
                "alice".to_owned(),
                custody_core::AssetId::new(Network::Bsc, "BNB".to_owned()),
            );
            let meta = TxMeta {
                id: Uuid::new_v4(),
                reference_type: ReferenceType::Deposit,
                reference_id: Uuid::new_v4(),
                created_at: now,
            };
            ledger::credit_deposit(tx, &meta, &user, Amount::from_units(1_000_000))?;
            let request = SwapQuoteRequest {
                tenant: tenant.clone(),
                external_user_id: "alice".into(),
                asset_in: bnb.clone(),
                asset_out: usdt.clone(),
                amount_in: Amount::from_units(1_000),
                slippage_bps: 50,
                route: vec!["BNB".into(), "USDT".into()],
                path: vec![wbnb.into(), usdt.contract.clone().unwrap()],
                expected_amount_out: Amount::from_units(600_000),
                policy: FeePolicy {
                    min_amount_units: Amount::from_units(1),
                    max_amount_units: Amount::from_units(1_000_000),
                    markup_bps: 0,
                    service_fee_units: Amount::ZERO,
                    service_fee_bps: 0,
                    spread_bps: 0,
                },
                network_native: Amount::from_units(100),
                rate: Rate::NATIVE,
            };
            swap::create_quote(tx, quote_id, &request, now)?;
            let hot = HotWallet {
                address: HOT.into(),
                path: hot_wallet_path(Network::Bsc),
            };
            let router = RouterSettings {
                router: "0x10ED43C718714eb63d5aA57B78B54704E256024E".into(),
                wrapped_native: wbnb.into(),
                deadline_s: 600,
            };
            swap::execute(
                tx,
                ids,
                &tenant,
                quote_id,
                (&bnb, &usdt),
                &hot,
                &router,
                now,
            )
        })
        .await
        .unwrap();
        ids.outgoing
    }

    /// The withdrawal the outgoing transaction pays.
    async fn withdrawal(&self, id: Uuid) -> custody_core::withdrawal::Withdrawal {
        let out = self.get(id).await;
        read(self.b.store.as_ref(), move |tx| {
            Ok(tx.withdrawal_by_id(out.reference_id)?)
        })
        .await
        .unwrap()
        .unwrap()
    }

    async fn get(&self, id: Uuid) -> OutgoingTx {
        read(self.b.store.as_ref(), move |tx| Ok(tx.outgoing(id)?))
            .await
            .unwrap()
            .unwrap()
    }

    /// Rounds (each after `ms`) until `id` is terminal, at most `n`.
    async fn rounds_until_done(&self, id: Uuid, n: usize, ms: i64) -> OutgoingTx {
        for _ in 0..n {
            self.advance(ms);
            self.b.round().await.unwrap();
            let out = self.get(id).await;
            if out.status.is_terminal() {
                return out;
            }
        }
        self.get(id).await
    }
}

#[tokio::test]
async fn a_payment_is_signed_stored_sent_included_and_final_once() {
    let f = Fixture::new();
    let id = f.create().await;
    assert_eq!(f.b.round().await.unwrap(), 1);
    let out = f.get(id).await;
    assert_eq!(out.status, OutStatus::Sent);
    assert_eq!(out.attempts.len(), 1);
    assert_eq!(
        out.attempts[0].last_answer,
        Some(BroadcastOutcome::Accepted)
    );
    f.chain.mine();
    f.advance(5_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(id).await.status, OutStatus::Included);
    f.chain.empty_blocks(2);
    let done = f.rounds_until_done(id, 3, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(f.chain.mined_payments(), 1);
    let steps: Vec<_> = done.history.iter().map(|s| s.status).collect();
    assert_eq!(
        steps,
        [
            OutStatus::Built,
            OutStatus::Signed,
            OutStatus::Sent,
            OutStatus::Included,
            OutStatus::Final
        ]
    );
    // The withdrawal it pays moved with it, in the same transactions.
    let w = f.withdrawal(id).await;
    assert_eq!(
        w.status,
        custody_core::withdrawal::WithdrawalStatus::Confirmed
    );
    assert_eq!(w.tx_hash.as_deref(), Some(done.attempts[0].hash.as_str()));
    assert_eq!(
        w.actual_network_cost_units,
        Some(Amount::from_units(21_000_000_000_000))
    );
}

#[tokio::test]
async fn a_lost_answer_sends_the_same_bytes_again_never_a_second_payment() {
    let f = Fixture::new();
    let id = f.create().await;
    f.chain.lose_answers.store(3, Ordering::SeqCst);
    f.b.round().await.unwrap();
    let first = f.get(id).await;
    assert_eq!(
        first.status,
        OutStatus::Sent,
        "an unknown answer is not a failure"
    );
    // The node lost it too: nothing pooled, nothing mined.
    f.chain.drop_pool();
    for _ in 0..3 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    let again = f.get(id).await;
    assert_eq!(
        again.attempts.len(),
        1,
        "no new transaction within replace_after"
    );
    let sent: Vec<_> = f.chain.broadcasts.lock().unwrap().clone();
    assert!(sent.len() >= 2 && sent.iter().all(|h| *h == first.attempts[0].hash));
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(f.chain.mined_payments(), 1);
}

#[tokio::test]
async fn a_crash_between_storing_and_sending_sends_exactly_the_stored_bytes() {
    let f = Fixture::new();
    let id = f.create().await;
    // What a crash right after the signing job committed leaves: an attempt, never sent.
    let hash = stored_unsent(&f, id, None).await;
    f.b.round().await.unwrap();
    let after = f.get(id).await;
    assert_eq!(after.attempts.len(), 1);
    assert_eq!(*f.chain.broadcasts.lock().unwrap(), [hash]);
    assert_eq!(after.status, OutStatus::Sent);
}

#[tokio::test]
async fn a_dropped_transaction_is_replaced_under_its_nonce_and_paid_once() {
    let f = Fixture::new();
    let id = f.create().await;
    f.b.round().await.unwrap();
    f.chain.drop_pool();
    f.advance(61_000);
    f.b.round().await.unwrap();
    let replaced = f.get(id).await;
    assert_eq!(replaced.attempts.len(), 2);
    let prices: Vec<_> = replaced
        .attempts
        .iter()
        .map(|a| match a.bid {
            custody_core::outgoing::Bid::Gas { gas_price_wei, .. } => gas_price_wei,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(prices, [1_000_000_000, 1_120_000_000], "+12 %, same nonce");
    // Both versions reach a pool: only one of a nonce can be mined.
    let first = replaced.attempts[0].clone();
    f.chain
        .broadcast(&SignedTx {
            hash: first.hash,
            raw: first.raw,
        })
        .await;
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(f.chain.mined_payments(), 1);
    assert_eq!(
        done.included.unwrap().hash,
        replaced.attempts[1].hash,
        "the better bid"
    );
}

mockall::mock! {
    /// A signer whose calls a test states in advance (mockall): a signature asked for where
    /// none may be fails the test at the call.
    Keys {}
    impl Signer for Keys {
        fn external_chain_public_key(
            &self,
            network: Network,
            account: u32,
        ) -> Result<([u8; 33], [u8; 32]), PortError>;
        fn sign_digest(
            &self,
            path: &custody_core::ports::signer::HdPath,
            digest: &[u8; 32],
        ) -> Result<RecoverableSignature, PortError>;
        fn seed_generation(&self, account: u32) -> u32;
    }
}

/// A mock signer over the fixture's keys: public keys and seed generations answered as they
/// are, at most `signatures` signatures (each made by the real keys).
fn keys_signing_at_most(real: Arc<dyn Signer>, signatures: usize) -> MockKeys {
    let mut keys = MockKeys::new();
    let public = Arc::clone(&real);
    keys.expect_external_chain_public_key()
        .returning(move |n, a| public.external_chain_public_key(n, a));
    keys.expect_seed_generation().returning(|_| 0);
    keys.expect_sign_digest()
        .times(0..=signatures)
        .returning(move |path, digest| real.sign_digest(path, digest));
    keys
}

#[tokio::test]
async fn nothing_new_is_signed_while_a_kill_switch_is_on() {
    let mut f = Fixture::new();
    let id = f.create().await;
    // The signer is never even asked while a switch is on.
    let real = Arc::clone(&f.b.signer);
    f.b.signer = Arc::new(keys_signing_at_most(Arc::clone(&real), 0));
    for key in [
        "kill_switch.withdrawals",
        "maintenance.BSC",
        "kill_switch.global",
        // The TREASURY reconciliation's automatic control of the withdrawn asset (BNB).
        "treasury_shortfall.BSC.BNB",
    ] {
        let now = f.clock.now();
        write(f.b.store.as_ref(), move |tx| {
            set_control(tx, Uuid::new_v4(), "ops", key, true, "test", now)
        })
        .await
        .unwrap();
        f.advance(16_000);
        f.b.round().await.unwrap();
        let out = f.get(id).await;
        assert!(out.attempts.is_empty(), "{key}: nothing signed");
        assert!(f.chain.broadcasts.lock().unwrap().is_empty());
        let now = f.clock.now();
        write(f.b.store.as_ref(), move |tx| {
            set_control(tx, Uuid::new_v4(), "ops", key, false, "test", now)
        })
        .await
        .unwrap();
    }
    // Switches off: signed once.
    f.b.signer = Arc::new(keys_signing_at_most(real, 1));
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(
        f.get(id).await.attempts.len(),
        1,
        "sent once the switches are off"
    );
}

const REFUSED: &str = "rejected: insufficient funds for gas * price + value";

/// Stores a signed attempt that never went out (refused by the node, or a crash before the
/// send), as the engine would have.
async fn stored_unsent(f: &Fixture, id: Uuid, last_answer: Option<&str>) -> String {
    // Signed with the sender's next nonce, allocated in the write that stores the attempt, as
    // the broadcaster does.
    let mut out = f.get(id).await;
    let next = {
        let (network, from) = (out.network, out.from.clone());
        read(f.b.store.as_ref(), move |tx| {
            Ok(tx.next_nonce(network, &from)?)
        })
        .await
        .unwrap()
        .unwrap_or(0)
    };
    out.nonce = Some(next);
    let bid = FeeBid::Gas {
        gas_limit: 21_000,
        gas_price_wei: 1_000_000_000,
    };
    let request = BuildRequest {
        from: out.from.clone(),
        payment: out.payment.clone(),
        nonce: out.nonce,
        bid,
    };
    let unsigned = f.chain.build(&request).await.unwrap();
    let sig =
        f.b.signer
            .sign_digest(&out.from_path, &unsigned.digest)
            .unwrap();
    let signed = f.chain.assemble(&unsigned, &sig).unwrap();
    let mut stored = out.clone();
    stored
        .add_attempt(
            Attempt {
                hash: signed.hash.clone(),
                raw: signed.raw,
                bid: bid.into(),
                expires_at_ms: None,
                signed_at: f.clock.now(),
                sent_at: None,
                last_answer: last_answer.map(BroadcastOutcome::from_stored),
                plan: None,
                reference_block: None,
                void: false,
            },
            f.clock.now(),
        )
        .unwrap();
    let recorded = write(f.b.store.as_ref(), move |tx| {
        custody_core::outgoing::record_signed(tx, &stored, Some(next), None)
    })
    .await
    .unwrap();
    assert_eq!(recorded, Recorded::Stored);
    signed.hash
}

#[tokio::test]
async fn money_that_never_left_stays_while_a_switch_is_on() {
    let f = Fixture::new();
    let id = f.create().await;
    let hash = stored_unsent(&f, id, Some(REFUSED)).await;
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "ops",
            "kill_switch.global",
            true,
            "latched",
            now,
        )
    })
    .await
    .unwrap();
    // Past replace_after too: a refused attempt is re-priced then, and that must not send it.
    for _ in 0..6 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    assert!(
        f.chain.broadcasts.lock().unwrap().is_empty(),
        "stored bytes that never left do not leave under the switch"
    );
    // It holds its nonce: the wallet's later payments wait behind it, and an operator is told
    // which one holds them, once per wait.
    let held = alerts_of(&f, "outgoing_stuck").await;
    assert_eq!(held.len(), 1, "{held:?}");
    assert!(held[0].message.contains("nonce 0"), "{}", held[0].message);
    assert_eq!(held[0].reference_id, Some(id));
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "ops",
            "kill_switch.global",
            false,
            "looked",
            now,
        )
    })
    .await
    .unwrap();
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(
        *f.chain.broadcasts.lock().unwrap(),
        [hash],
        "the same bytes, once allowed"
    );
}

/// Alice owes `owed` BNB after a reorganization (a reversed deposit with a shortfall).
async fn owes_bnb(f: &Fixture, owed: u128) {
    use custody_core::deposit::{Deposit, DepositStatus};
    let signer = Arc::clone(&f.b.signer);
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        let tenant = custody_core::TenantId::parse("acme").unwrap();
        let w = custody_core::wallet::create_wallet(
            tx,
            signer.as_ref(),
            [Uuid::new_v4(), Uuid::new_v4()],
            &tenant,
            "alice",
            Network::Bsc,
            now,
        )?
        .wallet;
        tx.insert_deposit(&Deposit {
            id: Uuid::new_v4(),
            tenant,
            network: Network::Bsc,
            asset: "BNB".into(),
            external_user_id: "alice".into(),
            wallet_id: w.id,
            address: w.address.clone(),
            tx_hash: "ee".repeat(32),
            log_index: None,
            from_address: "0x0000000000000000000000000000000000000001".into(),
            amount: Amount::from_units(80),
            block_number: None,
            block_hash: None,
            confirmations: 0,
            required_confirmations: 15,
            status: DepositStatus::Reversed,
            history: Vec::new(),
            credit_tx_id: None,
            shortfall: Amount::from_units(owed),
            created_at: now,
            updated_at: now,
        })?;
        Ok(())
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_reorg_debt_of_the_user_stops_a_withdrawal_that_has_not_left() {
    let f = Fixture::new();
    let id = f.create().await;
    owes_bnb(&f, 50).await;
    for _ in 0..3 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    assert!(
        f.get(id).await.attempts.is_empty(),
        "nothing signed for a user who owes"
    );
    assert!(f.chain.broadcasts.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_reorg_debt_of_the_user_stops_a_swap_of_that_asset_that_has_not_left() {
    // Without a debt the same swap is signed and sent: the fixture is not what stops it.
    let free = Fixture::new();
    let sent = free.create_swap().await;
    free.advance(16_000);
    free.b.round().await.unwrap();
    assert_eq!(free.get(sent).await.attempts.len(), 1);

    let f = Fixture::new();
    let id = f.create_swap().await;
    owes_bnb(&f, 50).await;
    for _ in 0..3 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    assert!(
        f.get(id).await.attempts.is_empty(),
        "nothing signed for a user who owes the BNB the swap spends"
    );
    assert!(f.chain.broadcasts.lock().unwrap().is_empty());
}

async fn alerts_of(f: &Fixture, kind: &str) -> Vec<custody_core::admin::Alert> {
    let kind = kind.to_owned();
    read(f.b.store.as_ref(), move |tx| {
        Ok(tx
            .list_alerts(custody_core::page::Page::first(100))?
            .unwrap_or_default()
            .into_iter()
            .filter(|a| a.kind == kind)
            .collect())
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_payment_the_hot_wallet_cannot_fund_waits_with_one_alert_then_goes_out() {
    let f = Fixture::new();
    let id = f.create().await;
    // 5 wei plus 21,000 gas at 1 gwei are needed; one wei short.
    *f.chain.balance.lock().unwrap() = 21_000_000_000_000 + 4;
    for _ in 0..3 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    let out = f.get(id).await;
    assert!(out.attempts.is_empty(), "nothing signed while short");
    assert!(f.chain.broadcasts.lock().unwrap().is_empty());
    assert_eq!(out.status, OutStatus::Built);
    assert_eq!(
        f.withdrawal(id).await.status,
        custody_core::withdrawal::WithdrawalStatus::Reserved
    );
    let alerts = alerts_of(&f, "hot_wallet_insufficient").await;
    assert_eq!(alerts.len(), 1, "one alert per wait, not one per round");
    assert_eq!(alerts[0].reference_id, Some(out.reference_id));
    assert!(out
        .history
        .iter()
        .any(|s| s.detail.starts_with(Wait::HotWalletShort.note_prefix())));
    // Funded: it goes out on the next look and is paid once.
    *f.chain.balance.lock().unwrap() = 21_000_000_000_000 + 5;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(id).await.status, OutStatus::Sent);
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(f.chain.mined_payments(), 1);
    assert_eq!(alerts_of(&f, "hot_wallet_insufficient").await.len(), 1);
}

#[tokio::test]
async fn what_is_already_on_its_way_is_kept_for_when_the_next_payment_is_checked() {
    let f = Fixture::new();
    let first = f.create().await;
    let fee = 21_000_000_000_000;
    // Enough for one payment (5 wei + fee), not two.
    *f.chain.balance.lock().unwrap() = 2 * fee + 9;
    f.b.round().await.unwrap();
    assert_eq!(f.get(first).await.status, OutStatus::Sent);
    let second = f.create().await;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert!(
        f.get(second).await.attempts.is_empty(),
        "the balance still shows the first payment's coins, which are on their way"
    );
    // The first is mined: the chain's balance now shows what is left.
    f.chain.mine();
    *f.chain.balance.lock().unwrap() = fee + 4 + 5;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(second).await.attempts.len(), 1);
}

#[tokio::test]
async fn a_refused_price_is_asked_again_after_replace_after_and_paid_once() {
    let f = Fixture::new();
    let id = f.create().await;
    // The node's minimum went up after it quoted 1 gwei.
    *f.chain.min_price.lock().unwrap() = 3_000_000_000;
    f.b.round().await.unwrap();
    let refused = f.get(id).await;
    assert_eq!(refused.status, OutStatus::Signed, "refused: not sent");
    assert!(refused.attempts[0]
        .last_answer
        .as_ref()
        .unwrap()
        .refusal()
        .is_some());
    // Within replace_after the same bytes are offered again; the node's price is still low.
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(id).await.attempts.len(), 1);
    // The node now prices at its minimum: a new attempt under the same nonce at that price.
    *f.chain.node_price.lock().unwrap() = 3_000_000_000;
    f.advance(60_000);
    f.b.round().await.unwrap();
    let repriced = f.get(id).await;
    assert_eq!(repriced.attempts.len(), 2);
    assert_eq!(repriced.status, OutStatus::Sent);
    assert_eq!(
        repriced.attempts[1].bid,
        custody_core::outgoing::Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 3_000_000_000
        }
    );
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(f.chain.mined_payments(), 1);
}

#[tokio::test]
async fn a_refusal_after_a_delivery_elsewhere_is_followed_to_its_inclusion() {
    let f = Fixture::new();
    let id = f.create().await;
    f.chain.refuse_after_pooling.store(1, Ordering::SeqCst);
    f.b.round().await.unwrap();
    let out = f.get(id).await;
    assert_eq!(out.status, OutStatus::Signed);
    // The bytes were in a pool anyway, and a switch goes on: nothing more is sent, but the
    // chain is still asked, so the payment that went out is recorded.
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "ops",
            "kill_switch.withdrawals",
            true,
            "t",
            now,
        )
    })
    .await
    .unwrap();
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(f.chain.mined_payments(), 1);
    assert_eq!(f.chain.broadcasts.lock().unwrap().len(), 1);
    assert_eq!(
        f.withdrawal(id).await.status,
        custody_core::withdrawal::WithdrawalStatus::Confirmed
    );
}

#[tokio::test]
async fn a_node_that_keeps_refusing_raises_one_stuck_alert_and_sending_goes_on() {
    let f = Fixture::new();
    let id = f.create().await;
    // Refused at any price the node quotes: re-pricing cannot cure it.
    *f.chain.min_price.lock().unwrap() = u128::MAX;
    for _ in 0..40 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    let out = f.get(id).await;
    assert_eq!(out.status, OutStatus::Signed);
    let alerts = alerts_of(&f, "outgoing_stuck").await;
    assert_eq!(alerts.len(), 1, "one alert, not one per round");
    assert!(
        alerts[0].message.contains("transaction underpriced"),
        "{}",
        alerts[0].message
    );
    let sent_before = f.chain.broadcasts.lock().unwrap().len();
    // The node takes it again: it goes out and is paid once.
    *f.chain.min_price.lock().unwrap() = 0;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert!(f.chain.broadcasts.lock().unwrap().len() > sent_before);
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(f.chain.mined_payments(), 1);
}

#[tokio::test]
async fn a_token_payment_the_hot_wallet_cannot_cover_raises_the_alert_though_it_cannot_be_priced() {
    let f = Fixture::new();
    let id = f.create_of("USDT").await;
    for _ in 0..3 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    assert!(f.get(id).await.attempts.is_empty());
    let alerts = alerts_of(&f, "hot_wallet_insufficient").await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(alerts[0].message.contains("token"), "{}", alerts[0].message);
    *f.chain.token_balance.lock().unwrap() = 5;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(
        f.get(id).await.status,
        OutStatus::Sent,
        "funded: it goes out"
    );
}

#[tokio::test]
async fn a_send_a_crash_interrupted_is_recorded_when_mined_even_under_a_switch() {
    let f = Fixture::new();
    let id = f.create().await;
    // Stored, sent, mined; the process died before recording the answer.
    let hash = stored_unsent(&f, id, None).await;
    let out = f.get(id).await;
    f.chain
        .broadcast(&SignedTx {
            hash: hash.clone(),
            raw: out.attempts[0].raw.clone(),
        })
        .await;
    f.chain.broadcasts.lock().unwrap().clear();
    f.chain.mine();
    f.chain.empty_blocks(3);
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "ops",
            "kill_switch.global",
            true,
            "t",
            now,
        )
    })
    .await
    .unwrap();
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert!(
        f.chain.broadcasts.lock().unwrap().is_empty(),
        "nothing sent under the switch"
    );
    assert_eq!(
        f.withdrawal(id).await.status,
        custody_core::withdrawal::WithdrawalStatus::Confirmed
    );
}

#[tokio::test]
async fn a_payment_waiting_for_funds_holds_no_nonce_and_stalls_nothing_behind_it() {
    let f = Fixture::new();
    // The hot wallet has gas but no USDT: the token withdrawal, created first, waits.
    *f.chain.balance.lock().unwrap() = 10_000_000_000_000_000;
    *f.chain.token_balance.lock().unwrap() = 0;
    let token = f.create_of("USDT").await;
    let native = f.create().await;
    f.b.round().await.unwrap();
    let waiting = f.get(token).await;
    assert!(waiting.attempts.is_empty());
    assert_eq!(waiting.nonce, None, "a payment that waits holds no nonce");
    let sent = f.get(native).await;
    assert_eq!(
        sent.status,
        OutStatus::Sent,
        "the later payment is not held back"
    );
    assert_eq!(sent.nonce, Some(0));
    f.chain.mine();
    // Funded: the token payment takes the next nonce; nothing is left in between.
    *f.chain.token_balance.lock().unwrap() = 1_000_000_000;
    f.advance(16_000);
    f.b.round().await.unwrap();
    let now_sent = f.get(token).await;
    assert_eq!(now_sent.status, OutStatus::Sent);
    assert_eq!(now_sent.nonce, Some(1));
}

#[tokio::test]
async fn no_replacement_is_signed_while_a_lower_nonce_is_out_of_a_block() {
    let f = Fixture::new();
    *f.chain.balance.lock().unwrap() = 10_000_000_000_000_000;
    let a = f.create().await;
    let b = f.create().await;
    f.b.round().await.unwrap();
    // Created together, they are claimed in either order: nonces follow the signing order.
    let (first, second) = if f.get(a).await.nonce == Some(0) {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(f.get(first).await.nonce, Some(0));
    assert_eq!(f.get(second).await.nonce, Some(1));
    // Neither is mined for a long time: the first is replaced (its price may be the cause),
    // the second only sent again while the first is out of a block.
    for _ in 0..4 {
        f.advance(f.b.policy.replace_after_ms + 1);
        f.b.round().await.unwrap();
    }
    assert!(
        f.get(first).await.attempts.len() > 1,
        "the lowest is re-priced"
    );
    assert_eq!(
        f.get(second).await.attempts.len(),
        1,
        "nothing new is signed behind a pending lower nonce"
    );
}

#[tokio::test]
async fn a_payment_that_cannot_be_priced_raises_one_alert_and_waits_without_a_nonce() {
    let f = Fixture::new();
    *f.chain.balance.lock().unwrap() = 10_000_000_000_000_000;
    *f.chain.price_refusal.lock().unwrap() = Some("execution reverted: frozen".into());
    let id = f.create().await;
    for _ in 0..3 {
        f.advance(16_000);
        f.b.round().await.unwrap();
    }
    let out = f.get(id).await;
    assert!(out.attempts.is_empty());
    assert_eq!(out.nonce, None);
    assert!(out
        .history
        .iter()
        .any(|h| h.detail.starts_with(Wait::CannotPrice.note_prefix())
            && h.detail.contains("frozen")));
    let alerts = alerts_of(&f, "outgoing_stuck").await;
    assert_eq!(alerts.len(), 1, "one alert per wait, not one per round");
    // Once the chain prices it again, it goes out.
    *f.chain.price_refusal.lock().unwrap() = None;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(id).await.status, OutStatus::Sent);
}

/// A seed imported after this process started (a wallet migration to a new seed) derives the
/// sender's account: nothing is signed with the old seed's key (the transaction would come
/// from another address, and spend the sender's nonce for nothing); one alert, and it waits.
#[tokio::test]
async fn nothing_is_signed_for_an_account_of_a_seed_this_process_has_not_loaded() {
    use custody_core::ports::signer::HdPath;
    use custody_core::sweep::{create_sweep, Plan, SweepIds, SweepOrder, SweepSource};
    use custody_core::wallet::seeds::SeedRecord;
    let f = Fixture::new();
    let catalog = custody_core::AssetCatalog::mainnet();
    let bnb = catalog.get(Network::Bsc, "BNB").unwrap().clone();
    let order = SweepOrder {
        native: bnb.id(),
        asset: bnb,
        source: SweepSource {
            address: "0x00000000000000000000000000000000000000bB".into(),
            path: HdPath {
                network: Network::Bsc,
                account: 3,
                index: 0,
            },
        },
        hot: custody_core::withdrawal::HotWallet {
            address: "0x00000000000000000000000000000000000000aA".into(),
            path: custody_core::wallet::hot_wallet_path(Network::Bsc),
        },
        plan: Plan::Sweep {
            amount: Amount::from_units(1_000),
        },
        planned_fee_native: Amount::from_units(21_000),
    };
    let ids = SweepIds {
        sweep: Uuid::new_v4(),
        outgoing: Uuid::new_v4(),
        funding: Uuid::new_v4(),
        delegation: Uuid::new_v4(),
        delegation_outgoing: Uuid::new_v4(),
    };
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        create_sweep(tx, ids, &order, now)?;
        // Imported by another process: accounts from 2 on are the new seed's.
        tx.insert_seed(&SeedRecord {
            generation: 1,
            first_account: 2,
            sealed_mnemonic: vec![1],
            fingerprint: "0xNEW".into(),
            created_at: now,
        })?;
        Ok(())
    })
    .await
    .unwrap();
    for _ in 0..2 {
        f.b.round().await.unwrap();
        f.advance(20_000);
    }
    let out = f.get(ids.outgoing).await;
    assert_eq!(out.status, OutStatus::Built, "not signed");
    assert!(out.attempts.is_empty());
    assert_eq!(out.nonce, None, "no nonce spent");
    let alerts = alerts_of(&f, "outgoing_stuck").await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(
        alerts[0].message.contains("restart"),
        "{}",
        alerts[0].message
    );
}

/// A replacement is a new signature too: once a seed this process has not loaded derives the
/// sender's account (imported by another process after a first attempt went out), no
/// replacement is signed with the old seed's key; one alert, and it waits for the restart.
#[tokio::test]
async fn no_replacement_is_signed_for_an_account_of_a_seed_this_process_has_not_loaded() {
    use custody_core::ports::signer::HdPath;
    use custody_core::sweep::{create_sweep, Plan, SweepIds, SweepOrder, SweepSource};
    use custody_core::wallet::seeds::SeedRecord;
    let f = Fixture::new();
    let catalog = custody_core::AssetCatalog::mainnet();
    let bnb = catalog.get(Network::Bsc, "BNB").unwrap().clone();
    let order = SweepOrder {
        native: bnb.id(),
        asset: bnb,
        source: SweepSource {
            address: "0x00000000000000000000000000000000000000bB".into(),
            path: HdPath {
                network: Network::Bsc,
                account: 3,
                index: 0,
            },
        },
        hot: custody_core::withdrawal::HotWallet {
            address: "0x00000000000000000000000000000000000000aA".into(),
            path: custody_core::wallet::hot_wallet_path(Network::Bsc),
        },
        plan: Plan::Sweep {
            amount: Amount::from_units(1_000),
        },
        planned_fee_native: Amount::from_units(21_000),
    };
    let ids = SweepIds {
        sweep: Uuid::new_v4(),
        outgoing: Uuid::new_v4(),
        funding: Uuid::new_v4(),
        delegation: Uuid::new_v4(),
        delegation_outgoing: Uuid::new_v4(),
    };
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        create_sweep(tx, ids, &order, now)
    })
    .await
    .unwrap();
    f.b.round().await.unwrap();
    assert_eq!(
        f.get(ids.outgoing).await.attempts.len(),
        1,
        "signed and sent"
    );
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        // Imported by another process: accounts from 2 on are the new seed's.
        Ok(tx.insert_seed(&SeedRecord {
            generation: 1,
            first_account: 2,
            sealed_mnemonic: vec![1],
            fingerprint: "0xNEW".into(),
            created_at: now,
        })?)
    })
    .await
    .unwrap();
    f.chain.drop_pool();
    f.advance(61_000);
    f.b.round().await.unwrap();
    let out = f.get(ids.outgoing).await;
    assert_eq!(out.attempts.len(), 1, "no replacement signed");
    let alerts = alerts_of(&f, "outgoing_stuck").await;
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(
        alerts[0].message.contains("restart"),
        "{}",
        alerts[0].message
    );
}

/// Every ledger account the fixture's payments touch, BNB and USDT: alice's and the house's.
async fn books(f: &Fixture) -> Vec<(String, Option<custody_core::ledger::AccountBalances>)> {
    use custody_core::ledger::{AccountKey, SystemAccount, UserAccount};
    read(f.b.store.as_ref(), |tx| {
        let mut keys = Vec::new();
        for code in ["BNB", "USDT"] {
            let asset = custody_core::AssetId::new(Network::Bsc, code.to_owned());
            keys.push(UserAccount::new("acme".to_owned(), "alice".to_owned(), asset.clone()).key());
            for system in SystemAccount::ALL {
                keys.push(AccountKey::system(system, asset.clone()));
            }
        }
        let mut books = Vec::new();
        for key in keys {
            books.push((key.to_string(), tx.ledger_account(&key)?));
        }
        Ok(books)
    })
    .await
    .unwrap()
}

/// The sender's next nonce as the store's allocator would hand it out (`None`: never seeded).
async fn next_nonce(f: &Fixture, id: Uuid) -> Option<u64> {
    let out = f.get(id).await;
    read(f.b.store.as_ref(), move |tx| {
        Ok(tx.next_nonce(out.network, &out.from)?)
    })
    .await
    .unwrap()
}

async fn switch_off(f: &Fixture, key: &'static str) {
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        set_control(tx, Uuid::new_v4(), "ops", key, false, "test", now)
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn a_switch_turned_on_while_a_payment_is_signed_stops_it_in_the_write_that_stores_it() {
    for key in [
        "kill_switch.withdrawals",
        "maintenance.BSC",
        "kill_switch.global",
        "treasury_shortfall.BSC.BNB",
    ] {
        let f = Fixture::new();
        let id = f.create().await;
        let before = books(&f).await;
        *f.chain.switch_on_build.lock().unwrap() = Some((Arc::clone(&f.b.store), key));
        f.advance(16_000);
        f.b.round().await.unwrap();
        assert!(
            f.chain.switch_on_build.lock().unwrap().is_none(),
            "{key}: turned on mid-signature"
        );
        let out = f.get(id).await;
        assert!(
            out.attempts.is_empty(),
            "{key}: the signed bytes were dropped"
        );
        assert_eq!((out.status, out.nonce), (OutStatus::Built, None), "{key}");
        assert_eq!(next_nonce(&f, id).await, None, "{key}: no nonce taken");
        assert!(f.chain.broadcasts.lock().unwrap().is_empty(), "{key}");
        assert_eq!(
            f.withdrawal(id).await.status,
            custody_core::withdrawal::WithdrawalStatus::Reserved,
            "{key}"
        );
        assert_eq!(books(&f).await, before, "{key}: the hold stays as it was");
        // It waits like a payment refused before pricing, then goes out once allowed, under
        // the first nonce.
        f.advance(16_000);
        f.b.round().await.unwrap();
        assert!(f.get(id).await.attempts.is_empty(), "{key}: still held");
        switch_off(&f, key).await;
        f.advance(16_000);
        f.b.round().await.unwrap();
        let out = f.get(id).await;
        assert_eq!((out.attempts.len(), out.nonce), (1, Some(0)), "{key}");
        assert_eq!(f.chain.broadcasts.lock().unwrap().len(), 1, "{key}");
        assert_eq!(books(&f).await, before, "{key}: sent, not yet settled");
    }
}

#[tokio::test]
async fn a_swap_switch_turned_on_while_a_swap_is_signed_stops_it_in_the_write_that_stores_it() {
    let f = Fixture::new();
    let id = f.create_swap().await;
    let before = books(&f).await;
    *f.chain.switch_on_build.lock().unwrap() = Some((Arc::clone(&f.b.store), "kill_switch.swaps"));
    f.advance(16_000);
    f.b.round().await.unwrap();
    let out = f.get(id).await;
    assert!(out.attempts.is_empty());
    assert_eq!((out.status, out.nonce), (OutStatus::Built, None));
    assert_eq!(next_nonce(&f, id).await, None);
    assert!(f.chain.broadcasts.lock().unwrap().is_empty());
    assert_eq!(books(&f).await, before);
}

#[tokio::test]
async fn a_replacement_a_switch_stops_at_record_time_sends_the_bytes_already_out() {
    let f = Fixture::new();
    let id = f.create().await;
    f.advance(16_000);
    f.b.round().await.unwrap();
    let first = f.get(id).await.attempts[0].hash.clone();
    // The pool drops it; after replace_after a replacement is due, and the switch is turned
    // on while it is signed.
    f.chain.drop_pool();
    *f.chain.switch_on_build.lock().unwrap() = Some((Arc::clone(&f.b.store), "kill_switch.global"));
    f.advance(61_000);
    f.b.round().await.unwrap();
    let out = f.get(id).await;
    assert_eq!(out.attempts.len(), 1, "the replacement was not stored");
    assert_eq!(out.nonce, Some(0));
    assert_eq!(
        *f.chain.broadcasts.lock().unwrap(),
        [first.clone(), first],
        "only bytes already out went out again"
    );
}

#[tokio::test]
async fn a_swap_that_waited_past_its_deadline_fails_unsent_and_its_hold_is_released() {
    let f = Fixture::new();
    let id = f.create_swap().await;
    let swap_id = f.get(id).await.reference_id;
    let before = books(&f).await;
    // The hot wallet cannot fund it: it waits, holding no nonce.
    *f.chain.balance.lock().unwrap() = 0;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert!(f.get(id).await.attempts.is_empty());
    // Funded only after its deadline (600 s after it was executed).
    *f.chain.balance.lock().unwrap() = 10u128.pow(24);
    f.advance(600_000);
    f.b.round().await.unwrap();
    let out = f.get(id).await;
    assert_eq!(out.status, OutStatus::Failed);
    assert!(out.attempts.is_empty(), "nothing signed");
    assert_eq!(out.nonce, None);
    assert_eq!(next_nonce(&f, id).await, None, "no nonce taken");
    assert!(
        f.chain.broadcasts.lock().unwrap().is_empty(),
        "nothing sent"
    );
    let swap = read(f.b.store.as_ref(), move |tx| Ok(tx.swap_by_id(swap_id)?))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(swap.status, custody_core::swap::SwapStatus::Failed);
    assert!(
        swap.failure_reason
            .as_deref()
            .is_some_and(|r| r.contains("deadline")),
        "{:?}",
        swap.failure_reason
    );
    // The hold is released in full: alice has back all her BNB, none of it reserved; the
    // house's accounts are as before the swap was executed (nothing spent, no fee).
    let after = books(&f).await;
    let alice_bnb =
        |b: &[(String, Option<custody_core::ledger::AccountBalances>)]| b[0].1.unwrap_or_default();
    let (was, is) = (alice_bnb(&before), alice_bnb(&after));
    assert!(!was.reserved().is_zero(), "held before");
    assert_eq!(is.reserved(), Amount::ZERO, "released");
    assert_eq!(is.available(), Some(Amount::from_units(1_000_000)));
    for ((key, was), (_, is)) in before.iter().zip(&after).skip(1) {
        assert_eq!(
            was.map(|b| (b.debits_posted, b.credits_posted)),
            is.map(|b| (b.debits_posted, b.credits_posted)),
            "{key}: nothing posted"
        );
        assert_eq!(
            is.map_or(Amount::ZERO, |b| b.debits_pending.max(b.credits_pending)),
            Amount::ZERO,
            "{key}: nothing pending"
        );
    }
    let events: Vec<String> = read(f.b.store.as_ref(), |tx| {
        Ok(tx
            .list_webhook_events(custody_core::page::Page::first(100))?
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.event_type)
            .collect())
    })
    .await
    .unwrap();
    assert!(events.iter().any(|e| e == "swap.failed"), "{events:?}");
}

#[tokio::test]
async fn a_token_payment_whose_receipt_shows_no_transfer_is_neither_paid_nor_failed() {
    let f = Fixture::new();
    *f.chain.token_balance.lock().unwrap() = 1_000;
    let id = f.create_of("USDT").await;
    f.advance(16_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(id).await.status, OutStatus::Sent);
    let sent = books(&f).await;
    // Mined with status 1 but no Transfer in its receipt, and buried past the depth.
    f.chain.hide_transfers.store(true, Ordering::SeqCst);
    f.chain.mine();
    for _ in 0..4 {
        f.chain.empty_blocks(2);
        f.advance(61_000);
        f.b.round().await.unwrap();
    }
    let out = f.get(id).await;
    assert!(
        out.included.is_none(),
        "not counted as paid: {:?}",
        out.included
    );
    assert!(!out.status.is_terminal(), "nor failed: {:?}", out.status);
    assert_eq!(
        f.withdrawal(id).await.status,
        custody_core::withdrawal::WithdrawalStatus::Broadcasted
    );
    assert_eq!(
        books(&f).await,
        sent,
        "the hold neither settled nor released"
    );
    let stuck = alerts_of(&f, "outgoing_stuck").await;
    assert_eq!(stuck.len(), 1, "one critical alert: {stuck:?}");
    assert_eq!(stuck[0].severity, "critical");
    assert!(
        stuck[0].message.contains("no Transfer"),
        "{}",
        stuck[0].message
    );
    // A sound answer (the node that stripped the logs is corrected) shows the transfer: paid.
    f.chain.hide_transfers.store(false, Ordering::SeqCst);
    let done = f.rounds_until_done(id, 4, 61_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(
        f.withdrawal(id).await.status,
        custody_core::withdrawal::WithdrawalStatus::Confirmed
    );
    let settled = books(&f).await;
    let alice_usdt = settled
        .iter()
        .find(|(k, _)| k.contains("alice") && k.contains("USDT"))
        .and_then(|(_, b)| *b)
        .unwrap();
    assert_eq!(alice_usdt.reserved(), Amount::ZERO, "settled");
    assert_eq!(
        alice_usdt.available(),
        Some(Amount::from_units(1_000_000 - 5 - 100)),
        "the amount and its quoted cost left alice"
    );
}

/// Issue 31, F6: two attempts of one payment both in blocks (what F2 did on TRON; forced here on
/// the scripted chain) is noticed: one critical `double_payment` alert and
/// `kill_switch.global` latched, in the write that records the inclusion; the payment is still
/// followed to the end, and nothing is raised twice.
#[tokio::test]
async fn two_attempts_in_blocks_raise_a_double_payment_alert_and_latch_the_global_switch() {
    let f = Fixture::new();
    let id = f.create().await;
    f.b.round().await.unwrap();
    f.chain.drop_pool();
    f.advance(61_000);
    f.b.round().await.unwrap();
    let out = f.get(id).await;
    assert_eq!(out.attempts.len(), 2);
    {
        let mut mined = f.chain.mined.lock().unwrap();
        let mut head = f.chain.head.lock().unwrap();
        for a in &out.attempts {
            *head += 1;
            mined.insert(a.hash.clone(), *head);
        }
    }
    let global_on = || async {
        read(f.b.store.as_ref(), |tx| {
            Ok(restricted(
                tx,
                custody_core::invariants::GLOBAL_KILL_SWITCH,
            )?)
        })
        .await
        .unwrap()
    };
    assert!(!global_on().await);
    assert!(alerts_of(&f, "double_payment").await.is_empty());
    f.advance(5_000);
    f.b.round().await.unwrap();
    let recorded = f.get(id).await;
    assert_eq!(recorded.status, OutStatus::Included);
    assert!(recorded
        .history
        .last()
        .is_some_and(|s| s.detail.starts_with(DOUBLE_PAYMENT_NOTE)));
    assert_eq!(
        recorded.included.as_ref().map(|i| i.hash.as_str()),
        Some(out.attempts[0].hash.as_str())
    );
    let alerts = alerts_of(&f, "double_payment").await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].severity, "critical");
    assert_eq!(alerts[0].reference_id, Some(id));
    assert!(
        alerts[0].message.contains(&out.attempts[0].hash)
            && alerts[0].message.contains(&out.attempts[1].hash),
        "{}",
        alerts[0].message
    );
    assert!(global_on().await, "kill_switch.global is latched");
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 4, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(
        alerts_of(&f, "double_payment").await.len(),
        1,
        "raised once"
    );
}

async fn request_cancel(f: &Fixture, id: Uuid) -> CoreResult<OutgoingTx> {
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        custody_core::outgoing::request_cancel(tx, Uuid::new_v4(), "ops", id, "stuck", now)
    })
    .await
}

/// `after` is `before` with every hold released (nothing pending anywhere) and `fee` posted
/// from the house's BNB network fees to its BNB treasury; every other total unchanged.
fn released_with_fee(
    before: &[(String, Option<custody_core::ledger::AccountBalances>)],
    after: &[(String, Option<custody_core::ledger::AccountBalances>)],
    fee: u128,
) {
    assert_eq!(before.len(), after.len());
    for ((key, b), (key_after, a)) in before.iter().zip(after) {
        assert_eq!(key, key_after);
        let (b, a) = (b.unwrap_or_default(), a.unwrap_or_default());
        assert_eq!(a.debits_pending, Amount::ZERO, "{key}: hold released");
        assert_eq!(a.credits_pending, Amount::ZERO, "{key}: hold released");
        let (debit, credit) = match key.as_str() {
            k if k.contains("network_fees") && k.contains("BNB") => (fee, 0),
            k if k.contains("treasury") && k.contains("BNB") => (0, fee),
            _ => (0, 0),
        };
        assert_eq!(
            a.debits_posted.units(),
            b.debits_posted.units() + debit,
            "{key}"
        );
        assert_eq!(
            a.credits_posted.units(),
            b.credits_posted.units() + credit,
            "{key}"
        );
    }
}

#[tokio::test]
async fn a_cancelled_withdrawal_voids_its_nonce_then_fails_and_releases_its_hold() {
    let f = Fixture::new();
    let id = f.create().await;
    let before = books(&f).await;
    // Priced below what the node takes: refused, holding nonce 0 (and every later payment).
    *f.chain.min_price.lock().unwrap() = 2_000_000_000;
    f.b.round().await.unwrap();
    let held = f.get(id).await;
    assert_eq!((held.nonce, held.attempts.len()), (Some(0), 1));
    assert!(held.attempts[0].sent_at.is_none(), "refused");
    // The market moved: the node's price now is what it takes.
    *f.chain.node_price.lock().unwrap() = 3_000_000_000;
    request_cancel(&f, id).await.unwrap();
    f.advance(1_000);
    f.b.round().await.unwrap();
    let voiding = f.get(id).await;
    assert_eq!(voiding.attempts.len(), 2);
    let void = voiding.attempts[1].clone();
    assert!(void.void);
    assert_eq!(
        void.bid,
        custody_core::outgoing::Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 3_000_000_000
        },
        "the node's price, above the replacement minimum"
    );
    let (nonce, _) = decode(&void.raw);
    assert_eq!(nonce, 0, "the payment's nonce");
    assert_eq!(
        f.chain.payments.lock().unwrap().get(&void.hash),
        Some(&Payment::Native {
            to: HOT.into(),
            amount: Amount::ZERO
        }),
        "nothing, to the hot wallet itself"
    );
    assert_eq!(
        books(&f).await,
        before,
        "nothing moves before the void is final"
    );
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 6, 5_000).await;
    assert_eq!(done.status, OutStatus::Failed);
    assert_eq!(done.included.as_ref().unwrap().hash, void.hash);
    assert_eq!(f.chain.mined_payments(), 1, "only the void");
    let w = f.withdrawal(id).await;
    assert_eq!(w.status, custody_core::withdrawal::WithdrawalStatus::Failed);
    assert_eq!(w.failure_reason.as_deref(), Some("cancelled by ops: stuck"));
    assert_eq!(w.tx_hash, None, "partners never see the void");
    released_with_fee(&before, &books(&f).await, 21_000_000_000_000);
    // The next payment goes out at the next nonce.
    *f.chain.min_price.lock().unwrap() = 0;
    let next = f.create().await;
    f.advance(1_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(next).await.nonce, Some(1));
}

#[tokio::test]
async fn a_cancelled_payment_whose_own_attempt_is_mined_instead_is_paid() {
    let f = Fixture::new();
    let id = f.create().await;
    let before = books(&f).await;
    f.b.round().await.unwrap();
    let original = f.get(id).await.attempts[0].clone();
    request_cancel(&f, id).await.unwrap();
    // A producer took the original before it saw the void.
    f.chain.mine();
    f.advance(1_000);
    f.b.round().await.unwrap();
    let out = f.get(id).await;
    assert_eq!(out.status, OutStatus::Included);
    assert_eq!(out.attempts.len(), 1, "nothing to void: it is in a block");
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 6, 5_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(done.included.unwrap().hash, original.hash);
    let w = f.withdrawal(id).await;
    assert_eq!(
        w.status,
        custody_core::withdrawal::WithdrawalStatus::Confirmed
    );
    let after = books(&f).await;
    assert_ne!(after, before, "settled");
    // Settled, not released: the user paid, nothing pending remains.
    for (key, a) in &after {
        if let Some(a) = a {
            assert_eq!(a.debits_pending, Amount::ZERO, "{key}");
        }
    }
    let alice = |b: &[(String, Option<custody_core::ledger::AccountBalances>)]| {
        b.iter()
            .find(|(k, _)| k.contains("alice") && k.contains("BNB"))
            .and_then(|(_, a)| *a)
            .unwrap()
    };
    assert!(
        alice(&after).debits_posted > alice(&before).debits_posted,
        "paid"
    );
    // Once in a block, a cancel is refused (409): it is paid once final.
    let refused = request_cancel(&f, id).await.unwrap_err();
    assert!(
        matches!(refused, CoreError::Refused(r) if r.code == custody_core::error::ErrorCode::ValidationFailed)
    );
}

#[tokio::test]
async fn a_cancel_of_a_payment_that_cannot_be_priced_fails_it_at_once_without_a_nonce() {
    let f = Fixture::new();
    let id = f.create().await;
    let before = books(&f).await;
    *f.chain.price_refusal.lock().unwrap() = Some("execution reverted: frozen".into());
    f.b.round().await.unwrap();
    assert_eq!(f.get(id).await.status, OutStatus::Built);
    let unknown = write(f.b.store.as_ref(), move |tx| {
        custody_core::outgoing::request_cancel(
            tx,
            Uuid::new_v4(),
            "ops",
            Uuid::from_u128(7),
            "x",
            Timestamp::from_unix_millis(T0),
        )
    })
    .await
    .unwrap_err();
    assert!(
        matches!(unknown, CoreError::Refused(r) if r.code == custody_core::error::ErrorCode::NotFound)
    );
    request_cancel(&f, id).await.unwrap();
    f.advance(16_000);
    f.b.round().await.unwrap();
    let out = f.get(id).await;
    assert_eq!((out.status, out.nonce), (OutStatus::Failed, None));
    assert!(f.chain.broadcasts.lock().unwrap().is_empty());
    assert_eq!(next_nonce(&f, id).await, None, "no nonce taken");
    released_with_fee(&before, &books(&f).await, 0);
    let again = request_cancel(&f, id).await.unwrap_err();
    assert!(
        matches!(again, CoreError::Refused(r) if r.code == custody_core::error::ErrorCode::ValidationFailed),
        "already failed: 422"
    );
}

#[tokio::test]
async fn the_nonce_allocator_moves_forward_when_the_chain_is_ahead() {
    let f = Fixture::new();
    let first = f.create().await;
    f.b.round().await.unwrap();
    assert_eq!(f.get(first).await.nonce, Some(0));
    f.chain.mine();
    f.chain.empty_blocks(3);
    f.rounds_until_done(first, 4, 5_000).await;
    // The key sent 5 more elsewhere (or a backup was restored): the chain counts 6.
    *f.chain.confirmed.lock().unwrap() = Some(6);
    let next = f.create().await;
    f.advance(1_000);
    f.b.round().await.unwrap();
    let out = f.get(next).await;
    assert_eq!(out.nonce, Some(6), "not the spent nonce 1");
    assert_eq!(out.status, OutStatus::Sent);
    let alerts = alerts_of(&f, "nonce_resynced").await;
    assert_eq!(alerts.len(), 1);
    assert_eq!(alerts[0].severity, "warning");
    // A chain behind the allocator (a lagging node) moves nothing.
    *f.chain.confirmed.lock().unwrap() = Some(2);
    let third = f.create().await;
    f.advance(1_000);
    f.b.round().await.unwrap();
    assert_eq!(f.get(third).await.nonce, Some(7));
    assert_eq!(alerts_of(&f, "nonce_resynced").await.len(), 1);
}

/// A cancel's void moves no money: a switch turned on while it waits (refused, or stored and
/// not yet sent) does not hold it, or the nonce and every later payment would stay stuck.
#[tokio::test]
async fn a_void_waiting_to_be_sent_is_not_held_by_a_switch() {
    let f = Fixture::new();
    let id = f.create().await;
    let before = books(&f).await;
    // The node refuses every bid for now: the payment, then its void.
    *f.chain.min_price.lock().unwrap() = 1_000_000_000_000;
    f.b.round().await.unwrap();
    request_cancel(&f, id).await.unwrap();
    f.advance(1_000);
    f.b.round().await.unwrap();
    let voiding = f.get(id).await;
    let void = voiding.attempts.last().unwrap().clone();
    assert!(void.void && void.sent_at.is_none(), "{void:?}");
    let now = f.clock.now();
    write(f.b.store.as_ref(), move |tx| {
        set_control(
            tx,
            Uuid::new_v4(),
            "ops",
            "kill_switch.withdrawals",
            true,
            "incident",
            now,
        )
    })
    .await
    .unwrap();
    // The node takes it now: it goes out despite the switch.
    *f.chain.min_price.lock().unwrap() = 0;
    f.advance(16_000);
    f.b.round().await.unwrap();
    let sent = f.get(id).await;
    let last = sent.attempts.last().unwrap();
    assert!(last.void, "still the void");
    assert!(last.sent_at.is_some(), "sent: {sent:?}");
    f.chain.mine();
    f.chain.empty_blocks(3);
    let done = f.rounds_until_done(id, 6, 5_000).await;
    assert_eq!(done.status, OutStatus::Failed);
    assert_eq!(f.chain.mined_payments(), 1, "only the void");
    let fee = done.included.as_ref().unwrap().fee_native.units();
    assert!(fee > 0);
    released_with_fee(&before, &books(&f).await, fee);
}

/// Another instance holds the hot wallet's signing lock (issue 31, F13).
struct HeldElsewhere;

#[async_trait]
impl custody_core::ports::Exclusive for HeldElsewhere {
    async fn hold(&self, _work: &str) -> bool {
        false
    }
}

/// Issue 31, F13: two instances must not each pass the funds check of one hot wallet and
/// sign what it covers only once. An instance that does not hold the wallet's signing lock
/// signs nothing new, even for a payment it has claimed; the one that holds it signs within
/// what the wallet covers, and the other payment waits for funds.
#[tokio::test]
async fn only_the_instance_holding_the_wallets_lock_signs_for_it() {
    let f = Fixture::new();
    let (first, second) = (f.create().await, f.create().await);
    let before = books(&f).await;
    // The wallet covers one payment (5 units and its fee at most), not two.
    *f.chain.balance.lock().unwrap() = 5 + 21_000 * 1_000_000_000;
    let other = Broadcaster {
        network: Network::Bsc,
        sender: Arc::clone(&f.chain) as Arc<dyn ChainSender>,
        signer: Arc::clone(&f.b.signer),
        store: Arc::clone(&f.b.store),
        clock: Arc::clone(&f.b.clock),
        entropy: Arc::new(OsEntropy),
        policy: f.b.policy,
        poll_interval: f.b.poll_interval,
        lease: Duration::from_millis(1),
        batch: 16,
        native: f.b.native.clone(),
        exclusive: Arc::new(HeldElsewhere),
    };
    // The other instance claims both payments: it signs neither.
    other.round().await.unwrap();
    for id in [first, second] {
        assert!(
            f.get(id).await.attempts.is_empty(),
            "nothing signed without the lock"
        );
    }
    assert!(f.chain.broadcasts.lock().unwrap().is_empty());
    // The lock's holder signs what the wallet covers: one payment.
    f.advance(60_000);
    f.b.round().await.unwrap();
    let attempts = f.get(first).await.attempts.len() + f.get(second).await.attempts.len();
    assert_eq!(attempts, 1, "one payment signed");
    assert_eq!(f.chain.broadcasts.lock().unwrap().len(), 1);
    assert_eq!(books(&f).await, before, "nothing settled yet");
}

#[tokio::test]
async fn a_cancelled_payment_whose_nonce_another_transaction_took_fails_and_releases_its_hold() {
    let f = Fixture::new();
    let id = f.create().await;
    let before = books(&f).await;
    f.b.round().await.unwrap();
    let sent = f.get(id).await;
    assert_eq!((sent.nonce, sent.status), (Some(0), OutStatus::Sent));
    // The key signed another transaction at nonce 0 elsewhere; the node dropped ours.
    f.chain.take_nonce_elsewhere(0);
    f.chain.drop_pool();
    // Replaced after a minute: the node answers "nonce too low", and it stays stuck.
    f.advance(61_000);
    f.b.round().await.unwrap();
    for _ in 0..3 {
        f.advance(3_000);
        f.b.round().await.unwrap();
    }
    let stuck = f.get(id).await;
    assert!(!stuck.status.is_terminal());
    assert_eq!(
        stuck.latest().unwrap().last_answer,
        Some(BroadcastOutcome::NonceUsed)
    );
    assert_eq!(alerts_of(&f, "outgoing_stuck").await.len(), 1);
    request_cancel(&f, id).await.unwrap();
    // The taking transaction is not final yet (confirmations 3): nothing is decided.
    f.advance(1_000);
    f.b.round().await.unwrap();
    assert!(!f.get(id).await.status.is_terminal());
    f.chain.empty_blocks(2);
    let done = f.rounds_until_done(id, 3, 61_000).await;
    assert_eq!(done.status, OutStatus::Failed);
    assert!(done.included.is_none());
    let w = f.withdrawal(id).await;
    assert_eq!(w.status, custody_core::withdrawal::WithdrawalStatus::Failed);
    assert!(
        w.failure_reason
            .as_deref()
            .is_some_and(|r| r.contains("nonce 0") && r.contains("taken")),
        "{:?}",
        w.failure_reason
    );
    assert_eq!(f.chain.mined_payments(), 0, "nothing of ours was mined");
    released_with_fee(&before, &books(&f).await, 0);
}

#[tokio::test]
async fn a_cancelled_token_payment_whose_receipt_shows_no_transfer_fails_with_its_fee_booked() {
    let f = Fixture::new();
    *f.chain.token_balance.lock().unwrap() = 1_000;
    let id = f.create_of("USDT").await;
    let before = books(&f).await;
    f.advance(16_000);
    f.b.round().await.unwrap();
    f.chain.hide_transfers.store(true, Ordering::SeqCst);
    f.chain.mine();
    f.chain.empty_blocks(3);
    f.advance(61_000);
    f.b.round().await.unwrap();
    assert_eq!(alerts_of(&f, "outgoing_stuck").await.len(), 1);
    assert!(f.get(id).await.included.is_none());
    // An operator checked the chain: nothing reached the destination.
    request_cancel(&f, id).await.unwrap();
    let done = f.rounds_until_done(id, 4, 61_000).await;
    assert_eq!(done.status, OutStatus::Failed);
    assert!(
        done.failure_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("cancelled by ops: stuck") && r.contains("no Transfer")),
        "{:?}",
        done.failure_reason
    );
    assert_eq!(
        f.withdrawal(id).await.status,
        custody_core::withdrawal::WithdrawalStatus::Failed
    );
    // The hold (USDT amount and cost) released; the gas it burned booked in BNB.
    released_with_fee(&before, &books(&f).await, 21_000_000_000_000);
}

#[tokio::test]
async fn a_refused_void_is_sent_again_not_outbid_until_the_cap() {
    let f = Fixture::new();
    let id = f.create().await;
    f.b.round().await.unwrap();
    assert_eq!(f.get(id).await.attempts.len(), 1);
    request_cancel(&f, id).await.unwrap();
    // The node now refuses anything under 5 gwei while quoting 1 gwei: every void is refused.
    *f.chain.min_price.lock().unwrap() = 5_000_000_000;
    for _ in 0..6 {
        f.advance(61_000);
        f.b.round().await.unwrap();
    }
    let out = f.get(id).await;
    assert_eq!(
        out.attempts.len(),
        2,
        "one void, sent again: {:?}",
        out.attempts
    );
    assert!(out.attempts[1].void);
    assert_eq!(
        out.attempts[1].bid,
        custody_core::outgoing::Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1_120_000_000
        }
    );
    let void_sends = f
        .chain
        .broadcasts
        .lock()
        .unwrap()
        .iter()
        .filter(|h| **h == out.attempts[1].hash)
        .count();
    assert!(void_sends >= 3, "sent again: {void_sends}");
    // The node's price rises: a new void at it (refused too); then it falls and rises again:
    // never under the refused void, so its bytes are sent again, never signed twice.
    *f.chain.node_price.lock().unwrap() = 1_500_000_000;
    for price in [1_500_000_000, 1_000_000_000, 1_500_000_000] {
        *f.chain.node_price.lock().unwrap() = price;
        f.advance(61_000);
        f.b.round().await.unwrap();
    }
    let out = f.get(id).await;
    assert_eq!(out.attempts.len(), 3, "{:?}", out.attempts);
    assert_eq!(
        out.attempts[2].bid,
        custody_core::outgoing::Bid::Gas {
            gas_limit: 21_000,
            gas_price_wei: 1_500_000_000
        }
    );
    let global = read(f.b.store.as_ref(), |tx| {
        Ok(restricted(
            tx,
            custody_core::invariants::GLOBAL_KILL_SWITCH,
        )?)
    })
    .await
    .unwrap();
    assert!(!global, "no invariant broke");
}

#[tokio::test]
async fn a_payment_another_instance_signed_since_the_funds_check_makes_it_check_again() {
    let f = Fixture::new();
    let first = f.create().await;
    let other = f.create().await;
    // Another instance signs `other` (nonce 7, stored, not yet sent) while this one builds
    // `first`: its funds check did not count it.
    let mut signed = f.get(other).await;
    signed.nonce = Some(7);
    let raw = serde_json::to_vec(&serde_json::json!({
        "nonce": 7, "gas_price": "1000000000", "payment": signed.payment,
    }))
    .unwrap();
    signed
        .add_attempt(
            custody_core::outgoing::Attempt {
                hash: "ab".repeat(32),
                raw,
                bid: custody_core::outgoing::Bid::Gas {
                    gas_limit: 21_000,
                    gas_price_wei: 1_000_000_000,
                },
                expires_at_ms: None,
                signed_at: f.clock.now(),
                sent_at: None,
                last_answer: None,
                plan: None,
                reference_block: None,
                void: false,
            },
            f.clock.now(),
        )
        .unwrap();
    *f.chain.signed_elsewhere_on_build.lock().unwrap() = Some((Arc::clone(&f.b.store), signed));
    let step = f.b.step(f.get(first).await).await;
    assert!(step.is_ok(), "{step:?}");
    let held = f.get(first).await;
    assert_eq!(
        (held.attempts.len(), held.nonce),
        (0, None),
        "nothing stored, no nonce taken"
    );
    assert!(alerts_of(&f, "outgoing_stuck").await.is_empty());
    assert!(alerts_of(&f, "hot_wallet_insufficient").await.is_empty());
    assert!(
        f.chain.broadcasts.lock().unwrap().is_empty(),
        "nothing sent"
    );
    // Checked again with the other counted (the wallet covers both): signed and sent.
    f.advance(16_000);
    let step = f.b.step(f.get(first).await).await;
    assert!(step.is_ok(), "{step:?}");
    let sent = f.get(first).await;
    assert_eq!(sent.attempts.len(), 1);
    assert_eq!(sent.status, OutStatus::Sent);
}

#[tokio::test]
async fn a_cancelled_payment_whose_own_attempt_holds_the_nonce_is_never_failed_as_taken() {
    let f = Fixture::new();
    let id = f.create().await;
    let before = books(&f).await;
    f.b.round().await.unwrap();
    let first = f.get(id).await.attempts[0].hash.clone();
    // Mined and deep, but this endpoint's lookups do not know it (a lagging index), and the
    // node answers "nonce too low" to what follows.
    f.chain.mine();
    f.chain.empty_blocks(3);
    f.chain.lookups_blind.store(true, Ordering::SeqCst);
    request_cancel(&f, id).await.unwrap();
    for _ in 0..4 {
        f.advance(61_000);
        f.b.round().await.unwrap();
        assert_ne!(
            f.get(id).await.status,
            OutStatus::Failed,
            "paid, never failed"
        );
    }
    assert_eq!(
        books(&f).await,
        before,
        "the hold neither released nor settled"
    );
    // The index catches up: paid.
    f.chain.lookups_blind.store(false, Ordering::SeqCst);
    let done = f.rounds_until_done(id, 4, 61_000).await;
    assert_eq!(done.status, OutStatus::Final);
    assert_eq!(done.included.unwrap().hash, first);
    assert_eq!(f.chain.mined_payments(), 1);
}
