//! Store conformance suites: the observable semantics of every repository trait and of the
//! [`Store`] contract itself, written once and run against every store ([`MemoryStore`] in this
//! crate's tests, `SqliteStore` and `PgStore` in theirs).
//!
//! Each suite is an `async fn x_suite(make: impl Fn() -> Arc<dyn Store>)` that runs its cases
//! one after the other, each on a fresh, empty store from `make`, and panics on the first
//! failure (the case's name is printed before it runs). The suites need no runtime of their
//! own: drive them with [`block_on`](super::block_on), or from a Tokio test for a store whose
//! futures need Tokio. Concurrent jobs are submitted together ([`join_all`](super::join_all)),
//! so a store that batches them (group commit) is exercised as such.
//!
//! The ledger cases run on a [`LedgerTarget`]: a store ([`ledger_suite`]) or a bare
//! [`MemoryLedger`](crate::MemoryLedger) ([`memory_ledger_suite`]), so the reference
//! ledger and every store are held to the same cases.
//!
//! [`MemoryStore`]: super::MemoryStore

mod admin;
mod chain;
mod credentials;
mod deposit;
mod idempotency;
mod ledger;
mod outgoing;
mod reconciliation;
mod swap;
mod sweep;
mod transactions;
mod wallet;
mod wallet_migration;
mod webhook;
mod withdrawal;

use std::future::Future;
use std::sync::Arc;

use uuid::Uuid;

use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::network::Network;
use custody_core::ports::store::{self, ReadTx, Store, WriteTx};
use custody_core::time::Timestamp;
use custody_core::wallet::Wallet;

pub use admin::admin_suite;
pub use chain::chain_suite;
pub use credentials::credentials_suite;
pub use deposit::deposit_suite;
pub use idempotency::idempotency_suite;
pub use ledger::{
    ledger_suite, memory_ledger_suite, BareLedger, LedgerRead, LedgerTarget, LedgerWrite,
    StoreLedger,
};
pub use outgoing::outgoing_suite;
pub use reconciliation::reconciliation_suite;
pub use swap::swap_suite;
pub use sweep::sweep_suite;
pub use transactions::transactions_suite;
pub use wallet::wallet_suite;
pub use wallet_migration::wallet_migration_suite;
pub use webhook::webhook_suite;
pub use withdrawal::withdrawal_suite;

/// Every suite, in the order of the list above.
pub async fn all_suites(make: impl Fn() -> Arc<dyn Store>) {
    transactions_suite(&make).await;
    credentials_suite(&make).await;
    idempotency_suite(&make).await;
    webhook_suite(&make).await;
    admin_suite(&make).await;
    ledger_suite(&make).await;
    wallet_suite(&make).await;
    wallet_migration_suite(&make).await;
    deposit_suite(&make).await;
    chain_suite(&make).await;
    outgoing_suite(&make).await;
    withdrawal_suite(&make).await;
    swap_suite(&make).await;
    sweep_suite(&make).await;
    reconciliation_suite(&make).await;
}

/// Announces a case, then runs it: on a failure, the last name printed is the failing case.
async fn run_case(name: &str, case: impl Future<Output = ()>) {
    eprintln!("conformance case {name}");
    case.await;
}

/// `suite!(name { case, ... })` defines `pub async fn name(make)` running each case (an
/// `async fn(Arc<dyn Store>)`) on a fresh store.
macro_rules! suite {
    ($(#[$doc:meta])* $suite:ident { $($case:ident),* $(,)? }) => {
        $(#[$doc])*
        pub async fn $suite(make: impl Fn() -> std::sync::Arc<dyn ::custody_core::ports::store::Store>) {
            $(
                super::run_case(
                    concat!(stringify!($suite), "::", stringify!($case)),
                    $case(make()),
                )
                .await;
            )*
        }
    };
}
use suite;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms)
}

fn uid(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

/// One write job of repository calls.
async fn w<T: Send + 'static>(
    store: &dyn Store,
    mut f: impl FnMut(&mut dyn WriteTx) -> Result<T, PortError> + Send + 'static,
) -> CoreResult<T> {
    store::write(store, move |tx| Ok(f(tx)?)).await
}

/// One read job of repository calls, which must succeed.
async fn r<T: Send + 'static>(
    store: &dyn Store,
    mut f: impl FnMut(&mut dyn ReadTx) -> Result<T, PortError> + Send + 'static,
) -> T {
    store::read(store, move |tx| Ok(f(tx)?))
        .await
        .unwrap_or_else(|e| panic!("a read job failed: {e}"))
}

/// Asserts that a job failed with a port error (a constraint, a missing row).
#[track_caller]
fn assert_port_error<T: std::fmt::Debug>(result: CoreResult<T>) {
    match result {
        Err(CoreError::Port(_)) => {}
        other => panic!("expected a port error, got {other:?}"),
    }
}

/// A wallet row (no derivation involved).
/// A tenant id, valid by construction in these suites.
fn tid(s: &str) -> custody_core::tenant::TenantId {
    custody_core::tenant::TenantId::parse(s).expect("a valid tenant id")
}

/// A real address of `network` named by a short tag ("0xA11CE"): the tag's bytes, padded to 20.
/// The same tag gives the same key's address on both networks.
fn addr(network: Network, tag: &str) -> String {
    let mut bytes = [0u8; 20];
    for (b, t) in bytes.iter_mut().zip(tag.bytes()) {
        *b = t;
    }
    match network {
        Network::Bsc => custody_core::address::BscAddress::from_bytes(bytes).to_string(),
        Network::Tron => custody_core::address::TronAddress::from_bytes(bytes).to_string(),
    }
}

/// [`addr`] as the typed address the ports take.
fn chain_addr(network: Network, tag: &str) -> custody_core::chain::ChainAddress {
    custody_core::chain::ChainAddress::parse(network, &addr(network, tag)).expect("a real address")
}

/// A transaction hash named by a short hex tag ("aa01"), zero-padded to 32 bytes.
fn hash(tag: &str) -> custody_core::chain::TxHash {
    custody_core::chain::TxHash::parse(&format!("{tag:0>64}")).expect("hex tag")
}

fn wallet_row(n: u128, tenant: &str, user: &str, network: Network, address: &str) -> Wallet {
    Wallet {
        id: uid(n),
        tenant: tid(tenant),
        external_user_id: user.to_owned(),
        network,
        address: addr(network, address),
        account: 0,
        index: u32::try_from(n % 1_000_000).unwrap_or(0),
        created_at: at(1_000),
        previous_addresses: Vec::new(),
    }
}

/// The rows of a first page, which always answers (it names no cursor).
fn rows<T>(page: custody_core::page::Paged<T>) -> Vec<T> {
    page.expect("a first page names no cursor")
}

/// Pages through a listing `limit` rows at a time, each page starting after the last row of
/// the previous one, and checks the keyset contract on the way: the pages joined are the
/// whole listing read at once (no row twice, none missing, same order), the last page is the
/// first one shorter than `limit` or empty, and a cursor naming no row is `None`.
async fn check_paging<T: Send + 'static>(
    s: &dyn Store,
    limit: usize,
    list: fn(
        &mut dyn ReadTx,
        custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<T>, PortError>,
    id: fn(&T) -> Uuid,
) {
    use custody_core::page::Page;
    let all: Vec<Uuid> = r(s, move |tx| list(tx, Page::first(usize::MAX)))
        .await
        .map(|rows| rows.iter().map(id).collect())
        .expect("a first page");
    assert!(
        all.len() > limit,
        "the case writes more rows than one page holds"
    );
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = Page {
            limit,
            starting_after: after,
        };
        let ids: Vec<Uuid> = r(s, move |tx| list(tx, page))
            .await
            .expect("the cursor names a listed row")
            .iter()
            .map(id)
            .collect();
        assert!(ids.len() <= limit);
        paged.extend_from_slice(&ids);
        match ids.last() {
            Some(&last) if ids.len() == limit => after = Some(last),
            _ => break,
        }
    }
    assert_eq!(paged, all, "paging yields the listing, each row once");
    let unknown = r(s, move |tx| list(tx, Page::after(limit, uid(0xdead_beef))))
        .await
        .map(|rows| rows.len());
    assert_eq!(
        unknown, None,
        "an unknown cursor is refused, not an empty page"
    );
}
