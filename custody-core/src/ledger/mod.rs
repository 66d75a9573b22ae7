//! The double-entry ledger.
