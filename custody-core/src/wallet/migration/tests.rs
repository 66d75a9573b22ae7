//! A migration's states. The migrations themselves run on the memory store, in
//! `tests/wallet_migration.rs`.

use super::*;

#[test]
fn illegal_moves_are_refused() {
    use MigrationStatus::*;
    for (from, to) in [
        (Completed, Sweeping),
        (Failed, Completed),
        (Sweeping, Planned),
        (Completed, Failed),
    ] {
        assert!(!from.can_move_to(to), "{from:?} -> {to:?}");
    }
    for s in MigrationStatus::ALL {
        assert_eq!(MigrationStatus::parse(s.as_str()), Some(s));
    }
}
