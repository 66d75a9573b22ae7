//! Two-phase holds: money is reserved when a withdrawal or swap is accepted and settled or
//! released once the chain has answered. A hold ends exactly once; its state is the only record
//! of the ledger that changes after it is written, and only from pending.

use uuid::Uuid;

use crate::amount::Amount;
use crate::time::Timestamp;

use super::account::{AccountKey, UserAccount};
use super::entry::{Direction, Phase, ReferenceType, TxKind};
use super::error::LedgerError;
use super::posting::Line;

/// What a hold is for; it fixes the kinds of its three transactions, so history reads
/// `withdrawal_hold` / `withdrawal_settle` / `withdrawal_release` consistently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldPurpose {
    Withdrawal,
    Swap,
}

impl HoldPurpose {
    pub const ALL: [HoldPurpose; 2] = [HoldPurpose::Withdrawal, HoldPurpose::Swap];

    /// Stored value; never change one that has shipped.
    pub const fn as_str(self) -> &'static str {
        match self {
            HoldPurpose::Withdrawal => "withdrawal",
            HoldPurpose::Swap => "swap",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        HoldPurpose::ALL.into_iter().find(|p| p.as_str() == s)
    }

    pub const fn reserve_kind(self) -> TxKind {
        match self {
            HoldPurpose::Withdrawal => TxKind::WithdrawalHold,
            HoldPurpose::Swap => TxKind::SwapHold,
        }
    }

    pub const fn settle_kind(self) -> TxKind {
        match self {
            HoldPurpose::Withdrawal => TxKind::WithdrawalSettle,
            HoldPurpose::Swap => TxKind::SwapSettle,
        }
    }

    pub const fn release_kind(self) -> TxKind {
        match self {
            HoldPurpose::Withdrawal => TxKind::WithdrawalRelease,
            HoldPurpose::Swap => TxKind::SwapRelease,
        }
    }
}

/// Where a hold is in its life. Pending is the only state that may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldState {
    Pending,
    /// `amount` (at most the held amount) was posted; the rest was released by `tx_id`.
    Settled {
        amount: Amount,
        tx_id: Uuid,
        at: Timestamp,
    },
    /// Everything held went back to the user in `tx_id`.
    Released {
        tx_id: Uuid,
        at: Timestamp,
    },
}

impl HoldState {
    /// Stored value of the state column: `pending`, `settled` or `released`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            HoldState::Pending => "pending",
            HoldState::Settled { .. } => "settled",
            HoldState::Released { .. } => "released",
        }
    }

    pub const fn is_pending(&self) -> bool {
        matches!(self, HoldState::Pending)
    }

    /// The transaction that ended the hold.
    pub const fn finish_tx_id(&self) -> Option<Uuid> {
        match self {
            HoldState::Pending => None,
            HoldState::Settled { tx_id, .. } | HoldState::Released { tx_id, .. } => Some(*tx_id),
        }
    }
}

/// A hold to reserve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewHold {
    /// Chosen by the caller, typically the withdrawal's or swap's own id.
    pub id: Uuid,
    pub purpose: HoldPurpose,
    pub user: UserAccount,
    /// The account the money goes to on settle, in the same asset (usually the treasury).
    pub counter: AccountKey,
    pub amount: Amount,
}

/// A reserved amount and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub id: Uuid,
    pub purpose: HoldPurpose,
    pub user: UserAccount,
    pub counter: AccountKey,
    pub amount: Amount,
    pub reference_type: ReferenceType,
    pub reference_id: Uuid,
    pub reserve_tx_id: Uuid,
    pub created_at: Timestamp,
    pub state: HoldState,
}

impl Hold {
    /// The one legal transition: pending to settled or released. Anything else is refused with
    /// a typed error, so a hold cannot be settled or released twice.
    pub fn finish(&self, next: HoldState) -> Result<Hold, LedgerError> {
        if !self.state.is_pending() {
            return Err(LedgerError::HoldNotPending {
                id: self.id,
                state: self.state.as_str(),
            });
        }
        if next.is_pending() {
            return Err(LedgerError::Invariant(format!(
                "hold {} cannot finish as pending",
                self.id
            )));
        }
        Ok(Hold {
            state: next,
            ..self.clone()
        })
    }

    /// The pending entries of the reserve transaction. Operations write these and
    /// reconciliation expects exactly these, so both read the hold the same way.
    pub(crate) fn reserve_lines(&self) -> Vec<Line> {
        self.pending_lines(Phase::Pending, self.amount)
    }

    /// The pending-phase entries of a settle for `amount`: post it, release the rest. `None`
    /// when `amount` exceeds the hold.
    pub(crate) fn settle_lines(&self, amount: Amount) -> Option<Vec<Line>> {
        let rest = self.amount.checked_sub(amount)?;
        let mut lines = self.pending_lines(Phase::PendingPosted, amount);
        if !rest.is_zero() {
            lines.extend(self.pending_lines(Phase::PendingVoided, rest));
        }
        Some(lines)
    }

    /// The entries of a release: void everything held.
    pub(crate) fn release_lines(&self) -> Vec<Line> {
        self.pending_lines(Phase::PendingVoided, self.amount)
    }

    fn pending_lines(&self, phase: Phase, amount: Amount) -> Vec<Line> {
        vec![
            Line::new(self.user.key(), Direction::Debit, phase, amount),
            Line::new(self.counter.clone(), Direction::Credit, phase, amount),
        ]
    }
}
