//! Embedding `custody-core` in another Rust service, with the embedded SQLite store: the
//! service owns the process, the runtime and the chain connection; the core decides, inside one
//! store transaction per command, and the store keeps the books.
//!
//! What it does, each step one store transaction:
//! 1. opens a store file and loads a signer from a mnemonic (the HD keys of every address);
//! 2. gives two users of tenant `acme` a BSC deposit address each;
//! 3. hands the core a block in which 1 BNB reaches alice's address (what the service's own
//!    chain scanner saw), then two more blocks: at 3 confirmations the deposit is credited;
//! 4. moves 0.25 BNB from alice to bob on the ledger (an internal transfer);
//! 5. reads both balances and checks that the books balance.
//!
//! Run it with `cargo run -p custody-examples --example embed_sqlite`.

use std::sync::Arc;

use custody_core::chain::{ChainAddress, TxHash};
use custody_core::deposit::{apply_block, Applied, PipelineSettings, WatchSet};
use custody_core::keys::{HdSigner, Mnemonic};
use custody_core::ledger::{self, UserAccount};
use custody_core::ports::chain::{BlockHeader, ObservedTransfer, ScannedBlock};
use custody_core::ports::clock::{new_uuid, Entropy};
use custody_core::ports::store::{read, write};
use custody_core::ports::{Signer, Store};
use custody_core::transfer::{self, TransferIds, TransferRequest};
use custody_core::wallet::create_wallet;
use custody_core::{Amount, AssetCatalog, AssetId, Network, TenantId, Timestamp};
use custody_store_sqlite::{SqliteStore, StoreOptions};

const ONE_BNB: u128 = 1_000_000_000_000_000_000;

/// The service's source of record ids: any source of random bytes will do.
struct Ids;

impl Entropy for Ids {
    fn fill(&self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(16) {
            chunk.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..chunk.len()]);
        }
    }
}

fn block(number: u64, transfers: Vec<ObservedTransfer>) -> ScannedBlock {
    let hash = |n: u64| format!("{n:064x}");
    ScannedBlock {
        header: BlockHeader {
            number,
            hash: hash(number),
            parent_hash: hash(number - 1),
            timestamp_ms: 1_800_000_000_000 + i64::try_from(number).unwrap() * 3_000,
        },
        transfers,
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(
        &dir.path().join("custody.db"),
        StoreOptions::default(),
    )?);
    let phrase = "abandon abandon abandon abandon abandon abandon abandon abandon abandon \
                  abandon abandon about";
    let signer: Arc<dyn Signer> =
        Arc::new(HdSigner::from_seed(&Mnemonic::parse(phrase)?.to_seed())?);
    let entropy: Arc<dyn Entropy> = Arc::new(Ids);
    let tenant = TenantId::parse("acme")?;
    let now = Timestamp::from_unix_millis(1_800_000_000_000);

    // 2. A deposit address per user, derived from the signer's keys.
    let mut addresses = Vec::new();
    for user in ["alice", "bob"] {
        let (signer, tenant) = (Arc::clone(&signer), tenant.clone());
        let ids = [new_uuid(entropy.as_ref()), new_uuid(entropy.as_ref())];
        let created = write(store.as_ref(), move |tx| {
            create_wallet(tx, signer.as_ref(), ids, &tenant, user, Network::Bsc, now)
        })
        .await?;
        println!("{user}: deposit address {}", created.wallet.address);
        addresses.push(created.wallet.address);
    }

    // 3. The blocks the service's scanner read: 1 BNB to alice, then two empty blocks.
    let watch = Arc::new(WatchSet::new());
    watch.extend(Network::Bsc, addresses.clone());
    let settings = Arc::new(PipelineSettings {
        network: Network::Bsc,
        required_confirmations: 3,
        blocks_kept: 100,
        hot_wallets: Vec::new(),
    });
    let deposit = ObservedTransfer {
        tx_hash: TxHash::parse(&"d1".repeat(32))?,
        log_index: None,
        asset_code: "BNB".into(),
        from: ChainAddress::parse(Network::Bsc, "0x00000000000000000000000000000000000000F0")?,
        to: ChainAddress::parse(Network::Bsc, &addresses[0])?,
        amount: Amount::from_units(ONE_BNB),
        succeeded: true,
    };
    let blocks = [
        block(100, vec![deposit]),
        block(101, Vec::new()),
        block(102, Vec::new()),
    ];
    for scanned in blocks {
        let (settings, watch, entropy) = (
            Arc::clone(&settings),
            Arc::clone(&watch),
            Arc::clone(&entropy),
        );
        let catalog = AssetCatalog::mainnet();
        let applied = write(store.as_ref(), move |tx| {
            apply_block(
                tx,
                entropy.as_ref(),
                &settings,
                &catalog,
                &watch,
                &scanned,
                now,
            )
        })
        .await?;
        let Applied::Block(outcome) = applied else {
            return Err("the block does not follow the last one".into());
        };
        println!(
            "block applied: {} detected, {} confirmed",
            outcome.detected, outcome.confirmed
        );
    }

    // 4. Alice pays bob 0.25 BNB on the ledger.
    let request = TransferRequest {
        tenant: tenant.clone(),
        sender: "alice".into(),
        recipient: "bob".into(),
        network: Network::Bsc,
        asset: "BNB".into(),
        amount: Amount::from_units(ONE_BNB / 4),
    };
    let ids = TransferIds {
        transfer: new_uuid(entropy.as_ref()),
        ledger_tx: new_uuid(entropy.as_ref()),
        sender_event: new_uuid(entropy.as_ref()),
        recipient_event: new_uuid(entropy.as_ref()),
    };
    let done = write(store.as_ref(), move |tx| {
        transfer::execute(tx, ids, &request, now)
    })
    .await?;
    println!("transfer {}: {}", done.id, done.status);

    // 5. The balances, and the books.
    let bnb = AssetId::new(Network::Bsc, "BNB");
    let (balances, books) = read(store.as_ref(), move |tx| {
        let accounts: Vec<UserAccount> = ["alice", "bob"]
            .iter()
            .map(|u| UserAccount::new(tenant.clone(), (*u).to_owned(), bnb.clone()))
            .collect();
        let balances = ledger::user_balances(tx, &accounts)
            .map_err(|e| custody_core::CoreError::Invariant(e.to_string()))?;
        let books = ledger::reconcile(tx)?;
        Ok((balances, books))
    })
    .await?;
    println!(
        "alice: {} available; bob: {} available; books balanced: {}",
        balances[0].available, balances[1].available, books.balanced
    );
    assert_eq!(balances[0].available, Amount::from_units(ONE_BNB * 3 / 4));
    assert_eq!(balances[1].available, Amount::from_units(ONE_BNB / 4));
    assert!(books.balanced);
    Ok(())
}
