//! Whose money an entry moves, and the four totals every account caches.
//!
//! An account is identified by its key alone: there is no account row to create first, so a
//! posting to a user who never had money simply starts from zero totals. Every account holds one
//! asset (network + code), which is what makes "balanced per asset" checkable.

use std::fmt;

use crate::amount::Amount;
use crate::asset::AssetId;
use crate::network::Network;

use super::entry::{Direction, Phase};

/// The service's own books, one of each per asset. They have no balance constraint: a system
/// account may be net debit (the treasury holds what users are owed, so it is debit-normal).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SystemAccount {
    /// What the network's hot wallet holds (an asset of the service).
    Treasury,
    /// Deposits credited to users but not yet swept from their deposit addresses.
    DepositClearing,
    /// Fees, markup and spread earned.
    Revenue,
    /// Gas the service paid (an expense).
    NetworkFees,
    /// The other side of operator corrections, so a correction never creates money silently.
    Adjustments,
    /// What users owe the service after a reorganization took back a credited deposit they
    /// had already spent (debit-normal). Settled when the transfer is mined again.
    ReorgReceivable,
}

impl SystemAccount {
    pub const ALL: [SystemAccount; 6] = [
        SystemAccount::Treasury,
        SystemAccount::DepositClearing,
        SystemAccount::Revenue,
        SystemAccount::NetworkFees,
        SystemAccount::Adjustments,
        SystemAccount::ReorgReceivable,
    ];

    /// Stored value; never change one that has shipped.
    pub const fn as_str(self) -> &'static str {
        match self {
            SystemAccount::Treasury => "treasury",
            SystemAccount::DepositClearing => "deposit_clearing",
            SystemAccount::Revenue => "revenue",
            SystemAccount::NetworkFees => "network_fees",
            SystemAccount::Adjustments => "adjustments",
            SystemAccount::ReorgReceivable => "reorg_receivable",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        SystemAccount::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// What the service owes one end user of one tenant in one asset. Credit-normal and never
/// overdrawn: debits (posted and pending) never exceed posted credits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserAccount {
    pub tenant: String,
    /// The partner's `external_user_id`.
    pub user: String,
    pub asset: AssetId,
}

impl UserAccount {
    pub fn new(tenant: impl Into<String>, user: impl Into<String>, asset: AssetId) -> Self {
        UserAccount {
            tenant: tenant.into(),
            user: user.into(),
            asset,
        }
    }

    pub fn key(&self) -> AccountKey {
        AccountKey::User(self.clone())
    }

    /// Another user of the same tenant in the same asset: built this way, an internal transfer
    /// cannot cross tenants or assets.
    pub fn with_user(&self, user: impl Into<String>) -> Self {
        UserAccount {
            tenant: self.tenant.clone(),
            user: user.into(),
            asset: self.asset.clone(),
        }
    }
}

/// Identity of a ledger account.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AccountKey {
    User(UserAccount),
    System {
        account: SystemAccount,
        asset: AssetId,
    },
}

impl AccountKey {
    pub fn system(account: SystemAccount, asset: AssetId) -> Self {
        AccountKey::System { account, asset }
    }

    pub fn asset(&self) -> &AssetId {
        match self {
            AccountKey::User(u) => &u.asset,
            AccountKey::System { asset, .. } => asset,
        }
    }

    pub fn network(&self) -> Network {
        self.asset().network
    }

    /// `Some` for the accounts that carry the no-overdraft constraint and appear in history.
    pub fn as_user(&self) -> Option<&UserAccount> {
        match self {
            AccountKey::User(u) => Some(u),
            AccountKey::System { .. } => None,
        }
    }

    /// One string per account, for a primary key column:
    /// `user:{tenant}:{network}:{asset}:{user}` or `system:{name}:{network}:{asset}`.
    ///
    /// Tenant, user and asset code are escaped (`%` as `%25`, `:` as `%3A`, nothing else), so
    /// no field can contain the separator and two different keys never render the same string,
    /// whatever characters partners put in their user ids.
    pub fn storage_id(&self) -> String {
        let mut s = String::new();
        match self {
            AccountKey::User(u) => {
                s.push_str("user:");
                escape_into(&mut s, &u.tenant);
                s.push(':');
                s.push_str(u.asset.network.as_str());
                s.push(':');
                escape_into(&mut s, &u.asset.code);
                s.push(':');
                escape_into(&mut s, &u.user);
            }
            AccountKey::System { account, asset } => {
                s.push_str("system:");
                s.push_str(account.as_str());
                s.push(':');
                s.push_str(asset.network.as_str());
                s.push(':');
                escape_into(&mut s, &asset.code);
            }
        }
        s
    }

    /// The inverse of [`AccountKey::storage_id`]; `None` for anything it cannot have written
    /// (including non-canonical escapes), so a stored id maps back to exactly one key.
    pub fn from_storage_id(s: &str) -> Option<AccountKey> {
        let parts: Vec<&str> = s.split(':').collect();
        match parts.as_slice() {
            ["user", tenant, network, code, user] => Some(AccountKey::User(UserAccount {
                tenant: unescape(tenant)?,
                user: unescape(user)?,
                asset: AssetId::new(network.parse().ok()?, unescape(code)?),
            })),
            ["system", name, network, code] => Some(AccountKey::System {
                account: SystemAccount::parse(name)?,
                asset: AssetId::new(network.parse().ok()?, unescape(code)?),
            }),
            _ => None,
        }
    }
}

impl fmt::Display for AccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.storage_id())
    }
}

fn escape_into(out: &mut String, field: &str) {
    for c in field.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

fn unescape(field: &str) -> Option<String> {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let escape = rest.get(i..i + 3)?;
        out.push(match escape {
            "%25" => '%',
            "%3A" => ':',
            _ => return None,
        });
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

/// The cached totals of one account, TigerBeetle style: everything else is derived, and each
/// total only ever grows except pending ones, which shrink when a hold settles or is released.
/// They must always equal the sum of the account's entries (reconciliation checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccountBalances {
    pub debits_posted: Amount,
    pub credits_posted: Amount,
    pub debits_pending: Amount,
    pub credits_pending: Amount,
}

/// Why an entry cannot be applied to an account's totals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TotalsError {
    /// A total would exceed `Amount::MAX`.
    Overflow,
    /// A hold would settle or release more than is pending on the account.
    PendingUnderflow,
}

impl AccountBalances {
    pub const ZERO: AccountBalances = AccountBalances {
        debits_posted: Amount::ZERO,
        credits_posted: Amount::ZERO,
        debits_pending: Amount::ZERO,
        credits_pending: Amount::ZERO,
    };

    /// What a user may spend: posted credits less posted and pending debits. `None` when debits
    /// exceed credits, which for a user account means the ledger is broken (reconciliation
    /// reports it); for a system account it is merely net debit.
    pub fn available(&self) -> Option<Amount> {
        self.credits_posted
            .checked_sub(self.debits_posted.checked_add(self.debits_pending)?)
    }

    /// What a user has on hold (withdrawals and swaps not yet settled or released).
    pub fn reserved(&self) -> Amount {
        self.debits_pending
    }

    /// Applies one entry. On error `self` is unchanged.
    pub(crate) fn apply(
        &mut self,
        direction: Direction,
        phase: Phase,
        amount: Amount,
    ) -> Result<(), TotalsError> {
        let (posted, pending) = match direction {
            Direction::Debit => (&mut self.debits_posted, &mut self.debits_pending),
            Direction::Credit => (&mut self.credits_posted, &mut self.credits_pending),
        };
        match phase {
            Phase::Posted => *posted = posted.checked_add(amount).ok_or(TotalsError::Overflow)?,
            Phase::Pending => {
                *pending = pending.checked_add(amount).ok_or(TotalsError::Overflow)?;
            }
            Phase::PendingPosted => {
                let new_pending = pending
                    .checked_sub(amount)
                    .ok_or(TotalsError::PendingUnderflow)?;
                let new_posted = posted.checked_add(amount).ok_or(TotalsError::Overflow)?;
                *pending = new_pending;
                *posted = new_posted;
            }
            Phase::PendingVoided => {
                *pending = pending
                    .checked_sub(amount)
                    .ok_or(TotalsError::PendingUnderflow)?;
            }
        }
        Ok(())
    }
}
