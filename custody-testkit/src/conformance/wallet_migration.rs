//! Wallet migrations (decisions §13) in the store: a moved wallet keeps its old addresses
//! (watched, matched, with their own paths), tenant accounts are replaced from the global
//! allocator, and migration records round-trip.

use std::sync::Arc;

use custody_core::ports::signer::HdPath;
use custody_core::ports::store::Store;
use custody_core::wallet::migration::{MigrationStatus, MigrationStep, WalletMigration};
use custody_core::wallet::{PreviousAddress, Wallet};
use custody_core::Network;

use super::{addr, assert_port_error, at, chain_addr, r, suite, tid, uid, w, wallet_row};

suite!(
    /// Moved wallets, replaced tenant accounts and migration records.
    wallet_migration_suite {
        a_moved_wallet_keeps_its_old_address,
        a_wallet_moved_twice_lists_its_previous_addresses_oldest_first,
        a_wallet_read_before_each_move_reads_as_moved_after_it,
        a_moved_wallets_new_address_is_watched_after_the_last_position,
        moves_never_reuse_an_address_or_a_path,
        tenant_accounts_are_replaced_from_the_global_allocator,
        migration_records_round_trip,
        seeds_round_trip_and_the_next_account_follows_the_allocator,
        hot_wallet_records_round_trip_and_take_accounts_from_the_allocator,
    }
);

fn path(network: Network, account: u32, index: u32) -> HdPath {
    HdPath {
        network,
        account,
        index,
    }
}

/// alice's BSC wallet at (0, 1), moved to 0xA11CE2 at (5, 0) at t=50.
async fn moved_alice(s: &dyn Store) {
    let wallet = custody_core::wallet::Wallet {
        index: 1,
        ..wallet_row(1, "acme", "alice", Network::Bsc, "0xA11CE")
    };
    w(s, move |tx| tx.insert_wallet(&wallet)).await.unwrap();
    let new = addr(Network::Bsc, "0xA11CE2");
    w(s, move |tx| tx.move_wallet(uid(1), &new, 5, 0, at(50)))
        .await
        .unwrap();
}

async fn a_moved_wallet_keeps_its_old_address(store: Arc<dyn Store>) {
    let s = store.as_ref();
    moved_alice(s).await;
    let (old, new) = (
        addr(Network::Bsc, "0xA11CE"),
        addr(Network::Bsc, "0xA11CE2"),
    );
    let wallet = r(s, |tx| tx.wallet_by_id(&tid("acme"), uid(1)))
        .await
        .expect("the wallet");
    assert_eq!(
        (&wallet.address, wallet.account, wallet.index),
        (&new, 5, 0)
    );
    assert_eq!(
        wallet.previous_addresses,
        [PreviousAddress {
            address: old.clone(),
            account: 0,
            index: 1,
            retired_at: at(50),
        }]
    );
    // Every lookup finds the same wallet, with its previous addresses.
    let by_user = r(s, |tx| {
        tx.wallet_by_user(&tid("acme"), "alice", Network::Bsc)
    })
    .await;
    let by_old = r(s, |tx| {
        tx.wallet_by_address(Network::Bsc, &chain_addr(Network::Bsc, "0xA11CE"))
    })
    .await;
    let by_new = r(s, |tx| {
        tx.wallet_by_address(Network::Bsc, &chain_addr(Network::Bsc, "0xA11CE2"))
    })
    .await;
    let listed = r(s, |tx| tx.list_wallets(Some(&tid("acme")), None)).await;
    assert_eq!(by_user.as_ref(), Some(&wallet));
    assert_eq!(by_old.as_ref(), Some(&wallet));
    assert_eq!(by_new.as_ref(), Some(&wallet));
    assert_eq!(listed, std::slice::from_ref(&wallet));
    // Each address keeps its own key path.
    let (o, n) = (old.clone(), new.clone());
    let paths = r(s, move |tx| {
        Ok([
            tx.address_path(Network::Bsc, &o)?,
            tx.address_path(Network::Bsc, &n)?,
            tx.address_path(Network::Tron, &o)?,
            tx.address_path(Network::Bsc, &addr(Network::Bsc, "0xB0B"))?,
        ])
    })
    .await;
    assert_eq!(
        paths,
        [
            Some(path(Network::Bsc, 0, 1)),
            Some(path(Network::Bsc, 5, 0)),
            None,
            None
        ]
    );
    // Both are in the watch set.
    let mut watched = r(s, |tx| tx.wallet_addresses(Network::Bsc)).await;
    watched.sort();
    let mut both = vec![old, new];
    both.sort();
    assert_eq!(watched, both);
    assert!(r(s, |tx| tx.wallet_addresses(Network::Tron))
        .await
        .is_empty());
}

/// What one wallet reads as by id, through both kinds of read job, as `tenant`.
async fn by_id_both_ways(s: &dyn Store, tenant: &'static str, id: u128) -> Option<Wallet> {
    let read = r(s, move |tx| tx.wallet_by_id(&tid(tenant), uid(id))).await;
    let quick = custody_core::ports::store::read_quick(s, move |tx| {
        Ok(tx.wallet_by_id(&tid(tenant), uid(id))?)
    })
    .await
    .unwrap_or_else(|e| panic!("a quick read failed: {e}"));
    assert_eq!(read, quick, "both kinds of read agree");
    read
}

/// A store may keep wallets it read (SQLite keeps them by a version that every change raises):
/// a wallet read before each move reads as moved right after it, another tenant never sees it,
/// and an id read while missing is found once its wallet exists.
async fn a_wallet_read_before_each_move_reads_as_moved_after_it(store: Arc<dyn Store>) {
    let s = store.as_ref();
    assert_eq!(by_id_both_ways(s, "acme", 1).await, None);
    let alice = Wallet {
        index: 1,
        ..wallet_row(1, "acme", "alice", Network::Bsc, "0xA11CE")
    };
    let inserted = alice.clone();
    w(s, move |tx| tx.insert_wallet(&inserted)).await.unwrap();
    // Another tenant asks first, then the owner.
    assert_eq!(by_id_both_ways(s, "other", 1).await, None);
    for _ in 0..2 {
        assert_eq!(by_id_both_ways(s, "acme", 1).await.as_ref(), Some(&alice));
        assert_eq!(by_id_both_ways(s, "other", 1).await, None);
    }
    // Another wallet created meanwhile changes nothing read of the first.
    let bob = wallet_row(2, "acme", "bob", Network::Bsc, "0xB0B");
    w(s, move |tx| tx.insert_wallet(&bob)).await.unwrap();
    assert_eq!(by_id_both_ways(s, "acme", 1).await.as_ref(), Some(&alice));

    let mut previous = Vec::new();
    let mut expected = alice.clone();
    for (step, tag) in ["0xA11CE2", "0xA11CE3"].into_iter().enumerate() {
        let n = u32::try_from(step).unwrap() + 5;
        let t = 50 + i64::from(n);
        let new = addr(Network::Bsc, tag);
        let to = new.clone();
        w(s, move |tx| tx.move_wallet(uid(1), &to, n, 0, at(t)))
            .await
            .unwrap();
        previous.push(PreviousAddress {
            address: expected.address.clone(),
            account: expected.account,
            index: expected.index,
            retired_at: at(t),
        });
        expected = Wallet {
            address: new,
            account: n,
            index: 0,
            previous_addresses: previous.clone(),
            ..alice.clone()
        };
        assert_eq!(
            by_id_both_ways(s, "acme", 1).await.as_ref(),
            Some(&expected),
            "after move {step}"
        );
        assert_eq!(by_id_both_ways(s, "other", 1).await, None);
    }
    assert_eq!(
        by_id_both_ways(s, "acme", 2).await.map(|w| w.address),
        Some(addr(Network::Bsc, "0xB0B"))
    );
}

async fn a_wallet_moved_twice_lists_its_previous_addresses_oldest_first(store: Arc<dyn Store>) {
    let s = store.as_ref();
    moved_alice(s).await;
    let bob = wallet_row(2, "acme", "bob", Network::Bsc, "0xB0B");
    w(s, move |tx| tx.insert_wallet(&bob)).await.unwrap();
    let (third, bob_new) = (addr(Network::Bsc, "0xA11CE3"), addr(Network::Bsc, "0xB0B2"));
    w(s, move |tx| {
        tx.move_wallet(uid(1), &third, 6, 0, at(60))?;
        tx.move_wallet(uid(2), &bob_new, 7, 0, at(70))
    })
    .await
    .unwrap();
    let retired = |address: &str, account, index, t| PreviousAddress {
        address: addr(Network::Bsc, address),
        account,
        index,
        retired_at: at(t),
    };
    let alice = r(s, |tx| tx.wallet_by_id(&tid("acme"), uid(1)))
        .await
        .expect("alice's wallet");
    assert_eq!(alice.address, addr(Network::Bsc, "0xA11CE3"));
    assert_eq!(
        alice.previous_addresses,
        [retired("0xA11CE", 0, 1, 50), retired("0xA11CE2", 5, 0, 60)]
    );
    let by_user = r(s, |tx| {
        tx.wallet_by_user(&tid("acme"), "alice", Network::Bsc)
    })
    .await;
    assert_eq!(by_user.as_ref(), Some(&alice));
    let bob = r(s, |tx| {
        tx.wallet_by_address(Network::Bsc, &chain_addr(Network::Bsc, "0xB0B"))
    })
    .await
    .expect("bob's wallet");
    assert_eq!(bob.id, uid(2));
    assert_eq!(bob.previous_addresses, [retired("0xB0B", 0, 2, 70)]);
    assert!(r(s, |tx| tx.wallet_by_id(&tid("other"), uid(1)))
        .await
        .is_none());
}

async fn a_moved_wallets_new_address_is_watched_after_the_last_position(store: Arc<dyn Store>) {
    let s = store.as_ref();
    let wallet = wallet_row(1, "acme", "alice", Network::Bsc, "0xA11CE");
    w(s, move |tx| tx.insert_wallet(&wallet)).await.unwrap();
    let seen = r(s, |tx| tx.wallet_addresses_after(Network::Bsc, 0, 10)).await;
    assert_eq!(seen.len(), 1);
    let last = seen[0].0;
    let new = addr(Network::Bsc, "0xA11CE2");
    let n = new.clone();
    w(s, move |tx| tx.move_wallet(uid(1), &n, 5, 0, at(50)))
        .await
        .unwrap();
    // A scanner that saw the wallet before its move picks up the new address; the old one
    // stays where it was (already watched).
    let after = r(s, move |tx| {
        tx.wallet_addresses_after(Network::Bsc, last, 10)
    })
    .await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].1, new);
    assert!(after[0].0 > last);
    let all = r(s, |tx| tx.wallet_addresses_after(Network::Bsc, 0, 10)).await;
    assert_eq!(all.len(), 2, "{all:?}");
}

async fn moves_never_reuse_an_address_or_a_path(store: Arc<dyn Store>) {
    let s = store.as_ref();
    moved_alice(s).await;
    // Back to its own old address, to its old path, to the current path: refused.
    let old = addr(Network::Bsc, "0xA11CE");
    assert_port_error(w(s, move |tx| tx.move_wallet(uid(1), &old, 6, 0, at(60))).await);
    let other = addr(Network::Bsc, "0xA11CE3");
    assert_port_error(w(s, move |tx| tx.move_wallet(uid(1), &other, 0, 1, at(60))).await);
    let other = addr(Network::Bsc, "0xA11CE3");
    assert_port_error(w(s, move |tx| tx.move_wallet(uid(1), &other, 5, 0, at(60))).await);
    // An unknown wallet.
    let other = addr(Network::Bsc, "0xA11CE3");
    assert_port_error(w(s, move |tx| tx.move_wallet(uid(9), &other, 7, 0, at(60))).await);
    // A new wallet at alice's old address or old path: refused too (the old address is
    // still alice's: a deposit to it must never find another wallet).
    let bob = wallet_row(2, "acme", "bob", Network::Bsc, "0xA11CE");
    assert_port_error(w(s, move |tx| tx.insert_wallet(&bob)).await);
    let bob = custody_core::wallet::Wallet {
        index: 1,
        ..wallet_row(3, "acme", "bob", Network::Bsc, "0xB0B")
    };
    assert_port_error(w(s, move |tx| tx.insert_wallet(&bob)).await);
    // The refused moves changed nothing.
    let wallet = r(s, |tx| tx.wallet_by_id(&tid("acme"), uid(1)))
        .await
        .expect("the wallet");
    assert_eq!((wallet.account, wallet.index), (5, 0));
    assert_eq!(wallet.previous_addresses.len(), 1);
}

async fn tenant_accounts_are_replaced_from_the_global_allocator(store: Arc<dyn Store>) {
    let s = store.as_ref();
    for t in ["acme", "beta"] {
        w(s, move |tx| tx.allocate_tenant_account(&tid(t), at(1)))
            .await
            .unwrap();
    }
    for _ in 0..3 {
        w(s, |tx| tx.take_address_index(&tid("acme"), Network::Bsc))
            .await
            .unwrap();
    }
    w(s, |tx| tx.take_address_index(&tid("beta"), Network::Bsc))
        .await
        .unwrap();
    assert_eq!(
        w(s, |tx| tx.replace_tenant_account(&tid("acme"), at(2)))
            .await
            .unwrap(),
        2
    );
    assert_eq!(r(s, |tx| tx.tenant_account(&tid("acme"))).await, Some(2));
    // Indexes restart under the new account; other tenants' counters are theirs.
    assert_eq!(
        w(s, |tx| tx.take_address_index(&tid("acme"), Network::Bsc))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        w(s, |tx| tx.take_address_index(&tid("beta"), Network::Bsc))
            .await
            .unwrap(),
        1
    );
    // Never reused: a new tenant and another replacement get the next indexes.
    assert_eq!(
        w(s, |tx| tx.allocate_tenant_account(&tid("gamma"), at(3)))
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        w(s, |tx| tx.replace_tenant_account(&tid("beta"), at(4)))
            .await
            .unwrap(),
        4
    );
    assert_port_error(w(s, |tx| tx.replace_tenant_account(&tid("nobody"), at(5))).await);
}

fn migration(n: u128, network: Network, created: i64) -> WalletMigration {
    WalletMigration {
        id: uid(n),
        tenant: tid("acme"),
        wallet_id: uid(100 + n),
        network,
        external_user_id: format!("user{n}"),
        old_address: addr(network, "0x01D"),
        old_path: path(network, 0, u32::try_from(n).unwrap_or(0)),
        new_address: addr(network, "0x2E3"),
        new_path: path(network, 7, u32::try_from(n).unwrap_or(0)),
        reason: "key compromise drill".into(),
        status: MigrationStatus::Planned,
        history: vec![MigrationStep {
            status: "planned".into(),
            at: at(created).to_rfc3339(),
            detail: String::new(),
        }],
        created_at: at(created),
        updated_at: at(created),
    }
}

async fn migration_records_round_trip(store: Arc<dyn Store>) {
    let s = store.as_ref();
    // A record names a stored wallet (a foreign key).
    let orphan = migration(1, Network::Bsc, 10);
    assert_port_error(w(s, move |tx| tx.insert_migration(&orphan)).await);
    w(s, |tx| {
        for (n, network, tag) in [
            (101, Network::Bsc, "0xB01"),
            (102, Network::Tron, "0xB02"),
            (103, Network::Bsc, "0xB03"),
        ] {
            tx.insert_wallet(&custody_core::wallet::Wallet {
                id: uid(n),
                ..wallet_row(n, "acme", tag, network, tag)
            })?;
        }
        Ok(())
    })
    .await
    .unwrap();
    let rows = [
        migration(1, Network::Bsc, 10),
        migration(2, Network::Tron, 20),
        migration(3, Network::Bsc, 30),
    ];
    let stored = rows.clone();
    w(s, move |tx| {
        stored.iter().try_for_each(|m| tx.insert_migration(m))
    })
    .await
    .unwrap();
    let dup = migration(1, Network::Bsc, 40);
    assert_port_error(w(s, move |tx| tx.insert_migration(&dup)).await);
    assert_eq!(
        r(s, |tx| tx.migration_by_id(uid(1))).await.as_ref(),
        Some(&rows[0])
    );
    assert_eq!(r(s, |tx| tx.migration_by_id(uid(9))).await, None);

    let mut moved = rows[0].clone();
    moved
        .transition(MigrationStatus::Sweeping, "BNB above the minimum", at(50))
        .unwrap();
    let m = moved.clone();
    w(s, move |tx| tx.update_migration(&m)).await.unwrap();
    assert_eq!(
        r(s, |tx| tx.migration_by_id(uid(1))).await.as_ref(),
        Some(&moved)
    );
    let missing = migration(9, Network::Bsc, 10);
    assert_port_error(w(s, move |tx| tx.update_migration(&missing)).await);

    // Open ones of a network, oldest first; a finished one is no longer open.
    let open = r(s, |tx| tx.open_migrations(Network::Bsc)).await;
    assert_eq!(
        open.iter().map(|m| m.id).collect::<Vec<_>>(),
        [uid(1), uid(3)]
    );
    let mut done = rows[2].clone();
    done.transition(MigrationStatus::Completed, "", at(60))
        .unwrap();
    w(s, move |tx| tx.update_migration(&done)).await.unwrap();
    let open = r(s, |tx| tx.open_migrations(Network::Bsc)).await;
    assert_eq!(open.iter().map(|m| m.id).collect::<Vec<_>>(), [uid(1)]);

    // Every one, newest first, with a limit.
    let listed = r(s, |tx| {
        tx.list_migrations(custody_core::page::Page::first(10))
    })
    .await
    .expect("a first page");
    assert_eq!(
        listed.iter().map(|m| m.id).collect::<Vec<_>>(),
        [uid(3), uid(2), uid(1)]
    );
    let two = r(s, |tx| {
        tx.list_migrations(custody_core::page::Page::first(2))
    })
    .await
    .expect("a first page");
    assert_eq!(
        two.iter().map(|m| m.id).collect::<Vec<_>>(),
        [uid(3), uid(2)]
    );
}

fn seed(
    generation: u32,
    first_account: u32,
    fingerprint: &str,
) -> custody_core::wallet::seeds::SeedRecord {
    custody_core::wallet::seeds::SeedRecord {
        generation,
        first_account,
        sealed_mnemonic: [1, 2, 3]
            .into_iter()
            .chain(generation.to_be_bytes())
            .collect(),
        fingerprint: fingerprint.into(),
        created_at: at(i64::from(generation)),
    }
}

/// Imported seeds are kept exactly, listed by generation, unique by generation, first account
/// and fingerprint; the next account is what the allocator hands out next.
async fn seeds_round_trip_and_the_next_account_follows_the_allocator(store: Arc<dyn Store>) {
    let s = store.as_ref();
    assert_eq!(r(s, |tx| tx.next_account()).await, 0);
    assert!(r(s, |tx| tx.seeds()).await.is_empty());
    for t in ["acme", "beta"] {
        w(s, move |tx| tx.allocate_tenant_account(&tid(t), at(1)))
            .await
            .unwrap();
    }
    assert_eq!(r(s, |tx| tx.next_account()).await, 2);
    w(s, |tx| tx.replace_tenant_account(&tid("acme"), at(2)))
        .await
        .unwrap();
    assert_eq!(r(s, |tx| tx.next_account()).await, 3);
    let (two, one) = (seed(2, 9, "0xB"), seed(1, 3, "0xA"));
    let (a, b) = (two.clone(), one.clone());
    w(s, move |tx| {
        tx.insert_seed(&a)?;
        tx.insert_seed(&b)
    })
    .await
    .unwrap();
    assert_eq!(r(s, |tx| tx.seeds()).await, vec![one, two]);
    for clash in [seed(1, 20, "0xC"), seed(3, 9, "0xC"), seed(3, 20, "0xA")] {
        assert_port_error(w(s, move |tx| tx.insert_seed(&clash)).await);
    }
}

fn hot_record(
    network: Network,
    address: &str,
    account: u32,
    status: custody_core::wallet::hot::HotWalletStatus,
    created: i64,
) -> custody_core::wallet::hot::HotWalletRecord {
    custody_core::wallet::hot::HotWalletRecord {
        network,
        address: address.to_owned(),
        account,
        index: 0,
        status,
        rotated_by: "cli:ops".into(),
        reason: format!("rotation {created}"),
        created_at: at(created),
        retired_at: None,
    }
}

/// Hot wallet records are kept exactly, per network oldest first, one per address and one
/// active per network; retiring one stamps it; their accounts come from the tenants' allocator
/// (neither ever gets the other's) under labels that must be new.
async fn hot_wallet_records_round_trip_and_take_accounts_from_the_allocator(store: Arc<dyn Store>) {
    use custody_core::wallet::hot::HotWalletStatus::{Active, Retired};
    let s = store.as_ref();
    assert!(r(s, |tx| tx.hot_wallet_records(Network::Bsc))
        .await
        .is_empty());
    w(s, |tx| tx.allocate_tenant_account(&tid("acme"), at(1)))
        .await
        .unwrap();
    let account = w(s, |tx| {
        tx.allocate_hot_wallet_account("hot-wallet:BSC:1", at(2))
    })
    .await
    .unwrap();
    assert_eq!(account, 1);
    assert_port_error(
        w(s, |tx| {
            tx.allocate_hot_wallet_account("hot-wallet:BSC:1", at(2))
        })
        .await,
    );
    assert_eq!(r(s, |tx| tx.next_account()).await, 2);
    let beta = w(s, |tx| tx.allocate_tenant_account(&tid("beta"), at(3)))
        .await
        .unwrap();
    assert_eq!(beta, 2, "a tenant never gets a hot wallet's account");
    let replaced = w(s, |tx| tx.replace_tenant_account(&tid("acme"), at(4)))
        .await
        .unwrap();
    assert_eq!(replaced, 3);
    let later = w(s, |tx| {
        tx.allocate_hot_wallet_account("hot-wallet:BSC:2", at(5))
    })
    .await
    .unwrap();
    assert_eq!(later, 4);

    let old = hot_record(
        Network::Bsc,
        &addr(Network::Bsc, "h0"),
        2_147_483_647,
        Retired,
        10,
    );
    let new = hot_record(Network::Bsc, &addr(Network::Bsc, "h1"), 1, Active, 10);
    let tron = hot_record(Network::Tron, &addr(Network::Tron, "t1"), 4, Active, 11);
    let (a, b, c) = (old.clone(), new.clone(), tron.clone());
    w(s, move |tx| {
        tx.insert_hot_wallet(&b)?;
        tx.insert_hot_wallet(&a)?;
        tx.insert_hot_wallet(&c)
    })
    .await
    .unwrap();
    let mut bsc = vec![old.clone(), new.clone()];
    bsc.sort_by(|x, y| x.address.cmp(&y.address));
    assert_eq!(r(s, |tx| tx.hot_wallet_records(Network::Bsc)).await, bsc);
    assert_eq!(
        r(s, |tx| tx.hot_wallet_records(Network::Tron)).await,
        vec![tron]
    );
    // One record per address, one active per network.
    let again = hot_record(Network::Bsc, &new.address, 9, Retired, 12);
    assert_port_error(w(s, move |tx| tx.insert_hot_wallet(&again)).await);
    let second = hot_record(Network::Bsc, &addr(Network::Bsc, "h2"), 4, Active, 12);
    let second2 = second.clone();
    assert_port_error(w(s, move |tx| tx.insert_hot_wallet(&second2)).await);
    // Only the active one is retired; then another may be active.
    let old_address = old.address.clone();
    assert_port_error(
        w(s, move |tx| {
            tx.retire_hot_wallet(Network::Bsc, &old_address, at(13))
        })
        .await,
    );
    let new_address = new.address.clone();
    w(s, move |tx| {
        tx.retire_hot_wallet(Network::Bsc, &new_address, at(13))?;
        tx.insert_hot_wallet(&second)
    })
    .await
    .unwrap();
    let got = r(s, |tx| tx.hot_wallet_records(Network::Bsc)).await;
    assert_eq!(got.len(), 3);
    let retired = got.iter().find(|x| x.address == new.address).unwrap();
    assert_eq!(
        (retired.status, retired.retired_at),
        (Retired, Some(at(13)))
    );
    assert_eq!(got[2].address, addr(Network::Bsc, "h2"), "oldest first");
}
