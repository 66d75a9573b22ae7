//! Ports of a quote whose calls a test states in advance (mockall): a call where none may be
//! fails the test. Shared by the withdrawal and swap quoting tests.

use async_trait::async_trait;

use uuid::Uuid;

use custody_core::amount::Amount;
use custody_core::error::PortError;
use custody_core::network::Network;
use custody_core::ports::dex::DexRouter;
use custody_core::ports::sender::{
    BlockListing, BroadcastOutcome, BuildRequest, ChainSender, FeeBid, FeeEstimate, Inclusion,
    Payment, SignedTx, TxLookup, UnsignedTx,
};
use custody_core::ports::signer::RecoverableSignature;
use custody_core::ports::store::write;
use custody_core::time::Timestamp;
use custody_core::withdrawal::FeePolicy;
use custody_testkit::{block_on, CountingEntropy, ManualClock, MemoryStore};

/// The one call of the chain a quote may make.
#[mockall::automock]
pub(crate) trait Pricing {
    fn price(&self, from: &str, payment: &Payment) -> Result<FeeEstimate, PortError>;
}

mockall::mock! {
    pub(crate) Router {}
    #[async_trait]
    impl DexRouter for Router {
        fn router_address(&self) -> String;
        async fn amounts_out(
            &self,
            amount_in: Amount,
            path: &[String],
        ) -> Result<Vec<Amount>, PortError>;
    }
}

/// A chain whose pricing is the mock's; any other call fails the test, as no quote makes one.
pub(crate) struct Chain(pub(crate) MockPricing);

impl Chain {
    /// A chain no test expects a call of.
    pub(crate) fn silent() -> Self {
        Chain(MockPricing::new())
    }
}

/// What a node answers for a payment's gas: `native` wei expected.
pub(crate) fn estimate(native: u128) -> FeeEstimate {
    FeeEstimate {
        expected_native: Amount::from_units(native),
        max_native: Amount::from_units(2 * native),
        bid: FeeBid::Gas {
            gas_limit: 100_000,
            gas_price_wei: 1_000_000_000,
        },
        plan: None,
    }
}

#[async_trait]
impl ChainSender for Chain {
    fn network(&self) -> Network {
        Network::Bsc
    }
    async fn price(&self, from: &str, payment: &Payment) -> Result<FeeEstimate, PortError> {
        self.0.price(from, payment)
    }
    async fn confirmed_nonce(&self, _: &str) -> Result<Option<u64>, PortError> {
        unreachable!("a quote reads no nonce")
    }
    async fn final_transaction_at_nonce(
        &self,
        _: &str,
        _: u64,
        _: u32,
    ) -> Result<Option<String>, PortError> {
        unreachable!("a quote reads no nonce")
    }
    async fn build(&self, _: &BuildRequest) -> Result<UnsignedTx, PortError> {
        unreachable!("a quote builds nothing")
    }
    fn assemble(&self, _: &UnsignedTx, _: &RecoverableSignature) -> Result<SignedTx, PortError> {
        unreachable!("a quote signs nothing")
    }
    async fn broadcast(&self, _: &SignedTx) -> BroadcastOutcome {
        unreachable!("a quote sends nothing")
    }
    async fn lookup(&self, _: &str) -> Result<TxLookup, PortError> {
        unreachable!("a quote looks nothing up")
    }
    async fn head(&self) -> Result<(u64, i64), PortError> {
        unreachable!("a quote reads no head")
    }
    async fn block_time(&self, _: u64) -> Result<Option<i64>, PortError> {
        unreachable!("a quote reads no block")
    }
    async fn block_listing(&self, _: u64) -> Result<Option<BlockListing>, PortError> {
        unreachable!("a quote reads no block")
    }
    async fn inclusion_in_block(&self, _: &str, _: u64) -> Result<Option<Inclusion>, PortError> {
        unreachable!("a quote reads no block")
    }
    async fn balances(
        &self,
        _: &str,
        _: Option<&str>,
    ) -> Result<(Amount, Option<Amount>), PortError> {
        unreachable!("a quote reads no balance")
    }
}

/// A fee policy that charges nothing beyond the network cost, for amounts of 10 to 10^24 units.
pub(crate) fn policy() -> FeePolicy {
    FeePolicy {
        min_amount_units: Amount::from_units(10),
        max_amount_units: Amount::from_units(10_u128.pow(24)),
        markup_bps: 0,
        service_fee_units: Amount::ZERO,
        service_fee_bps: 0,
        spread_bps: 0,
    }
}

/// Turns the control `key` on or off, as an operator does.
pub(crate) fn switch(store: &MemoryStore, key: &'static str, on: bool) {
    block_on(write(store, move |tx| {
        custody_core::admin::set_control(
            tx,
            Uuid::new_v4(),
            "ops",
            key,
            on,
            "test",
            Timestamp::from_unix_millis(0),
        )
    }))
    .unwrap();
}

/// What every quote test runs on: an empty store, a clock standing still, counting entropy.
pub(crate) struct World {
    pub(crate) store: MemoryStore,
    pub(crate) clock: ManualClock,
    pub(crate) entropy: CountingEntropy,
}

impl World {
    pub(crate) fn new() -> Self {
        World {
            store: MemoryStore::new(),
            clock: ManualClock::new(Timestamp::from_unix_millis(1)),
            entropy: CountingEntropy::new(1),
        }
    }
}
