//! The operations that move money. Each runs inside the caller's store transaction, checks
//! everything before writing, and returns the transaction it appended.

use uuid::Uuid;

use crate::amount::Amount;
use crate::error::{ErrorCode, Refusal};
use crate::time::Timestamp;

use super::account::{AccountBalances, AccountKey, SystemAccount, UserAccount};
use super::entry::{Direction, LedgerTx, Leg, Phase, TxKind, TxMeta};
use super::error::LedgerError;
use super::hold::{Hold, HoldState, NewHold};
use super::posting::{commit, prepare, Line};
use super::repo::{LedgerReads, LedgerRepo};

/// Posts `legs` as one transaction: the general path for movements between system accounts
/// (sweeps, gas, treasury funding) and the base of the user operations below.
///
/// Legs must balance per asset; hold kinds are refused because only holds may create or remove
/// pending amounts.
pub fn post<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    kind: TxKind,
    legs: &[Leg],
) -> Result<LedgerTx, LedgerError> {
    if kind.is_hold_kind() {
        return Err(LedgerError::Invariant(format!(
            "{kind} is written by holds only"
        )));
    }
    let lines = legs.iter().map(posted).collect();
    let prepared = prepare(repo, kind, meta, None, lines)?;
    commit(repo, &prepared)?;
    Ok(prepared.tx)
}

/// Moves `amount` from `sender` to another user of the same tenant in the same asset (the
/// recipient is named by id only, so the transfer cannot cross tenants or assets).
pub fn transfer<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    sender: &UserAccount,
    recipient_user: &str,
    amount: Amount,
) -> Result<LedgerTx, LedgerError> {
    require_positive(amount)?;
    if recipient_user == sender.user {
        return Err(Refusal::validation(
            "recipient_external_user_id",
            "must differ from the sender",
        )
        .into());
    }
    let recipient = sender.with_user(recipient_user);
    let legs = [
        Leg::debit(sender.key(), amount),
        Leg::credit(recipient.key(), amount),
    ];
    post(repo, meta, TxKind::InternalTransfer, &legs)
}

/// A transfer as posted, with both users' balances after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferPosted {
    pub tx: LedgerTx,
    pub sender: UserBalance,
    pub recipient: UserBalance,
}

/// [`transfer`], also answering both users' balances after it from the totals the posting
/// computed anyway: the `balance.updated` events need them, and reading them back would cost
/// two statements per transfer for figures already in hand.
pub fn transfer_with_balances<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    sender: &UserAccount,
    recipient_user: &str,
    amount: Amount,
) -> Result<TransferPosted, LedgerError> {
    require_positive(amount)?;
    if recipient_user == sender.user {
        return Err(Refusal::validation(
            "recipient_external_user_id",
            "must differ from the sender",
        )
        .into());
    }
    let sender_key = sender.key();
    let recipient_key = sender.with_user(recipient_user).key();
    let lines = vec![
        posted(&Leg::debit(sender_key.clone(), amount)),
        posted(&Leg::credit(recipient_key.clone(), amount)),
    ];
    let prepared = prepare(repo, TxKind::InternalTransfer, meta, None, lines)?;
    let balance_of = |key: &AccountKey| -> Result<UserBalance, LedgerError> {
        let totals = prepared
            .totals
            .get(key)
            .ok_or_else(|| LedgerError::Invariant(format!("{key} has no computed totals")))?;
        let available = totals
            .available()
            .ok_or_else(|| LedgerError::Invariant(format!("{key} is overdrawn")))?;
        Ok(UserBalance {
            available,
            reserved: totals.reserved(),
        })
    };
    let sender_balance = balance_of(&sender_key)?;
    let recipient_balance = balance_of(&recipient_key)?;
    commit(repo, &prepared)?;
    Ok(TransferPosted {
        tx: prepared.tx,
        sender: sender_balance,
        recipient: recipient_balance,
    })
}

/// An operator correction against the `adjustments` account. A debit cannot take the user's
/// available balance below zero: a correction never overdraws.
pub fn adjust<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    user: &UserAccount,
    direction: Direction,
    amount: Amount,
) -> Result<LedgerTx, LedgerError> {
    require_positive(amount)?;
    let other = AccountKey::system(SystemAccount::Adjustments, user.asset.clone());
    let legs = match direction {
        Direction::Credit => [Leg::debit(other, amount), Leg::credit(user.key(), amount)],
        Direction::Debit => [Leg::debit(user.key(), amount), Leg::credit(other, amount)],
    };
    post(repo, meta, TxKind::Adjustment, &legs)
}

/// Credits a confirmed deposit. Exactly-once is the deposit's state machine's job (and
/// reconciliation checks it per deposit id).
pub fn credit_deposit<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    user: &UserAccount,
    amount: Amount,
) -> Result<LedgerTx, LedgerError> {
    require_positive(amount)?;
    let clearing = AccountKey::system(SystemAccount::DepositClearing, user.asset.clone());
    let legs = [
        Leg::debit(clearing, amount),
        Leg::credit(user.key(), amount),
    ];
    post(repo, meta, TxKind::DepositCredit, &legs)
}

/// Takes back a credited deposit whose block was reorganized away: what the user still has
/// available, up to `amount`, and the rest (the shortfall, already spent) as a receivable of the
/// service, so the books show the debt instead of overdrawing the user or posting nothing.
/// Returns the transaction and the shortfall.
pub fn reverse_deposit<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    user: &UserAccount,
    amount: Amount,
) -> Result<(LedgerTx, Amount), LedgerError> {
    require_positive(amount)?;
    let available = user_balance(repo, user)?.available;
    let taken = available.min(amount);
    let shortfall = amount
        .checked_sub(taken)
        .ok_or_else(|| LedgerError::Invariant("reversal larger than the deposit".into()))?;
    let clearing = AccountKey::system(SystemAccount::DepositClearing, user.asset.clone());
    let receivable = AccountKey::system(SystemAccount::ReorgReceivable, user.asset.clone());
    let mut legs = vec![Leg::credit(clearing, amount)];
    if !taken.is_zero() {
        legs.push(Leg::debit(user.key(), taken));
    }
    if !shortfall.is_zero() {
        legs.push(Leg::debit(receivable, shortfall));
    }
    let tx = post(repo, meta, TxKind::DepositReversal, &legs)?;
    Ok((tx, shortfall))
}

/// Credits a deposit mined again after a reversal that left `shortfall` owed: the receivable is
/// settled first and the user gets the rest, so the user ends where the first credit left them.
pub fn recredit_deposit<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    user: &UserAccount,
    amount: Amount,
    shortfall: Amount,
) -> Result<LedgerTx, LedgerError> {
    require_positive(amount)?;
    let settled = shortfall.min(amount);
    let to_user = amount
        .checked_sub(settled)
        .ok_or_else(|| LedgerError::Invariant("settlement larger than the deposit".into()))?;
    let clearing = AccountKey::system(SystemAccount::DepositClearing, user.asset.clone());
    let receivable = AccountKey::system(SystemAccount::ReorgReceivable, user.asset.clone());
    let mut legs = vec![Leg::debit(clearing, amount)];
    if !settled.is_zero() {
        legs.push(Leg::credit(receivable, settled));
    }
    if !to_user.is_zero() {
        legs.push(Leg::credit(user.key(), to_user));
    }
    post(repo, meta, TxKind::DepositCredit, &legs)
}

/// Reserves `hold.amount` of the user's available balance: a pending debit of the user and a
/// pending credit of the counter account, in one transaction `meta.id`. The hold remembers
/// `meta`'s reference so its settle and release point at the same record.
pub fn reserve<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    meta: &TxMeta,
    hold: &NewHold,
) -> Result<Hold, LedgerError> {
    require_positive(hold.amount)?;
    let user = hold.user.key();
    if hold.counter == user || hold.counter.asset() != &hold.user.asset {
        return Err(LedgerError::Invariant(format!(
            "hold {} cannot move {} to {}",
            hold.id, user, hold.counter
        )));
    }
    if repo.ledger_hold(hold.id)?.is_some() {
        return Err(LedgerError::HoldExists(hold.id));
    }
    let record = Hold {
        id: hold.id,
        purpose: hold.purpose,
        user: hold.user.clone(),
        counter: hold.counter.clone(),
        amount: hold.amount,
        reference_type: meta.reference_type,
        reference_id: meta.reference_id,
        reserve_tx_id: meta.id,
        created_at: meta.created_at,
        state: HoldState::Pending,
    };
    let lines = record.reserve_lines();
    let prepared = prepare(
        repo,
        hold.purpose.reserve_kind(),
        meta,
        Some(hold.id),
        lines,
    )?;
    commit(repo, &prepared)?;
    repo.insert_ledger_hold(&record)?;
    Ok(record)
}

/// Settling a hold: what to post and what else happens in the same transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settle {
    pub hold_id: Uuid,
    /// Id of the settle transaction.
    pub tx_id: Uuid,
    /// What the user finally pays, 1 to the held amount; the rest is released.
    pub amount: Amount,
    /// Posted legs committed atomically with the settle, e.g. the fee share moved from the
    /// counter account to `revenue`, gas from `treasury` to `network_fees` in the native
    /// asset, or the swap output credited to the user. They balance per asset on their own.
    pub also: Vec<Leg>,
    pub at: Timestamp,
}

/// A finished hold and the transaction that finished it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldOutcome {
    pub hold: Hold,
    pub tx: LedgerTx,
}

/// Posts `settle.amount` of a pending hold to its counter account and releases the rest.
/// A hold that is not pending is refused with [`LedgerError::HoldNotPending`], changing nothing.
pub fn settle<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    settle: &Settle,
) -> Result<HoldOutcome, LedgerError> {
    let hold = pending_hold(repo, settle.hold_id)?;
    require_positive(settle.amount)?;
    let mut lines = hold.settle_lines(settle.amount).ok_or_else(|| {
        LedgerError::refused(
            ErrorCode::AmountTooLarge,
            "cannot settle more than the hold",
        )
    })?;
    lines.extend(settle.also.iter().map(posted));
    let state = HoldState::Settled {
        amount: settle.amount,
        tx_id: settle.tx_id,
        at: settle.at,
    };
    finish(repo, &hold, hold.purpose.settle_kind(), lines, state)
}

/// Returns the whole of a pending hold to the user. A hold that is not pending is refused
/// with [`LedgerError::HoldNotPending`], changing nothing.
pub fn release<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    hold_id: Uuid,
    tx_id: Uuid,
    at: Timestamp,
) -> Result<HoldOutcome, LedgerError> {
    let hold = pending_hold(repo, hold_id)?;
    let lines = hold.release_lines();
    let state = HoldState::Released { tx_id, at };
    finish(repo, &hold, hold.purpose.release_kind(), lines, state)
}

/// A user's balance as the balances endpoint shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserBalance {
    pub available: Amount,
    pub reserved: Amount,
}

/// The available and reserved balance of a user account (zero if never used).
pub fn user_balance<R: LedgerReads + ?Sized>(
    repo: &mut R,
    account: &UserAccount,
) -> Result<UserBalance, LedgerError> {
    let totals = repo.ledger_account(&account.key())?.unwrap_or_default();
    balance_of(account, totals)
}

/// [`user_balance`] of each of `accounts`, in their order, read at once.
pub fn user_balances<R: LedgerReads + ?Sized>(
    repo: &mut R,
    accounts: &[UserAccount],
) -> Result<Vec<UserBalance>, LedgerError> {
    let keys: Vec<AccountKey> = accounts.iter().map(UserAccount::key).collect();
    let totals = repo.ledger_accounts(&keys)?;
    if totals.len() != accounts.len() {
        // A store's defect, not broken books: no invariant latch for it.
        return Err(LedgerError::Port(crate::error::PortError::permanent(
            "store",
            format!(
                "asked the totals of {} accounts, got {}",
                accounts.len(),
                totals.len()
            ),
        )));
    }
    accounts
        .iter()
        .zip(totals)
        .map(|(account, t)| balance_of(account, t.unwrap_or_default()))
        .collect()
}

fn balance_of(account: &UserAccount, totals: AccountBalances) -> Result<UserBalance, LedgerError> {
    let available = totals
        .available()
        .ok_or_else(|| LedgerError::Invariant(format!("{} is overdrawn", account.key())))?;
    Ok(UserBalance {
        available,
        reserved: totals.reserved(),
    })
}

fn posted(leg: &Leg) -> Line {
    Line::new(
        leg.account.clone(),
        leg.direction,
        Phase::Posted,
        leg.amount,
    )
}

fn require_positive(amount: Amount) -> Result<(), LedgerError> {
    if amount.is_zero() {
        return Err(LedgerError::refused(
            ErrorCode::AmountTooSmall,
            "amount_units must be greater than zero",
        ));
    }
    Ok(())
}

fn pending_hold<R: LedgerRepo + ?Sized>(repo: &mut R, id: Uuid) -> Result<Hold, LedgerError> {
    let hold = repo.ledger_hold(id)?.ok_or(LedgerError::HoldNotFound(id))?;
    if !hold.state.is_pending() {
        return Err(LedgerError::HoldNotPending {
            id,
            state: hold.state.as_str(),
        });
    }
    Ok(hold)
}

fn finish<R: LedgerRepo + ?Sized>(
    repo: &mut R,
    hold: &Hold,
    kind: TxKind,
    lines: Vec<Line>,
    state: HoldState,
) -> Result<HoldOutcome, LedgerError> {
    let (tx_id, at) = match state {
        HoldState::Settled { tx_id, at, .. } | HoldState::Released { tx_id, at } => (tx_id, at),
        HoldState::Pending => {
            return Err(LedgerError::Invariant(format!(
                "hold {} cannot finish as pending",
                hold.id
            )))
        }
    };
    let meta = TxMeta {
        id: tx_id,
        reference_type: hold.reference_type,
        reference_id: hold.reference_id,
        created_at: at,
    };
    let finished = hold.finish(state)?;
    let prepared = prepare(repo, kind, &meta, Some(hold.id), lines)?;
    commit(repo, &prepared)?;
    repo.finish_ledger_hold(hold.id, &finished.state)?;
    Ok(HoldOutcome {
        hold: finished,
        tx: prepared.tx,
    })
}
