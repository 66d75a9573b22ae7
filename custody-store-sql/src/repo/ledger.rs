use crate::sql::{params, Dialect, OptionalExtension, Row};
use custody_core::error::PortError;
use custody_core::ledger::{
    check_entry_ids, AccountBalances, AccountKey, Direction, Entry, HistoryEntry, Hold,
    HoldPurpose, HoldState, LedgerReads, LedgerRepo, LedgerTx, Phase, ReferenceType, TxKind,
};
use custody_core::Network;
use uuid::Uuid;

use super::{amount, bad, parse_uuid, ts};
use crate::tx::{db_err, SqlTx};

fn account_key(s: &str) -> Result<AccountKey, PortError> {
    AccountKey::from_storage_id(s).ok_or_else(|| bad("account id", s))
}

/// Above this many keys, `ledger_accounts` asks key by key (one statement text per count).
const MAX_KEYS_AT_ONCE: usize = 16;

/// The statement of `ledger_accounts` for `n` keys (1 to MAX_KEYS_AT_ONCE), built once per
/// process.
fn accounts_sql(n: usize) -> &'static str {
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    let all = SQL.get_or_init(|| {
        (0..=MAX_KEYS_AT_ONCE)
            .map(|n| {
                (1..=n)
                    .map(|i| {
                        format!(
                            "SELECT id, debits_posted, credits_posted, debits_pending, \
                             credits_pending FROM ledger_accounts WHERE id = ?{i}"
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(" UNION ALL ")
            })
            .collect()
    });
    &all[n]
}

fn balances(row: &Row<'_>, from: usize) -> crate::sql::Result<[String; 4]> {
    Ok([
        row.get(from)?,
        row.get(from + 1)?,
        row.get(from + 2)?,
        row.get(from + 3)?,
    ])
}

fn decode_balances(raw: &[String; 4]) -> Result<AccountBalances, PortError> {
    Ok(AccountBalances {
        debits_posted: amount(&raw[0])?,
        credits_posted: amount(&raw[1])?,
        debits_pending: amount(&raw[2])?,
        credits_pending: amount(&raw[3])?,
    })
}

struct RawTx {
    seq: i64,
    id: String,
    kind: String,
    reference_type: String,
    reference_id: String,
    hold_id: Option<String>,
    created_at: i64,
}

const TX_COLUMNS: &str = "seq, id, kind, reference_type, reference_id, hold_id, created_at";

fn raw_tx(r: &Row<'_>) -> crate::sql::Result<RawTx> {
    Ok(RawTx {
        seq: r.get(0)?,
        id: r.get(1)?,
        kind: r.get(2)?,
        reference_type: r.get(3)?,
        reference_id: r.get(4)?,
        hold_id: r.get(5)?,
        created_at: r.get(6)?,
    })
}

struct RawHold {
    cols: [String; 8],
    created_at: i64,
    state: String,
    settled_amount: Option<String>,
    finish_tx_id: Option<String>,
    finished_at: Option<i64>,
}

const HOLD_COLUMNS: &str =
    "id, purpose, user_account_id, counter_account_id, amount, reference_type, \
     reference_id, reserve_tx_id, created_at, state, settled_amount, finish_tx_id, finished_at";

fn raw_hold(r: &Row<'_>) -> crate::sql::Result<RawHold> {
    Ok(RawHold {
        cols: [
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
        ],
        created_at: r.get(8)?,
        state: r.get(9)?,
        settled_amount: r.get(10)?,
        finish_tx_id: r.get(11)?,
        finished_at: r.get(12)?,
    })
}

fn decode_hold(h: RawHold) -> Result<Hold, PortError> {
    let [id, purpose, user, counter, held, reference_type, reference_id, reserve_tx] = &h.cols;
    let user = account_key(user)?
        .as_user()
        .cloned()
        .ok_or_else(|| bad("hold user account", user))?;
    let state = match h.state.as_str() {
        "pending" => HoldState::Pending,
        "settled" => HoldState::Settled {
            amount: amount(h.settled_amount.as_deref().unwrap_or(""))?,
            tx_id: parse_uuid(h.finish_tx_id.as_deref().unwrap_or(""))?,
            at: ts(h
                .finished_at
                .ok_or_else(|| bad("hold finished_at", "null"))?),
        },
        "released" => HoldState::Released {
            tx_id: parse_uuid(h.finish_tx_id.as_deref().unwrap_or(""))?,
            at: ts(h
                .finished_at
                .ok_or_else(|| bad("hold finished_at", "null"))?),
        },
        other => return Err(bad("hold state", other)),
    };
    Ok(Hold {
        id: parse_uuid(id)?,
        purpose: HoldPurpose::parse(purpose).ok_or_else(|| bad("hold purpose", purpose))?,
        user,
        counter: account_key(counter)?,
        amount: amount(held)?,
        reference_type: ReferenceType::parse(reference_type)
            .ok_or_else(|| bad("reference type", reference_type))?,
        reference_id: parse_uuid(reference_id)?,
        reserve_tx_id: parse_uuid(reserve_tx)?,
        created_at: ts(h.created_at),
        state,
    })
}

impl SqlTx<'_> {
    fn load_entries(&self, seq: i64) -> Result<Vec<Entry>, PortError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT id, account_id, direction, phase, amount, balance_after \
                 FROM ledger_entries WHERE tx_seq = ?1 ORDER BY idx",
            )
            .map_err(db_err)?
            .query_map([seq], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, Option<String>>(5)?,
                ))
            })
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter()
            .map(|(id, account, direction, phase, amt, after)| {
                Ok(Entry {
                    id: parse_uuid(&id)?,
                    account: account_key(&account)?,
                    direction: Direction::parse(&direction)
                        .ok_or_else(|| bad("direction", &direction))?,
                    phase: Phase::parse(&phase).ok_or_else(|| bad("phase", &phase))?,
                    amount: amount(&amt)?,
                    balance_after: after.as_deref().map(amount).transpose()?,
                })
            })
            .collect()
    }

    fn decode_tx(&self, raw: RawTx) -> Result<LedgerTx, PortError> {
        Ok(LedgerTx {
            id: parse_uuid(&raw.id)?,
            kind: TxKind::parse(&raw.kind).ok_or_else(|| bad("kind", &raw.kind))?,
            reference_type: ReferenceType::parse(&raw.reference_type)
                .ok_or_else(|| bad("reference type", &raw.reference_type))?,
            reference_id: parse_uuid(&raw.reference_id)?,
            hold_id: raw.hold_id.as_deref().map(parse_uuid).transpose()?,
            created_at: ts(raw.created_at),
            entries: self.load_entries(raw.seq)?,
        })
    }
}

impl LedgerRepo for SqlTx<'_> {
    fn put_ledger_account(
        &mut self,
        key: &AccountKey,
        b: &AccountBalances,
    ) -> Result<(), PortError> {
        self.conn
            .prepare_cached(
                "INSERT INTO ledger_accounts (id, debits_posted, credits_posted, debits_pending, credits_pending) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (id) DO UPDATE SET debits_posted = ?2, credits_posted = ?3, \
                 debits_pending = ?4, credits_pending = ?5",
            )
            .map_err(db_err)?
            .execute(params![
                key.storage_id(),
                b.debits_posted.to_string(),
                b.credits_posted.to_string(),
                b.debits_pending.to_string(),
                b.credits_pending.to_string(),
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn insert_ledger_transaction(&mut self, tx: &LedgerTx) -> Result<(), PortError> {
        // The entries' table has no index of their ids (migration 0026): derived ids are unique
        // because the transaction's id is.
        check_entry_ids(tx).map_err(|e| PortError::permanent("store", e))?;
        let (id, reference) = (tx.id.to_string(), tx.reference_id.to_string());
        let hold = tx.hold_id.map(|h| h.to_string());
        let args = params![
            id,
            tx.kind.as_str(),
            tx.reference_type.as_str(),
            reference,
            hold,
            tx.created_at.unix_millis(),
        ];
        // `seq` is SQLite's rowid, read from the connection after the insert: SQLite's
        // `RETURNING` buffers the statement's rows before handing over the first.
        let seq = match self.conn.dialect() {
            Dialect::Sqlite => {
                self.conn
                    .prepare_cached(
                        "INSERT INTO ledger_transactions (id, kind, reference_type, reference_id, hold_id, created_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )
                    .map_err(db_err)?
                    .execute(args)
                    .map_err(db_err)?;
                self.conn
                    .last_insert_rowid()
                    .ok_or_else(|| PortError::permanent("store", "no rowid after an insert"))?
            }
            Dialect::Postgres => self
                .conn
                .prepare_cached(
                    "INSERT INTO ledger_transactions (id, kind, reference_type, reference_id, hold_id, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING seq",
                )
                .map_err(db_err)?
                .query_row(args, |r| r.get::<_, i64>(0))
                .map_err(db_err)?,
        };
        let mut insert = self
            .conn
            .prepare_cached(
                "INSERT INTO ledger_entries (id, tx_seq, idx, account_id, direction, phase, amount, \
                 balance_after, history_direction, tenant, external_user_id, network) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
            )
            .map_err(db_err)?;
        for (idx, e) in tx.entries.iter().enumerate() {
            // Rows of a user's history carry the owner, copied in for the history index. A row
            // is an entry `HistoryEntry::from_entry` accepts: a user entry that moved the
            // available balance and carries the balance it left.
            let direction = e.history_direction().filter(|_| e.balance_after.is_some());
            let history = direction.and(e.account.as_user());
            insert
                .execute(params![
                    e.id.to_string(),
                    seq,
                    i64::try_from(idx).unwrap_or(i64::MAX),
                    e.account.storage_id(),
                    e.direction.as_str(),
                    e.phase.as_str(),
                    e.amount.to_string(),
                    e.balance_after.map(|a| a.to_string()),
                    history.and(direction).map(|d| d.as_str()),
                    history.map(|u| u.tenant.clone()),
                    history.map(|u| u.user.clone()),
                    history.map(|u| u.asset.network.as_str()),
                ])
                .map_err(db_err)?;
        }
        Ok(())
    }

    fn insert_ledger_hold(&mut self, h: &Hold) -> Result<(), PortError> {
        let (settled, finish_tx, finished_at) = match h.state {
            HoldState::Pending => (None, None, None),
            HoldState::Settled { amount, tx_id, at } => (
                Some(amount.to_string()),
                Some(tx_id.to_string()),
                Some(at.unix_millis()),
            ),
            HoldState::Released { tx_id, at } => {
                (None, Some(tx_id.to_string()), Some(at.unix_millis()))
            }
        };
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO ledger_holds ({HOLD_COLUMNS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13)"
            ))
            .map_err(db_err)?
            .execute(params![
                h.id.to_string(),
                h.purpose.as_str(),
                h.user.key().storage_id(),
                h.counter.storage_id(),
                h.amount.to_string(),
                h.reference_type.as_str(),
                h.reference_id.to_string(),
                h.reserve_tx_id.to_string(),
                h.created_at.unix_millis(),
                h.state.as_str(),
                settled,
                finish_tx,
                finished_at,
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn finish_ledger_hold(&mut self, id: Uuid, state: &HoldState) -> Result<(), PortError> {
        let (settled, tx_id, at) = match *state {
            HoldState::Pending => {
                return Err(PortError::permanent(
                    "store",
                    "a hold cannot be finished as pending",
                ))
            }
            HoldState::Settled { amount, tx_id, at } => (Some(amount.to_string()), tx_id, at),
            HoldState::Released { tx_id, at } => (None, tx_id, at),
        };
        let n = self
            .conn
            .prepare_cached(
                "UPDATE ledger_holds SET state = ?2, settled_amount = ?3, finish_tx_id = ?4, finished_at = ?5 \
                 WHERE id = ?1 AND state = 'pending'",
            )
            .map_err(db_err)?
            .execute(params![id.to_string(), state.as_str(), settled, tx_id.to_string(), at.unix_millis()])
            .map_err(db_err)?;
        if n == 1 {
            Ok(())
        } else {
            Err(PortError::permanent(
                "store",
                format!("hold {id} is not pending"),
            ))
        }
    }
}

impl LedgerReads for SqlTx<'_> {
    fn ledger_account(&mut self, key: &AccountKey) -> Result<Option<AccountBalances>, PortError> {
        let raw = self
            .conn
            .prepare_cached(
                "SELECT debits_posted, credits_posted, debits_pending, credits_pending \
                 FROM ledger_accounts WHERE id = ?1",
            )
            .map_err(db_err)?
            .query_row([key.storage_id()], |r| balances(r, 0))
            .optional()
            .map_err(db_err)?;
        raw.as_ref().map(decode_balances).transpose()
    }

    /// One seek per key, in a UNION ALL (an `IN` list is an ephemeral b-tree built at every
    /// run, which cost more than the seeks).
    fn ledger_accounts(
        &mut self,
        keys: &[AccountKey],
    ) -> Result<Vec<Option<AccountBalances>>, PortError> {
        // One statement per count of keys (a catalog's assets of a network: a handful), each
        // prepared once per connection.
        if keys.is_empty() || keys.len() > MAX_KEYS_AT_ONCE {
            return keys.iter().map(|k| self.ledger_account(k)).collect();
        }
        let ids: Vec<String> = keys.iter().map(AccountKey::storage_id).collect();
        let found: std::collections::HashMap<String, [String; 4]> = self
            .conn
            .prepare_cached(accounts_sql(ids.len()))
            .map_err(db_err)?
            .query_map(&ids, |r| Ok((r.get(0)?, balances(r, 1)?)))
            .map_err(db_err)?
            .collect::<Result<_, _>>()
            .map_err(db_err)?;
        ids.iter()
            .map(|id| found.get(id).map(decode_balances).transpose())
            .collect()
    }

    fn ledger_transaction(&mut self, id: Uuid) -> Result<Option<LedgerTx>, PortError> {
        let raw = self
            .conn
            .prepare_cached(&format!(
                "SELECT {TX_COLUMNS} FROM ledger_transactions WHERE id = ?1"
            ))
            .map_err(db_err)?
            .query_row([id.to_string()], raw_tx)
            .optional()
            .map_err(db_err)?;
        raw.map(|r| self.decode_tx(r)).transpose()
    }

    fn ledger_hold(&mut self, id: Uuid) -> Result<Option<Hold>, PortError> {
        let raw = self
            .conn
            .prepare_cached(&format!(
                "SELECT {HOLD_COLUMNS} FROM ledger_holds WHERE id = ?1"
            ))
            .map_err(db_err)?
            .query_row([id.to_string()], raw_hold)
            .optional()
            .map_err(db_err)?;
        raw.map(decode_hold).transpose()
    }

    fn ledger_history(
        &mut self,
        tenant: &custody_core::TenantId,
        user: &str,
        network: Network,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, PortError> {
        let rows = self
            .conn
            .prepare_cached(
                "SELECT e.id, t.kind, e.account_id, e.history_direction, e.amount, e.balance_after, \
                 t.reference_type, t.reference_id, t.created_at \
                 FROM ledger_entries e JOIN ledger_transactions t ON t.seq = e.tx_seq \
                 WHERE e.tenant = ?1 AND e.external_user_id = ?2 AND e.network = ?3 \
                 AND e.history_direction IS NOT NULL \
                 ORDER BY e.tx_seq DESC, e.idx DESC LIMIT ?4",
            )
            .map_err(db_err)?
            .query_map(
                params![tenant.as_str(), user, network.as_str(), i64::try_from(limit).unwrap_or(i64::MAX)],
                |r| {
                    Ok((
                        [
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                            r.get::<_, String>(6)?,
                            r.get::<_, String>(7)?,
                        ],
                        r.get::<_, i64>(8)?,
                    ))
                },
            )
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        rows.into_iter()
            .map(
                |([id, kind, account, direction, amt, after, rtype, rid], at)| {
                    let key = account_key(&account)?;
                    Ok(HistoryEntry {
                        id: parse_uuid(&id)?,
                        kind: TxKind::parse(&kind).ok_or_else(|| bad("kind", &kind))?,
                        asset: key.asset().code.clone(),
                        direction: Direction::parse(&direction)
                            .ok_or_else(|| bad("direction", &direction))?,
                        amount_units: amount(&amt)?,
                        balance_after_units: amount(&after)?,
                        reference_type: ReferenceType::parse(&rtype)
                            .ok_or_else(|| bad("reference type", &rtype))?,
                        reference_id: parse_uuid(&rid)?,
                        created_at: ts(at),
                    })
                },
            )
            .collect()
    }

    fn scan_ledger_accounts(
        &mut self,
        visit: &mut dyn FnMut(&AccountKey, &AccountBalances),
    ) -> Result<(), PortError> {
        self.conn
            .prepare(
                "SELECT id, debits_posted, credits_posted, debits_pending, credits_pending \
                 FROM ledger_accounts ORDER BY id",
            )
            .map_err(db_err)?
            .for_each(params![], |r| {
                let id: String = r.get(0).map_err(db_err)?;
                let raw = balances(r, 1).map_err(db_err)?;
                visit(&account_key(&id)?, &decode_balances(&raw)?);
                Ok::<_, PortError>(())
            })
    }

    fn list_ledger_transactions(
        &mut self,
        page: custody_core::page::Page,
    ) -> Result<custody_core::page::Paged<LedgerTx>, PortError> {
        let Some(args) = super::page_args(self.conn, "ledger_transactions", page)? else {
            return Ok(None);
        };
        let raws = self
            .conn
            .prepare_cached(&format!(
                "SELECT {TX_COLUMNS} FROM ledger_transactions WHERE {}",
                super::PAGE_CLAUSE
            ))
            .map_err(db_err)?
            .query_map(args, raw_tx)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        raws.into_iter()
            .map(|raw| self.decode_tx(raw))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn scan_ledger_transactions(
        &mut self,
        visit: &mut dyn FnMut(&LedgerTx),
    ) -> Result<(), PortError> {
        let raws = self
            .conn
            .prepare(&format!(
                "SELECT {TX_COLUMNS} FROM ledger_transactions ORDER BY seq"
            ))
            .map_err(db_err)?
            .query_map([], raw_tx)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        for raw in raws {
            visit(&self.decode_tx(raw)?);
        }
        Ok(())
    }

    fn scan_ledger_holds(&mut self, visit: &mut dyn FnMut(&Hold)) -> Result<(), PortError> {
        let raws = self
            .conn
            .prepare(&format!(
                "SELECT {HOLD_COLUMNS} FROM ledger_holds ORDER BY created_at, id"
            ))
            .map_err(db_err)?
            .query_map([], raw_hold)
            .map_err(db_err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(db_err)?;
        for raw in raws {
            visit(&decode_hold(raw)?);
        }
        Ok(())
    }
}
