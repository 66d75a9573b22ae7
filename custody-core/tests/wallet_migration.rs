//! Wallet migrations on the memory store: which wallets move and where, the tenant's account,
//! the records and their states. (The deposit side: `tests/deposit.rs`.)

use std::sync::atomic::{AtomicU64, Ordering};

use custody_core::error::{CoreError, CoreResult, ErrorCode};
use custody_core::keys::derive_address;
use custody_core::network::Network;
use custody_core::ports::signer::Signer;
use custody_core::ports::store::{read, write};
use custody_core::tenant::TenantId;
use custody_core::time::Timestamp;
use custody_core::wallet::migration::*;
use custody_core::wallet::{create_wallet, Wallet};
use custody_testkit::{block_on, test_signer, MemoryStore};
use uuid::Uuid;

static NEXT_ID: AtomicU64 = AtomicU64::new(0);

const NOW: Timestamp = Timestamp::from_unix_millis(1_800_000_000_000);

fn tid(s: &str) -> TenantId {
    TenantId::parse(s).expect("a tenant id")
}

async fn wallet(
    store: &MemoryStore,
    n: u128,
    tenant: &str,
    user: &str,
    network: Network,
) -> Wallet {
    let (t, u) = (tid(tenant), user.to_owned());
    write(store, move |tx| {
        create_wallet(
            tx,
            &test_signer(),
            [Uuid::from_u128(n), Uuid::from_u128(1000 + n)],
            &t,
            &u,
            network,
            NOW,
        )
    })
    .await
    .unwrap()
    .wallet
}

async fn migrate(
    store: &MemoryStore,
    tenant: &str,
    network: Option<Network>,
    reason: &str,
) -> CoreResult<Vec<WalletMigration>> {
    let (t, reason) = (tid(tenant), reason.to_owned());
    write(store, move |tx| {
        // Distinct across calls: every record id is new.
        let mut ids =
            || Uuid::from_u128(5000 + u128::from(NEXT_ID.fetch_add(1, Ordering::Relaxed)));
        migrate_tenant(
            tx,
            &test_signer(),
            &mut ids,
            &t,
            network,
            "cli:ops",
            &reason,
            NOW,
        )
    })
    .await
}

async fn by_id(store: &MemoryStore, tenant: &str, id: Uuid) -> Wallet {
    let t = tid(tenant);
    read(store, move |tx| Ok(tx.wallet_by_id(&t, id)?))
        .await
        .unwrap()
        .expect("the wallet")
}

#[test]
fn a_tenants_wallets_of_a_network_move_under_a_new_account() {
    block_on(async {
        let store = MemoryStore::new();
        let alice = wallet(&store, 1, "acme", "alice", Network::Bsc).await;
        let bob = wallet(&store, 2, "acme", "bob", Network::Bsc).await;
        let alice_tron = wallet(&store, 3, "acme", "alice", Network::Tron).await;
        let carol = wallet(&store, 4, "beta", "carol", Network::Bsc).await;
        assert_eq!((alice.account, carol.account), (0, 1));

        let done = migrate(&store, "acme", Some(Network::Bsc), "  leaked backup ")
            .await
            .unwrap();
        assert_eq!(done.len(), 2);
        for (m, old) in done.iter().zip([&alice, &bob]) {
            assert_eq!((m.wallet_id, m.status), (old.id, MigrationStatus::Planned));
            assert_eq!((&m.old_address, m.old_path), (&old.address, old.path()));
            // A fresh account from the global allocator: after acme's 0 and beta's 1.
            assert_eq!(m.new_path.account, 2);
            assert_ne!(m.new_address, old.address);
            assert_eq!(m.reason, "leaked backup");
            let moved = by_id(&store, "acme", old.id).await;
            assert_eq!(
                (&moved.address, moved.path(), &moved.external_user_id),
                (&m.new_address, m.new_path, &old.external_user_id)
            );
            assert_eq!(moved.previous_addresses.len(), 1);
            assert_eq!(moved.previous_addresses[0].address, old.address);
            // The address is the one the seed gives at the new path.
            let (pubkey, chain_code) = test_signer()
                .external_chain_public_key(Network::Bsc, 2)
                .unwrap();
            let (derived, _) =
                derive_address(Network::Bsc, &pubkey, &chain_code, m.new_path.index).unwrap();
            assert_eq!(derived, m.new_address);
        }
        assert_eq!(
            (done[0].new_path.index, done[1].new_path.index),
            (0, 1),
            "indexes restart under the new account"
        );
        // Other networks and other tenants stay where they were.
        assert_eq!(by_id(&store, "acme", alice_tron.id).await, alice_tron);
        assert_eq!(by_id(&store, "beta", carol.id).await, carol);

        // Later wallets of the tenant are created under its new account.
        let dave = wallet(&store, 5, "acme", "dave", Network::Bsc).await;
        assert_eq!((dave.account, dave.index), (2, 2));
        let dave_tron = wallet(&store, 6, "acme", "dave", Network::Tron).await;
        assert_eq!((dave_tron.account, dave_tron.index), (2, 0));

        // The audit trail has the operator, the accounts and the reason.
        let audit = read(&store, |tx| {
            Ok(tx.list_audit(custody_core::page::Page::first(10))?)
        })
        .await
        .unwrap()
        .expect("a first page");
        assert_eq!(audit.len(), 1);
        let a = &audit[0];
        assert_eq!(
            (
                a.actor.as_str(),
                a.action.as_str(),
                a.target.as_str(),
                a.reason.as_str()
            ),
            ("cli:ops", "wallets.migrate", "tenant:acme", "leaked backup")
        );
        assert_eq!(a.old_value, Some(serde_json::json!({ "account": 0 })));
        assert_eq!(a.new_value.as_ref().unwrap()["account"], 2);

        // Migrated again: another fresh account; both earlier addresses stay the wallet's.
        let again = migrate(&store, "acme", Some(Network::Bsc), "drill")
            .await
            .unwrap();
        assert_eq!(again[0].new_path.account, 3);
        let moved = by_id(&store, "acme", alice.id).await;
        assert_eq!(moved.previous_addresses.len(), 2);
        assert_eq!(moved.previous_addresses[0].address, alice.address);
        let listed = read(&store, |tx| {
            Ok(tx.list_migrations(custody_core::page::Page::first(10))?)
        })
        .await
        .unwrap()
        .expect("a first page");
        assert_eq!(listed.len(), 5);
    });
}

#[test]
fn nothing_moves_without_wallets_or_without_a_reason() {
    block_on(async {
        let store = MemoryStore::new();
        let alice = wallet(&store, 1, "acme", "alice", Network::Bsc).await;
        assert!(migrate(&store, "acme", Some(Network::Tron), "r")
            .await
            .unwrap()
            .is_empty());
        assert!(migrate(&store, "nobody", None, "r")
            .await
            .unwrap()
            .is_empty());
        let refused = migrate(&store, "acme", None, "   ").await;
        assert!(
            matches!(&refused, Err(CoreError::Refused(r)) if r.code == ErrorCode::ValidationFailed),
            "{refused:?}"
        );
        assert_eq!(by_id(&store, "acme", alice.id).await, alice);
        let account = read(&store, |tx| Ok(tx.tenant_account(&tid("acme"))?))
            .await
            .unwrap();
        assert_eq!(account, Some(0));
        let audit = read(&store, |tx| {
            Ok(tx.list_audit(custody_core::page::Page::first(10))?)
        })
        .await
        .unwrap()
        .expect("a first page");
        assert!(audit.is_empty());
    });
}

#[test]
fn every_tenant_with_wallets_is_listed_once_in_creation_order() {
    block_on(async {
        let store = MemoryStore::new();
        wallet(&store, 1, "beta", "x", Network::Tron).await;
        wallet(&store, 2, "acme", "y", Network::Bsc).await;
        wallet(&store, 3, "beta", "z", Network::Bsc).await;
        let all = read(&store, |tx| Ok(tenants_with_wallets(tx, None)?))
            .await
            .unwrap();
        assert_eq!(all, [tid("beta"), tid("acme")]);
        let bsc = read(&store, |tx| {
            Ok(tenants_with_wallets(tx, Some(Network::Bsc))?)
        })
        .await
        .unwrap();
        assert_eq!(bsc, [tid("acme"), tid("beta")]);
    });
}

async fn observe_it(store: &MemoryStore, id: Uuid, seen: OldAddress) -> Option<MigrationStatus> {
    write(store, move |tx| observe(tx, id, &seen, NOW))
        .await
        .unwrap()
        .map(|m| m.status)
}

#[test]
fn a_migration_sweeps_until_the_old_address_is_empty() {
    block_on(async {
        let store = MemoryStore::new();
        wallet(&store, 1, "acme", "alice", Network::Bsc).await;
        wallet(&store, 2, "acme", "bob", Network::Bsc).await;
        wallet(&store, 3, "acme", "carol", Network::Bsc).await;
        let done = migrate(&store, "acme", None, "r").await.unwrap();
        let [a, b, c] = [done[0].id, done[1].id, done[2].id];
        let holds = || OldAddress::Holds("BNB 5 units above the sweep minimum of 1".into());

        assert_eq!(
            observe_it(&store, a, holds()).await,
            Some(MigrationStatus::Sweeping)
        );
        // Still holding: no change, no history step.
        assert_eq!(observe_it(&store, a, holds()).await, None);
        assert_eq!(
            observe_it(&store, a, OldAddress::Empty).await,
            Some(MigrationStatus::Completed)
        );
        // Finished is final.
        assert_eq!(observe_it(&store, a, holds()).await, None);
        let m = read(&store, move |tx| Ok(tx.migration_by_id(a)?))
            .await
            .unwrap()
            .unwrap();
        let steps: Vec<_> = m.history.iter().map(|s| s.status.as_str()).collect();
        assert_eq!(steps, ["planned", "sweeping", "completed"]);
        assert!(m.history[1].detail.contains("BNB"));

        // Nothing worth sweeping from the start: straight to completed.
        assert_eq!(
            observe_it(&store, b, OldAddress::Empty).await,
            Some(MigrationStatus::Completed)
        );
        // A key the seed no longer gives: failed, with the reason.
        assert_eq!(
            observe_it(&store, c, OldAddress::KeyLost("not in this seed".into())).await,
            Some(MigrationStatus::Failed)
        );
        let open = read(&store, |tx| Ok(tx.open_migrations(Network::Bsc)?))
            .await
            .unwrap();
        assert!(open.is_empty());
    });
}

#[test]
fn the_old_key_must_give_the_old_address() {
    block_on(async {
        let store = MemoryStore::new();
        wallet(&store, 1, "acme", "alice", Network::Bsc).await;
        let m = migrate(&store, "acme", None, "r").await.unwrap().remove(0);
        assert_eq!(old_key_available(&test_signer(), &m), Ok(()));
        // A record whose old address is not the seed's at its path (a seed replaced under
        // the service): named, so the migration can fail with it.
        let other = WalletMigration {
            old_address: m.new_address.clone(),
            ..m
        };
        let why = old_key_available(&test_signer(), &other).unwrap_err();
        assert!(why.contains("not in this seed"), "{why}");
    });
}

const ZOO_12: &str = "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong";

/// The test seed and, from account `first`, the zoo seed as generation 1.
fn two_seeds(first: u32) -> custody_core::keys::SeedSet {
    let keys = |phrase: &str| {
        custody_core::keys::HdKeys::from_mnemonic(
            &custody_core::keys::Mnemonic::parse(phrase).unwrap(),
        )
        .unwrap()
    };
    let mut set = custody_core::keys::SeedSet::new(keys(custody_testkit::MNEMONIC));
    set.add(1, first, keys(ZOO_12)).unwrap();
    set
}

fn zoo_address(network: Network, account: u32, index: u32) -> String {
    let signer = custody_core::keys::HdSigner::from_seed(
        &custody_core::keys::Mnemonic::parse(ZOO_12)
            .unwrap()
            .to_seed(),
    )
    .unwrap();
    let (k, c) = signer.external_chain_public_key(network, account).unwrap();
    derive_address(network, &k, &c, index).unwrap().0
}

fn zoo_record(
    generation: u32,
    first_account: u32,
    fingerprint: &str,
) -> custody_core::wallet::seeds::SeedRecord {
    custody_core::wallet::seeds::SeedRecord {
        generation,
        first_account,
        sealed_mnemonic: vec![0xAA],
        fingerprint: fingerprint.into(),
        created_at: NOW,
    }
}

#[test]
fn a_migration_to_a_new_seed_derives_new_addresses_from_it_and_keeps_the_old_ones() {
    use custody_core::wallet::seeds::register_seed;
    block_on(async {
        let store = MemoryStore::new();
        let old = wallet(&store, 1, "acme", "alice", Network::Bsc).await;
        assert_eq!(old.account, 0);
        let t = tid("acme");
        // The same seed again, or a record the store has moved past, is refused.
        for (record, first) in [
            (zoo_record(1, 1, "0xOLD"), "0xOLD"),
            (zoo_record(1, 0, "0xZOO"), "0xOLD"),
            (zoo_record(2, 1, "0xZOO"), "0xOLD"),
        ] {
            let first = first.to_owned();
            assert!(write(&store, move |tx| register_seed(tx, &record, &first))
                .await
                .is_err());
        }
        let done = write(&store, move |tx| {
            register_seed(tx, &zoo_record(1, 1, "0xZOO"), "0xOLD")?;
            let mut n = 7000u128;
            let mut ids = || {
                n += 1;
                Uuid::from_u128(n)
            };
            migrate_tenant(
                tx,
                &two_seeds(1),
                &mut ids,
                &t,
                None,
                "cli:ops",
                "seed rotation",
                NOW,
            )
        })
        .await
        .unwrap();
        assert_eq!(done.len(), 1);
        let m = &done[0];
        assert_eq!(m.old_address, old.address);
        assert_eq!(m.new_path.account, 1);
        assert_eq!(m.new_address, zoo_address(Network::Bsc, 1, 0));
        // Its old key still comes from the old seed.
        old_key_available(&two_seeds(1), m).unwrap();

        // A process started before the import would derive a new tenant's wallet from the old
        // seed: refused. With both seeds it comes from the new one.
        let (beta, user) = (tid("beta"), "bob".to_owned());
        let stale = write(&store, move |tx| {
            create_wallet(
                tx,
                &test_signer(),
                [Uuid::from_u128(8001), Uuid::from_u128(8002)],
                &beta,
                &user,
                Network::Tron,
                NOW,
            )
        })
        .await;
        assert!(stale.unwrap_err().to_string().contains("restart"));
        let (beta, user) = (tid("beta"), "bob".to_owned());
        let fresh = write(&store, move |tx| {
            create_wallet(
                tx,
                &two_seeds(1),
                [Uuid::from_u128(8001), Uuid::from_u128(8002)],
                &beta,
                &user,
                Network::Tron,
                NOW,
            )
        })
        .await
        .unwrap()
        .wallet;
        assert_eq!(fresh.address, zoo_address(Network::Tron, fresh.account, 0));
        let seeds = read(&store, |tx| Ok(tx.seeds()?)).await.unwrap();
        assert_eq!(seeds.len(), 1);
    });
}
