//! Hot wallet rotation on the memory store. (The drain's arithmetic: the unit tests of
//! `wallet::hot`; the drain's records: `tests/sweep/drain.rs`.)

use custody_core::error::CoreError;
use custody_core::error::{CoreResult, ErrorCode};
use custody_core::keys::derive_address;
use custody_core::keys::{HdKeys, Mnemonic, SeedSet};
use custody_core::network::Network;
use custody_core::ports::signer::Signer;
use custody_core::ports::store::{read, write};
use custody_core::time::Timestamp;
use custody_core::wallet::hot::*;
use custody_core::wallet::seeds::SeedRecord;
use custody_core::wallet::{hot_wallet_path, HOT_WALLET_ACCOUNT};
use custody_core::withdrawal::HotWallet;
use custody_core::TenantId;
use custody_testkit::{block_on, MemoryStore, MNEMONIC};
use uuid::Uuid;

const NOW: Timestamp = Timestamp::from_unix_millis(1_800_000_000_000);
const ZOO_12: &str = "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong";

fn keys(phrase: &str) -> HdKeys {
    HdKeys::from_mnemonic(&Mnemonic::parse(phrase).unwrap()).unwrap()
}

fn address_of(signer: &dyn Signer, account: u32) -> String {
    let (k, c) = signer
        .external_chain_public_key(Network::Bsc, account)
        .unwrap();
    derive_address(Network::Bsc, &k, &c, 0).unwrap().0
}

fn first(signer: &dyn Signer) -> HotWallet {
    HotWallet {
        address: address_of(signer, HOT_WALLET_ACCOUNT),
        path: hot_wallet_path(Network::Bsc),
    }
}

/// A store whose tenant `acme` holds account 0, then (with `import`) a seed imported from
/// account 1; and the signer over both.
fn setup(import: bool) -> (MemoryStore, std::sync::Arc<SeedSet>) {
    let store = MemoryStore::new();
    let mut set = SeedSet::new(keys(MNEMONIC));
    block_on(write(&store, |tx| {
        tx.allocate_tenant_account(&TenantId::parse("acme").unwrap(), NOW)?;
        Ok(())
    }))
    .unwrap();
    if import {
        set.add(1, 1, keys(ZOO_12)).unwrap();
        block_on(write(&store, |tx| {
            Ok(tx.insert_seed(&SeedRecord {
                generation: 1,
                first_account: 1,
                sealed_mnemonic: vec![1],
                fingerprint: "zoo".into(),
                created_at: NOW,
            })?)
        }))
        .unwrap();
    }
    (store, std::sync::Arc::new(set))
}

fn rotate_now(
    store: &MemoryStore,
    set: &std::sync::Arc<SeedSet>,
    n: u128,
) -> CoreResult<(HotWallet, HotWallet)> {
    let current = block_on(read(store, |tx| Ok(tx.hot_wallet_records(Network::Bsc)?))).unwrap();
    let request = RotationRequest {
        network: Network::Bsc,
        expected_old: resolve(&current, first(set.as_ref())).active,
        first: first(set.as_ref()),
        actor: "cli:ops".into(),
        reason: "seed exposed".into(),
    };
    let set = std::sync::Arc::clone(set);
    block_on(write(store, move |tx| {
        rotate(
            tx,
            set.as_ref(),
            [Uuid::from_u128(n), Uuid::from_u128(n + 1)],
            &request,
            NOW,
        )
    }))
}

#[test]
fn without_a_record_the_first_seeds_hot_wallet_is_the_active_one() {
    let (_, set) = setup(false);
    let got = resolve(&[], first(set.as_ref()));
    assert_eq!(got.active, first(set.as_ref()));
    assert!(got.retired.is_empty());
}

#[test]
fn a_rotation_is_refused_while_no_new_seed_was_imported() {
    let (store, set) = setup(false);
    let err = rotate_now(&store, &set, 10).unwrap_err();
    assert!(
        err.to_string().contains("no new seed was imported"),
        "{err}"
    );
    let records = block_on(read(&store, |tx| Ok(tx.hot_wallet_records(Network::Bsc)?))).unwrap();
    assert!(records.is_empty());
}

#[test]
fn a_rotation_takes_the_next_account_of_the_newest_seed_and_retires_the_old_wallet() {
    let (store, set) = setup(true);
    let (old, new) = rotate_now(&store, &set, 10).unwrap();
    assert_eq!(old, first(set.as_ref()));
    // Account 1: the allocator's next, the first of generation 1, derived from the new seed.
    assert_eq!(new.path.account, 1);
    assert_eq!(new.path.index, 0);
    let zoo = custody_core::keys::SeedSet::new(keys(ZOO_12));
    assert_eq!(new.address, address_of(&zoo, 1));
    assert_ne!(new.address, address_of(&SeedSet::new(keys(MNEMONIC)), 1));
    let (records, next, audit) = block_on(read(&store, |tx| {
        Ok((
            tx.hot_wallet_records(Network::Bsc)?,
            tx.next_account()?,
            tx.list_audit(custody_core::page::Page::first(10))?,
        ))
    }))
    .unwrap();
    // The account is taken: no tenant ever gets it.
    assert_eq!(next, 2);
    let set_now = resolve(&records, first(set.as_ref()));
    assert_eq!(set_now.active, new);
    assert_eq!(set_now.retired, vec![old.clone()]);
    let active = records
        .iter()
        .find(|r| r.status == HotWalletStatus::Active)
        .unwrap();
    assert_eq!(
        (active.rotated_by.as_str(), active.reason.as_str()),
        ("cli:ops", "seed exposed")
    );
    assert!(records
        .iter()
        .any(|r| r.address == old.address && r.retired_at == Some(NOW)));
    assert_eq!(audit.expect("a page")[0].action, "treasury.rotate");
    // Other networks keep their hot wallet.
    let tron = block_on(read(&store, |tx| Ok(tx.hot_wallet_records(Network::Tron)?))).unwrap();
    assert!(tron.is_empty());
}

#[test]
fn a_hot_wallet_already_on_the_newest_seed_is_not_rotated_again() {
    let (store, set) = setup(true);
    rotate_now(&store, &set, 10).unwrap();
    let err = rotate_now(&store, &set, 20).unwrap_err();
    assert!(
        err.to_string()
            .contains("already derived from the newest seed"),
        "{err}"
    );
}

#[test]
fn a_rotation_raced_by_another_is_refused() {
    let (store, set) = setup(true);
    let request = RotationRequest {
        network: Network::Bsc,
        expected_old: HotWallet {
            address: "0xother".into(),
            path: hot_wallet_path(Network::Bsc),
        },
        first: first(set.as_ref()),
        actor: "cli:ops".into(),
        reason: "x".into(),
    };
    let err = block_on(write(&store, move |tx| {
        rotate(
            tx,
            set.as_ref(),
            [Uuid::from_u128(1), Uuid::from_u128(2)],
            &request,
            NOW,
        )
    }))
    .unwrap_err();
    assert!(err.to_string().contains("changed while"), "{err}");
}

#[test]
fn the_path_of_a_retired_hot_wallet_is_its_own() {
    let (store, set) = setup(true);
    let (old, new) = rotate_now(&store, &set, 10).unwrap();
    let (a, b, c) = block_on(read(&store, move |tx| {
        Ok((
            hot_wallet_path_of(tx, Network::Bsc, &old.address)?,
            hot_wallet_path_of(tx, Network::Bsc, &new.address)?,
            hot_wallet_path_of(tx, Network::Tron, "Tanything")?,
        ))
    }))
    .unwrap();
    assert_eq!(a, hot_wallet_path(Network::Bsc));
    assert_eq!(b.account, 1);
    assert_eq!(c, hot_wallet_path(Network::Tron));
}

#[test]
fn after_a_rotation_only_the_active_hot_wallet_may_pay_or_receive_new_money() {
    let (store, set) = setup(true);
    let check = |address: String| {
        block_on(write(&store, move |tx| {
            require_active(tx, Network::Bsc, &address)
        }))
    };
    let old = first(set.as_ref());
    check(old.address.clone()).expect("never rotated: the first seed's wallet pays");
    let (_, new) = rotate_now(&store, &set, 10).unwrap();
    check(new.address.clone()).expect("the active one pays");
    let err = check(old.address.clone()).unwrap_err();
    let CoreError::Refused(refusal) = &err else {
        panic!("a refusal: {err}")
    };
    assert_eq!(refusal.code, ErrorCode::Maintenance);
    assert!(refusal.message.contains("restart"), "{}", refusal.message);
}
