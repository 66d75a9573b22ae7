//! What a ledger operation can end with besides success. Business refusals keep their contract
//! code; everything else means the caller asked for something impossible and must not move
//! money on, so it becomes [`CoreError::Invariant`] at the core boundary.

use uuid::Uuid;

use crate::error::{CoreError, ErrorCode, PortError, Refusal};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// A business answer (`INSUFFICIENT_BALANCE`, `AMOUNT_TOO_SMALL`, `AMOUNT_TOO_LARGE`,
    /// `VALIDATION_FAILED`). Nothing was written.
    #[error("{0}")]
    Refused(Refusal),
    #[error("hold {0} does not exist")]
    HoldNotFound(Uuid),
    /// The hold was already settled or released: it ends exactly once.
    #[error("hold {id} is already {state}")]
    HoldNotPending { id: Uuid, state: &'static str },
    #[error("hold {0} already exists")]
    HoldExists(Uuid),
    #[error("ledger transaction {0} already exists")]
    TransactionExists(Uuid),
    #[error(transparent)]
    Port(#[from] PortError),
    /// The request would unbalance or corrupt the ledger (unbalanced legs, mixed assets, a
    /// pending total going below zero).
    #[error("ledger invariant violated: {0}")]
    Invariant(String),
}

impl LedgerError {
    pub(crate) fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        LedgerError::Refused(Refusal::new(code, message))
    }

    /// The contract code of a business refusal.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            LedgerError::Refused(r) => Some(r.code),
            _ => None,
        }
    }
}

impl From<Refusal> for LedgerError {
    fn from(r: Refusal) -> Self {
        LedgerError::Refused(r)
    }
}

impl From<LedgerError> for CoreError {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Refused(r) => CoreError::Refused(r),
            LedgerError::Port(p) => CoreError::Port(p),
            other => CoreError::Invariant(other.to_string()),
        }
    }
}
