//! What the ledger's types answer on their own: storage ids, stored values, the errors at the
//! core's boundary. The operations run on the memory ledger, in `tests/ledger/`.

use proptest::prelude::*;
use uuid::Uuid;

use crate::asset::AssetId;
use crate::error::{CoreError, ErrorCode};
use crate::network::Network;

use super::*;

fn usdt() -> AssetId {
    AssetId::new(Network::Bsc, "USDT")
}

fn bnb() -> AssetId {
    AssetId::new(Network::Bsc, "BNB")
}

fn system(account: SystemAccount, asset: AssetId) -> AccountKey {
    AccountKey::system(account, asset)
}

// ---- account keys ----

#[test]
fn storage_ids_round_trip_and_never_collide() {
    let tricky = [
        AccountKey::User(UserAccount::new("t:1", "u", usdt())),
        AccountKey::User(UserAccount::new("t", "1:u", usdt())),
        AccountKey::User(UserAccount::new("t", "a%3Ab", usdt())),
        AccountKey::User(UserAccount::new("t", "a:b", usdt())),
        AccountKey::User(UserAccount::new(
            "",
            "",
            AssetId::new(Network::Tron, "USDT"),
        )),
        system(SystemAccount::DepositClearing, bnb()),
    ];
    let ids: Vec<String> = tricky.iter().map(AccountKey::storage_id).collect();
    for (key, id) in tricky.iter().zip(&ids) {
        assert_eq!(AccountKey::from_storage_id(id).as_ref(), Some(key), "{id}");
    }
    let distinct: std::collections::HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len());
    assert_eq!(ids[0], "user:t%3A1:BSC:USDT:u");
    assert_eq!(ids[5], "system:deposit_clearing:BSC:BNB");
}

#[test]
fn storage_ids_reject_what_was_never_written() {
    for bad in [
        "",
        "user:t:BSC:USDT",
        "user:t:ETH:USDT:u",
        "user:t:BSC:USDT:u%3a",
        "user:t:BSC:USDT:u%",
        "system:bank:BSC:USDT",
        "system:treasury:BSC:USDT:x",
    ] {
        assert_eq!(AccountKey::from_storage_id(bad), None, "{bad:?}");
    }
}

#[test]
fn ledger_errors_map_to_core_errors() {
    let refused = LedgerError::refused(ErrorCode::InsufficientBalance, "no");
    assert!(
        matches!(CoreError::from(refused), CoreError::Refused(r) if r.code == ErrorCode::InsufficientBalance)
    );
    let port = crate::error::PortError::transient("store", "busy");
    assert_eq!(
        CoreError::from(LedgerError::Port(port.clone())),
        CoreError::Port(port)
    );
    assert!(matches!(
        CoreError::from(LedgerError::HoldNotFound(Uuid::nil())),
        CoreError::Invariant(_)
    ));
}

#[test]
fn stored_values_round_trip() {
    for k in TxKind::ALL {
        assert_eq!(TxKind::parse(k.as_str()), Some(k));
    }
    for r in ReferenceType::ALL {
        assert_eq!(ReferenceType::parse(r.as_str()), Some(r));
    }
    for p in Phase::ALL {
        assert_eq!(Phase::parse(p.as_str()), Some(p));
    }
    for p in HoldPurpose::ALL {
        assert_eq!(HoldPurpose::parse(p.as_str()), Some(p));
    }
    for s in SystemAccount::ALL {
        assert_eq!(SystemAccount::parse(s.as_str()), Some(s));
    }
    assert_ne!(entry_id(Uuid::nil(), 0), entry_id(Uuid::nil(), 1));
    assert_eq!(entry_id(Uuid::nil(), 0).get_version_num(), 8);
}

fn asset_id(i: usize) -> AssetId {
    AssetId::new(Network::Bsc, ["USDT", "BNB"][i])
}

proptest! {
    // No regression file: this crate's tree is shared; a failure prints its minimal input.
    #![proptest_config(ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn storage_ids_round_trip(tenant in "\\PC{0,12}", user in "\\PC{0,12}", code in "[A-Z0-9%:]{1,6}") {
        let key = AccountKey::User(UserAccount::new(tenant, user, AssetId::new(Network::Tron, code)));
        prop_assert_eq!(AccountKey::from_storage_id(&key.storage_id()), Some(key));
    }

    #[test]
    fn storage_ids_are_injective(
        a in ("[a:%]{0,4}", "[a:%]{0,4}"),
        b in ("[a:%]{0,4}", "[a:%]{0,4}"),
    ) {
        let key = |(t, u): (String, String)| AccountKey::User(UserAccount::new(t, u, asset_id(0)));
        let (ka, kb) = (key(a), key(b));
        prop_assert_eq!(ka == kb, ka.storage_id() == kb.storage_id());
    }
}
