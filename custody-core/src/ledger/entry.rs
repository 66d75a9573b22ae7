//! Ledger transactions and their entries: the append-only record. Account totals are a cache of
//! these; nothing here is ever updated or deleted once written.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::amount::Amount;
use crate::asset::AssetId;
use crate::time::Timestamp;

use super::account::AccountKey;

/// Most entries one transaction may carry: a settle with fee and gas legs needs about eight.
pub const ENTRIES_PER_TX_MAX: usize = 32;

stored_enum! {
    /// The side of an entry. Debits and credits of a transaction are equal per asset.
    Direction {
        Debit => "debit",
        Credit => "credit",
    }
}

stored_enum! {
    /// Which totals an entry moves. Only holds create pending amounts, and only their settle or
    /// release removes them, so every pending total is explained by a pending hold.
    Phase {
        /// Adds to the posted total of its side.
        Posted => "posted",
        /// Adds to the pending total of its side (a hold is reserved).
        Pending => "pending",
        /// Moves from pending to posted on its side (a hold is settled).
        PendingPosted => "pending_posted",
        /// Removes from the pending total of its side (a hold, or its unused rest, is released).
        PendingVoided => "pending_voided",
    }
}

stored_enum! {
    /// What a transaction is for; shown as `kind` in wallet history.
    TxKind {
        InternalTransfer => "internal_transfer",
        Adjustment => "adjustment",
        DepositCredit => "deposit_credit",
        DepositReversal => "deposit_reversal",
        WithdrawalHold => "withdrawal_hold",
        WithdrawalSettle => "withdrawal_settle",
        WithdrawalRelease => "withdrawal_release",
        SwapHold => "swap_hold",
        SwapSettle => "swap_settle",
        SwapRelease => "swap_release",
        /// Funds moved from deposit addresses to the hot wallet.
        Sweep => "sweep",
        /// Native coin sent to a deposit address so it can pay gas for a sweep.
        TreasuryFunding => "treasury_funding",
        /// Gas paid outside any other transaction.
        NetworkFee => "network_fee",
    }
}

impl TxKind {
    /// Kinds that only [`super::ops::reserve`], `settle` and `release` may write: they carry a
    /// hold id, so every pending amount can be traced to its hold.
    pub const fn is_hold_kind(self) -> bool {
        matches!(
            self,
            TxKind::WithdrawalHold
                | TxKind::WithdrawalSettle
                | TxKind::WithdrawalRelease
                | TxKind::SwapHold
                | TxKind::SwapSettle
                | TxKind::SwapRelease
        )
    }
}

stored_enum! {
    /// The kind of record a transaction belongs to; with `reference_id` it lets history link
    /// back to the deposit, withdrawal, swap or transfer.
    ReferenceType {
        Deposit => "deposit",
        Withdrawal => "withdrawal",
        Swap => "swap",
        InternalTransfer => "internal_transfer",
        /// An operator correction; the id is its audit record.
        Adjustment => "adjustment",
        Sweep => "sweep",
        TreasuryFunding => "treasury_funding",
    }
}

/// The identity of a transaction to write. The id is chosen by the caller (derived from the
/// record it belongs to, or drawn from `Entropy`), so the core needs no randomness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxMeta {
    pub id: Uuid,
    pub reference_type: ReferenceType,
    pub reference_id: Uuid,
    pub created_at: Timestamp,
}

/// A posted movement requested by a caller of [`super::ops::post`] or as extra legs of a
/// settle. Pending movements are never requested directly: holds make them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leg {
    pub account: AccountKey,
    pub direction: Direction,
    pub amount: Amount,
}

impl Leg {
    pub fn debit(account: AccountKey, amount: Amount) -> Self {
        Leg {
            account,
            direction: Direction::Debit,
            amount,
        }
    }

    pub fn credit(account: AccountKey, amount: Amount) -> Self {
        Leg {
            account,
            direction: Direction::Credit,
            amount,
        }
    }
}

/// One line of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Derived from the transaction id and the entry's position ([`entry_id`]).
    pub id: Uuid,
    pub account: AccountKey,
    pub direction: Direction,
    pub phase: Phase,
    pub amount: Amount,
    /// For a user account, its available balance right after this entry (entries apply in
    /// order); `None` for system accounts. Stored so history never recomputes the past.
    pub balance_after: Option<Amount>,
}

impl Entry {
    /// How this entry moved the owner's available balance: `None` for system accounts and for
    /// entries that leave it unchanged (a pending debit becoming posted), which history hides
    /// because the money already left `available` when the hold was made.
    pub fn history_direction(&self) -> Option<Direction> {
        self.account.as_user()?;
        use {Direction::*, Phase::*};
        match (self.direction, self.phase) {
            (Credit, Posted | PendingPosted) | (Debit, PendingVoided) => Some(Credit),
            (Debit, Posted | Pending) => Some(Debit),
            (Debit, PendingPosted) | (Credit, Pending | PendingVoided) => None,
        }
    }
}

/// An append-only ledger transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerTx {
    pub id: Uuid,
    pub kind: TxKind,
    pub reference_type: ReferenceType,
    pub reference_id: Uuid,
    /// The hold a hold kind reserves, settles or releases; `None` for every other kind.
    pub hold_id: Option<Uuid>,
    pub created_at: Timestamp,
    pub entries: Vec<Entry>,
}

/// The id of the `index`-th entry of transaction `tx_id`: a UUIDv8 over SHA-256, so entry ids
/// are unique without randomness and the same transaction always has the same entry ids.
pub fn entry_id(tx_id: Uuid, index: usize) -> Uuid {
    let mut h = Sha256::new();
    h.update(b"custody-ledger-entry\n");
    h.update(tx_id.as_bytes());
    h.update(u64::try_from(index).unwrap_or(u64::MAX).to_be_bytes());
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Why `tx` has an entry whose id is not [`entry_id`] of the transaction's id and the entry's
/// position. Every posting derives its ids so; a store refuses any other id
/// ([`LedgerRepo::insert_ledger_transaction`](super::LedgerRepo::insert_ledger_transaction)),
/// which keeps entry ids unique wherever transaction ids are, without an index of entry ids.
pub fn check_entry_ids(tx: &LedgerTx) -> Result<(), String> {
    match tx
        .entries
        .iter()
        .enumerate()
        .find(|(i, e)| e.id != entry_id(tx.id, *i))
    {
        Some((i, e)) => Err(format!(
            "entry {i} of transaction {} has id {}, not the id derived from its position ({})",
            tx.id,
            e.id,
            entry_id(tx.id, i)
        )),
        None => Ok(()),
    }
}

/// Why a set of entries is not a valid transaction; the text names what is wrong.
pub(crate) fn check_entries(entries: &[Entry]) -> Result<(), String> {
    if entries.is_empty() {
        return Err("has no entries".into());
    }
    if entries.len() > ENTRIES_PER_TX_MAX {
        return Err(format!(
            "has {} entries (at most {ENTRIES_PER_TX_MAX})",
            entries.len()
        ));
    }
    let mut sums: BTreeMap<(&AssetId, Phase), (Amount, Amount)> = BTreeMap::new();
    for (i, e) in entries.iter().enumerate() {
        if e.amount.is_zero() {
            return Err(format!("entry {i} has a zero amount"));
        }
        let (debits, credits) = sums.entry((e.account.asset(), e.phase)).or_default();
        let side = match e.direction {
            Direction::Debit => debits,
            Direction::Credit => credits,
        };
        *side = side
            .checked_add(e.amount)
            .ok_or_else(|| format!("entry {i} overflows a sum"))?;
    }
    for ((asset, phase), (debits, credits)) in sums {
        if debits != credits {
            return Err(format!(
                "is unbalanced in {} {} ({phase}): debits {debits} != credits {credits}",
                asset.network, asset.code
            ));
        }
    }
    Ok(())
}
