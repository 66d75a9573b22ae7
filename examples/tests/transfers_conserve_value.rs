//! A domain rule property-tested in isolation: the core's ledger alone, on its in-memory
//! reference implementation (`custody_testkit::MemoryLedger`), with no store, runtime or
//! network. The rule: internal transfers between users of one tenant move
//! value and never create or destroy it; one that would overdraw its sender is refused and
//! writes nothing; no user's balance ever goes below zero; the books always balance.

use custody_core::ledger::{self, Direction, ReferenceType, TxMeta, UserAccount};
use custody_core::{Amount, AssetId, Network, Timestamp};
use custody_testkit::MemoryLedger;
use proptest::prelude::*;
use uuid::Uuid;

const USERS: [&str; 3] = ["alice", "bob", "carol"];

fn account(user: &str) -> UserAccount {
    UserAccount::new("acme", user, AssetId::new(Network::Bsc, "USDT"))
}

fn meta(n: u128, reference_type: ReferenceType) -> TxMeta {
    TxMeta {
        id: Uuid::from_u128(n),
        reference_type,
        reference_id: Uuid::from_u128(n),
        created_at: Timestamp::from_unix_millis(1_800_000_000_000),
    }
}

fn available(l: &mut MemoryLedger, user: &str) -> u128 {
    ledger::user_balance(l, &account(user))
        .unwrap()
        .available
        .units()
}

proptest! {
    #[test]
    fn internal_transfers_move_value_and_never_make_or_lose_any(
        opening in prop::collection::vec(1u128..1_000, 3),
        transfers in prop::collection::vec((0usize..3, 0usize..3, 1u128..600), 0..40),
    ) {
        let mut l = MemoryLedger::new();
        for (i, (user, units)) in USERS.iter().zip(&opening).enumerate() {
            let m = meta(i as u128 + 1, ReferenceType::Adjustment);
            ledger::adjust(&mut l, &m, &account(user), Direction::Credit, Amount::from_units(*units))
                .unwrap();
        }
        let total: u128 = opening.iter().sum();
        for (n, (from, to, units)) in transfers.into_iter().enumerate() {
            let before: Vec<u128> = USERS.iter().map(|u| available(&mut l, u)).collect();
            let m = meta(100 + n as u128, ReferenceType::InternalTransfer);
            let result =
                ledger::transfer(&mut l, &m, &account(USERS[from]), USERS[to], Amount::from_units(units));
            let after: Vec<u128> = USERS.iter().map(|u| available(&mut l, u)).collect();
            match result {
                Ok(_) => {
                    prop_assert!(from != to && units <= before[from]);
                    prop_assert_eq!(after[from], before[from] - units);
                    prop_assert_eq!(after[to], before[to] + units);
                }
                // Refused (overdraft, or to oneself): nothing moved.
                Err(_) => {
                    prop_assert!(from == to || units > before[from]);
                    prop_assert_eq!(&after, &before);
                }
            }
            prop_assert_eq!(after.iter().sum::<u128>(), total, "value is conserved");
        }
        prop_assert!(ledger::reconcile(&mut l).unwrap().balanced);
    }
}
