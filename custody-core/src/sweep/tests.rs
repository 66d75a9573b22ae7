//! The states of sweeps and fundings. The flows run on the memory store, in `tests/sweep/`.

use super::*;

#[test]
fn states_move_only_forward() {
    for s in SweepStatus::ALL {
        assert_eq!(SweepStatus::parse(s.as_str()), Some(s));
        assert!(!SweepStatus::Confirmed.can_move_to(s));
        assert!(!SweepStatus::Failed.can_move_to(s));
    }
    for f in FundingStatus::ALL {
        assert_eq!(FundingStatus::parse(f.as_str()), Some(f));
        assert!(!FundingStatus::Confirmed.can_move_to(f));
    }
}
