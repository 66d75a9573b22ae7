//! A complete in-memory [`LedgerRepo`]: the reference the store adapters' conformance tests are
//! compared with, and a ledger for tests. It has no transactions of its own;
//! clone it to keep a snapshot.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use custody_core::error::PortError;
use custody_core::network::Network;

use custody_core::ledger::{
    check_entry_ids, AccountBalances, AccountKey, HistoryEntry, Hold, HoldState, LedgerReads,
    LedgerRepo, LedgerTx,
};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryLedger {
    accounts: BTreeMap<AccountKey, AccountBalances>,
    /// In commit order.
    transactions: Vec<LedgerTx>,
    tx_index: BTreeMap<Uuid, usize>,
    /// Entry ids are unique across the ledger. Every store refuses an id not derived from its
    /// transaction and position (`check_entry_ids`), which alone keeps them unique; this set
    /// checks it a second way.
    entry_ids: BTreeSet<Uuid>,
    holds: BTreeMap<Uuid, Hold>,
}

const PORT: &str = "ledger";

impl MemoryLedger {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn accounts(&self) -> &BTreeMap<AccountKey, AccountBalances> {
        &self.accounts
    }

    pub fn transactions(&self) -> &[LedgerTx] {
        &self.transactions
    }

    pub fn holds(&self) -> impl Iterator<Item = &Hold> {
        self.holds.values()
    }
}

impl LedgerRepo for MemoryLedger {
    fn put_ledger_account(
        &mut self,
        key: &AccountKey,
        balances: &AccountBalances,
    ) -> Result<(), PortError> {
        self.accounts.insert(key.clone(), *balances);
        Ok(())
    }

    fn insert_ledger_transaction(&mut self, tx: &LedgerTx) -> Result<(), PortError> {
        if self.tx_index.contains_key(&tx.id) {
            return Err(PortError::permanent(
                PORT,
                format!("transaction {} exists", tx.id),
            ));
        }
        check_entry_ids(tx).map_err(|e| PortError::permanent(PORT, e))?;
        let mut ids = BTreeSet::new();
        for e in &tx.entries {
            if self.entry_ids.contains(&e.id) || !ids.insert(e.id) {
                return Err(PortError::permanent(PORT, format!("entry {} exists", e.id)));
            }
        }
        self.entry_ids.append(&mut ids);
        self.tx_index.insert(tx.id, self.transactions.len());
        self.transactions.push(tx.clone());
        Ok(())
    }

    fn insert_ledger_hold(&mut self, hold: &Hold) -> Result<(), PortError> {
        if self.holds.contains_key(&hold.id) {
            return Err(PortError::permanent(
                PORT,
                format!("hold {} exists", hold.id),
            ));
        }
        self.holds.insert(hold.id, hold.clone());
        Ok(())
    }

    fn finish_ledger_hold(&mut self, id: Uuid, state: &HoldState) -> Result<(), PortError> {
        match self.holds.get_mut(&id) {
            Some(hold) if hold.state.is_pending() && !state.is_pending() => {
                hold.state = *state;
                Ok(())
            }
            _ => Err(PortError::permanent(
                PORT,
                format!("hold {id} is not pending"),
            )),
        }
    }
}

impl LedgerReads for MemoryLedger {
    fn list_ledger_transactions(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<LedgerTx>, PortError> {
        Ok(custody_core::page::select(
            &self.transactions,
            |t| (t.created_at, t.id),
            page,
        ))
    }

    fn ledger_account(&mut self, key: &AccountKey) -> Result<Option<AccountBalances>, PortError> {
        Ok(self.accounts.get(key).copied())
    }

    fn ledger_accounts(
        &mut self,
        keys: &[AccountKey],
    ) -> Result<Vec<Option<AccountBalances>>, PortError> {
        Ok(keys.iter().map(|k| self.accounts.get(k).copied()).collect())
    }

    fn ledger_transaction(&mut self, id: Uuid) -> Result<Option<LedgerTx>, PortError> {
        Ok(self
            .tx_index
            .get(&id)
            .map(|&i| self.transactions[i].clone()))
    }

    fn ledger_hold(&mut self, id: Uuid) -> Result<Option<Hold>, PortError> {
        Ok(self.holds.get(&id).cloned())
    }

    fn ledger_history(
        &mut self,
        tenant: &custody_core::tenant::TenantId,
        user: &str,
        network: Network,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, PortError> {
        let rows = self.transactions.iter().rev().flat_map(|tx| {
            tx.entries.iter().rev().filter_map(move |e| {
                let owner = e.account.as_user()?;
                let mine = owner.tenant == tenant.as_str()
                    && owner.user == user
                    && owner.asset.network == network;
                if mine {
                    HistoryEntry::from_entry(tx, e)
                } else {
                    None
                }
            })
        });
        Ok(rows.take(limit).collect())
    }

    fn scan_ledger_accounts(
        &mut self,
        visit: &mut dyn FnMut(&AccountKey, &AccountBalances),
    ) -> Result<(), PortError> {
        for (key, balances) in &self.accounts {
            visit(key, balances);
        }
        Ok(())
    }

    fn scan_ledger_transactions(
        &mut self,
        visit: &mut dyn FnMut(&LedgerTx),
    ) -> Result<(), PortError> {
        self.transactions.iter().for_each(visit);
        Ok(())
    }

    fn scan_ledger_holds(&mut self, visit: &mut dyn FnMut(&Hold)) -> Result<(), PortError> {
        self.holds.values().for_each(visit);
        Ok(())
    }
}
