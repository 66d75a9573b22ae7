//! [`MemoryStore`]: every repository of the core in memory, with the observable semantics of the
//! SQLite store (`custody-store-sqlite`), checked by the same [`conformance`](super::conformance)
//! suites.
//!
//! Transactions are copies: a write job runs on a clone of the committed state under the store's
//! lock, which is swapped in only if the job returns `Ok` (so a job that fails or panics leaves
//! no trace, and jobs are serializable: one runs at a time). A savepoint is a further copy. A
//! read job runs on a clone taken when it starts: a snapshot that later writes do not change.
//!
//! What the SQLite schema enforces with constraints is checked here before anything is
//! written: uniqueness (ids, api keys, nonces, idempotency keys, wallets, deposit identities,
//! ledger ids; entry ids also by `check_entry_ids`, which is all SQLite relies on for them),
//! the foreign keys (a deposit's wallet; a ledger entry's account, which SQLite
//! checks at commit) and the CHECKs a caller can reach (a positive rate limit, an alert's
//! severity, an attempt's HTTP status). Rows keep their insertion order, which plays the part
//! of SQLite's rowid in orderings.
//!
//! Secrets (credentials' HMAC and TOTP keys, endpoint secrets) are kept exactly as given and
//! returned as they are: sealing is not this store's business.

mod reconciliations;

use std::any::Any;
use std::cmp::Reverse;
use std::collections::btree_map::Entry as MapEntry;
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use uuid::Uuid;

use custody_core::admin::{
    Alert, AlertReads, AlertRepo, AuditReads, AuditRecord, AuditRepo, Control, ControlReads,
    ControlRepo,
};
use custody_core::amount::Amount;
use custody_core::auth::{CredentialReads, CredentialRepo, StoredCredential};
use custody_core::chain::{ChainCursor, ChainReads, ChainRepo};
use custody_core::deposit::{Deposit, DepositFilter, DepositReads, DepositRepo, DepositStatus};
use custody_core::error::{CoreError, CoreResult, PortError};
use custody_core::idempotency::{IdempotencyReads, IdempotencyRecord, IdempotencyRepo};
use custody_core::ledger::{
    AccountBalances, AccountKey, HistoryEntry, Hold, HoldState, LedgerReads, LedgerRepo, LedgerTx,
};

use crate::MemoryLedger;
use custody_core::network::Network;
use custody_core::outbox::{NewEvent, OutboxRepo};
use custody_core::outgoing::{OutgoingReads, OutgoingRepo, OutgoingTx, Purpose};
use custody_core::page::{self, Page, Paged};
use custody_core::ports::store::{ReadJob, Savepoints, Store, WriteJob};
use custody_core::tenant::TenantId;
use custody_core::time::Timestamp;
use custody_core::wallet::{Wallet, WalletReads, WalletRepo};
use custody_core::webhook::{
    choose_claims, tenant_room, Attempt, Claim, ClaimCandidate, DueEvent, Endpoint, EventCounts,
    EventStatus, EventView, Step, WebhookReads, WebhookRepo,
};

/// The in-memory store. Cheap to create; share it as `Arc<dyn Store>` or use it by reference.
#[derive(Debug, Default)]
pub struct MemoryStore {
    committed: Mutex<State>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.committed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run_write(&self, job: &mut WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        let mut committed = self.lock();
        let mut tx = Tx::new(committed.clone());
        let result = catch_unwind(AssertUnwindSafe(|| job(&mut tx)))
            .unwrap_or_else(|_| Err(CoreError::Invariant("a store job panicked".into())));
        let value = result?;
        if !tx.savepoints.is_empty() {
            return Err(CoreError::Invariant(format!(
                "a store job left {} savepoints open",
                tx.savepoints.len()
            )));
        }
        tx.state.check_at_commit(&committed)?;
        *committed = tx.state;
        Ok(value)
    }

    fn run_read(&self, job: &mut ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        let snapshot = self.lock().clone();
        let mut tx = Tx::new(snapshot);
        catch_unwind(AssertUnwindSafe(|| job(&mut tx)))
            .unwrap_or_else(|_| Err(CoreError::Invariant("a store read panicked".into())))
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn write(&self, mut job: WriteJob) -> CoreResult<Box<dyn Any + Send>> {
        self.run_write(&mut job)
    }

    async fn read(&self, mut job: ReadJob) -> CoreResult<Box<dyn Any + Send>> {
        self.run_read(&mut job)
    }
}

/// An outbox row.
#[derive(Debug, Clone)]
struct EventRow {
    id: Uuid,
    tenant: String,
    event_type: String,
    body: Vec<u8>,
    created_at: Timestamp,
    status: EventStatus,
    /// Attempts since queued or last replayed (the schedule's count).
    attempts: u32,
    next_attempt_at: Timestamp,
    last_error: Option<String>,
    updated_at: Timestamp,
    leased_until: Option<Timestamp>,
}

/// Everything the store keeps. Vectors are in insertion order.
#[derive(Debug, Clone, Default)]
struct State {
    ledger: MemoryLedger,
    credentials: Vec<StoredCredential>,
    second_factors: BTreeMap<Uuid, custody_core::auth::second_factor::Attempts>,
    nonces: BTreeMap<(Uuid, String), Timestamp>,
    /// Appended in order, as the SQLite store's log.
    nonce_log: Vec<(Uuid, String, Timestamp)>,
    nonce_fence: Option<custody_core::auth::nonce_set::NonceFence>,
    idempotency: BTreeMap<(TenantId, String), IdempotencyRecord>,
    endpoints: BTreeMap<TenantId, Endpoint>,
    events: Vec<EventRow>,
    attempts: Vec<Attempt>,
    audit: Vec<AuditRecord>,
    alerts: Vec<Alert>,
    controls: BTreeMap<String, Control>,
    tenant_accounts: BTreeMap<TenantId, u32>,
    /// Accounts of the global allocator taken by hot wallets, by label (no tenant's).
    hot_wallet_accounts: BTreeMap<String, u32>,
    hot_wallets: Vec<custody_core::wallet::hot::HotWalletRecord>,
    address_counters: BTreeMap<(TenantId, Network), u64>,
    wallets: Vec<Wallet>,
    /// Every address a wallet ever had, in the order it got it (its watch-set position is its
    /// place here, from 1): (wallet id, network, address, account, index).
    addresses: Vec<(Uuid, Network, String, u32, u32)>,
    migrations: Vec<custody_core::wallet::migration::WalletMigration>,
    deposits: Vec<Deposit>,
    /// (network, number) -> (hash, parent hash)
    blocks: BTreeMap<(Network, u64), (String, String)>,
    cursors: BTreeMap<Network, ChainCursor>,
    /// Outgoing transactions with their lease.
    outgoing: Vec<(OutgoingTx, Option<Timestamp>)>,
    nonces_next: BTreeMap<(Network, String), u64>,
    quotes: Vec<custody_core::withdrawal::Quote>,
    withdrawals: Vec<custody_core::withdrawal::Withdrawal>,
    swap_quotes: Vec<custody_core::swap::SwapQuote>,
    swaps: Vec<custody_core::swap::Swap>,
    allowances: Vec<custody_core::swap::Allowance>,
    sweeps: Vec<custody_core::sweep::Sweep>,
    seeds: Vec<custody_core::wallet::seeds::SeedRecord>,
    fundings: Vec<custody_core::sweep::Funding>,
    /// Reconciliation runs, each with its lease in `lease`.
    reconciliations: Vec<custody_core::reconcile::Reconciliation>,
}

impl State {
    /// The account the global allocator hands out next: one above the largest any tenant or
    /// hot wallet ever got.
    fn next_free_account(&self) -> Result<u32, PortError> {
        let next = self
            .tenant_accounts
            .values()
            .chain(self.hot_wallet_accounts.values())
            .max()
            .map_or(0, |&m| u64::from(m) + 1);
        u32::try_from(next).map_err(|_| PortError::permanent("store", "no account index is left"))
    }

    /// The checks SQLite defers to the commit: every entry of a transaction written by this job
    /// names an account that has totals (`ledger_entries.account_id` references
    /// `ledger_accounts`, `DEFERRABLE INITIALLY DEFERRED`).
    fn check_at_commit(&self, before: &State) -> Result<(), PortError> {
        let accounts = self.ledger.accounts();
        let new = &self.ledger.transactions()[before.ledger.transactions().len()..];
        for tx in new {
            if let Some(e) = tx
                .entries
                .iter()
                .find(|e| !accounts.contains_key(&e.account))
            {
                return Err(PortError::permanent(
                    "store",
                    format!(
                        "FOREIGN KEY constraint failed: entry {} of transaction {} is on {}, \
                         which has no totals",
                        e.id, tx.id, e.account
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// An attempt's hash belongs to one outgoing transaction of its network.
fn check_attempt_hashes(
    all: &[(custody_core::outgoing::OutgoingTx, Option<Timestamp>)],
    t: &custody_core::outgoing::OutgoingTx,
) -> Result<(), PortError> {
    for a in &t.attempts {
        if all.iter().any(|(x, _)| {
            x.id != t.id && x.network == t.network && x.attempts.iter().any(|y| y.hash == a.hash)
        }) {
            return Err(constraint(format!(
                "attempt {} is another outgoing transaction's",
                a.hash
            )));
        }
    }
    Ok(())
}

fn constraint(what: impl std::fmt::Display) -> PortError {
    PortError::permanent("store", format!("constraint failed: {what}"))
}

/// The first `limit` of `items` by `expiry` (earliest first), as a pruning store takes them.
fn earliest<T>(
    items: impl Iterator<Item = T>,
    expiry: impl Fn(&T) -> Timestamp,
    limit: usize,
) -> Vec<T> {
    let mut items: Vec<T> = items.collect();
    items.sort_by_key(|t| expiry(t));
    items.truncate(limit);
    items
}

/// Rows newest first (by `at`, then latest inserted first), at most `limit`.
fn newest_first<T: Clone>(rows: &[T], at: impl Fn(&T) -> Timestamp, limit: usize) -> Vec<T> {
    let mut sorted: Vec<&T> = rows.iter().rev().collect();
    sorted.sort_by_key(|r| Reverse(at(r)));
    sorted.into_iter().take(limit).cloned().collect()
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// A transaction: the state it works on and one copy per open savepoint.
struct Tx {
    state: State,
    savepoints: Vec<State>,
}

impl Tx {
    fn new(state: State) -> Self {
        Tx {
            state,
            savepoints: Vec::new(),
        }
    }

    fn event_view(&self, e: &EventRow) -> EventView {
        let attempt_history: Vec<Attempt> = self
            .state
            .attempts
            .iter()
            .filter(|a| a.event_id == e.id)
            .cloned()
            .collect();
        EventView {
            id: e.id,
            tenant: e.tenant.clone(),
            event_type: e.event_type.clone(),
            status: e.status,
            attempts: u32::try_from(attempt_history.len()).unwrap_or(u32::MAX),
            last_error: e.last_error.clone(),
            next_attempt_at: (e.status == EventStatus::Pending).then_some(e.next_attempt_at),
            created_at: e.created_at,
            updated_at: e.updated_at,
            attempt_history,
        }
    }
}

impl Savepoints for Tx {
    fn savepoint(&mut self) -> Result<(), PortError> {
        self.savepoints.push(self.state.clone());
        Ok(())
    }

    fn release_savepoint(&mut self) -> Result<(), PortError> {
        self.savepoints
            .pop()
            .map(drop)
            .ok_or_else(|| PortError::permanent("store", "release without a savepoint"))
    }

    fn rollback_to_savepoint(&mut self) -> Result<(), PortError> {
        let saved = self
            .savepoints
            .pop()
            .ok_or_else(|| PortError::permanent("store", "rollback without a savepoint"))?;
        self.state = saved;
        Ok(())
    }
}

// ---- credentials ----

impl CredentialRepo for Tx {
    fn second_factor_attempts(
        &mut self,
        credential: Uuid,
    ) -> Result<custody_core::auth::second_factor::Attempts, PortError> {
        Ok(self
            .state
            .second_factors
            .get(&credential)
            .copied()
            .unwrap_or_default())
    }

    fn put_second_factor_attempts(
        &mut self,
        credential: Uuid,
        attempts: &custody_core::auth::second_factor::Attempts,
    ) -> Result<(), PortError> {
        self.state.second_factors.insert(credential, *attempts);
        Ok(())
    }

    fn insert_credential(&mut self, c: &StoredCredential) -> Result<(), PortError> {
        let all = &mut self.state.credentials;
        if c.rate_limit == 0 {
            return Err(constraint("credentials.rate_limit > 0"));
        }
        if all.iter().any(|x| x.id == c.id) {
            return Err(constraint(format!("credential id {} exists", c.id)));
        }
        if all.iter().any(|x| x.api_key == c.api_key) {
            return Err(constraint("credentials.api_key is unique"));
        }
        all.push(c.clone());
        Ok(())
    }

    fn revoke_credential(&mut self, api_key: &str, at: Timestamp) -> Result<bool, PortError> {
        let found = self
            .state
            .credentials
            .iter_mut()
            .find(|c| c.api_key == api_key && c.revoked_at.is_none());
        Ok(found.map(|c| c.revoked_at = Some(at)).is_some())
    }

    fn use_nonce(
        &mut self,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, PortError> {
        match self.state.nonces.entry((credential, nonce.to_owned())) {
            MapEntry::Vacant(v) => {
                v.insert(expires_at);
                Ok(true)
            }
            MapEntry::Occupied(_) => Ok(false),
        }
    }

    fn log_nonce(
        &mut self,
        credential: Uuid,
        nonce: &str,
        expires_at: Timestamp,
    ) -> Result<bool, PortError> {
        self.state
            .nonce_log
            .push((credential, nonce.to_owned(), expires_at));
        Ok(true)
    }

    fn prune_nonces(&mut self, now: Timestamp, limit: usize) -> Result<u64, PortError> {
        let used = earliest(
            self.state.nonces.iter().filter(|(_, e)| **e < now),
            |(_, e)| **e,
            limit,
        );
        let used: Vec<(Uuid, String)> = used.into_iter().map(|(k, _)| k.clone()).collect();
        for k in &used {
            self.state.nonces.remove(k);
        }
        let logged = earliest(
            self.state
                .nonce_log
                .iter()
                .enumerate()
                .filter(|(_, n)| n.2 < now),
            |(_, n)| n.2,
            limit,
        );
        let gone: std::collections::BTreeSet<usize> = logged.into_iter().map(|(i, _)| i).collect();
        let mut i = 0;
        self.state.nonce_log.retain(|_| {
            i += 1;
            !gone.contains(&(i - 1))
        });
        Ok(count(used.len() + gone.len()))
    }

    fn put_nonce_fence(
        &mut self,
        fence: &custody_core::auth::nonce_set::NonceFence,
    ) -> Result<(), PortError> {
        self.state.nonce_fence = Some(*fence);
        Ok(())
    }

    fn advance_totp_step(&mut self, credential: Uuid, step: i64) -> Result<bool, PortError> {
        let found = self
            .state
            .credentials
            .iter_mut()
            .find(|c| c.id == credential && c.totp_last_step.is_none_or(|s| s < step));
        Ok(found.map(|c| c.totp_last_step = Some(step)).is_some())
    }
}

impl CredentialReads for Tx {
    fn credential_by_api_key(
        &mut self,
        api_key: &str,
    ) -> Result<Option<StoredCredential>, PortError> {
        Ok(self
            .state
            .credentials
            .iter()
            .find(|c| c.api_key == api_key)
            .cloned())
    }

    fn list_credentials(&mut self) -> Result<Vec<StoredCredential>, PortError> {
        let mut all = self.state.credentials.clone();
        all.sort_by_key(|c| (c.created_at, c.id));
        Ok(all)
    }

    fn nonce_fence(
        &mut self,
    ) -> Result<Option<custody_core::auth::nonce_set::NonceFence>, PortError> {
        Ok(self.state.nonce_fence)
    }

    fn latest_nonce_expiry(&mut self) -> Result<Option<Timestamp>, PortError> {
        Ok(self.state.nonces.values().max().copied())
    }

    fn visit_nonces(
        &mut self,
        now: Timestamp,
        visit: &mut dyn FnMut(Uuid, &str, Timestamp),
    ) -> Result<u64, PortError> {
        let used = self.state.nonces.iter().map(|((c, n), e)| (c, n, e));
        let logged = self.state.nonce_log.iter().map(|(c, n, e)| (c, n, e));
        let mut live: Vec<_> = used.chain(logged).filter(|(_, _, e)| **e >= now).collect();
        live.sort_by_key(|(_, _, e)| **e);
        for (c, n, e) in &live {
            visit(**c, n, **e);
        }
        Ok(count(live.len()))
    }
}

// ---- idempotency ----

impl IdempotencyRepo for Tx {
    fn insert_idempotency_record(&mut self, r: &IdempotencyRecord) -> Result<(), PortError> {
        match self
            .state
            .idempotency
            .entry((r.tenant.clone(), r.key.clone()))
        {
            // An expired record for the key is replaced; a live one makes the insert fail.
            MapEntry::Occupied(o) if o.get().expires_at > r.created_at => Err(constraint(format!(
                "idempotency key {:?} of {} is in use",
                r.key, r.tenant
            ))),
            MapEntry::Occupied(mut o) => {
                o.insert(r.clone());
                Ok(())
            }
            MapEntry::Vacant(v) => {
                v.insert(r.clone());
                Ok(())
            }
        }
    }

    fn prune_idempotency(&mut self, now: Timestamp, limit: usize) -> Result<u64, PortError> {
        let expired = earliest(
            self.state
                .idempotency
                .iter()
                .filter(|(_, r)| r.expires_at <= now),
            |(_, r)| r.expires_at,
            limit,
        );
        let expired: Vec<(TenantId, String)> =
            expired.into_iter().map(|(k, _)| k.clone()).collect();
        for k in &expired {
            self.state.idempotency.remove(k);
        }
        Ok(count(expired.len()))
    }
}

impl IdempotencyReads for Tx {
    fn idempotency_record(
        &mut self,
        tenant: &TenantId,
        key: &str,
        now: Timestamp,
    ) -> Result<Option<IdempotencyRecord>, PortError> {
        Ok(self
            .state
            .idempotency
            .get(&(tenant.to_owned(), key.to_owned()))
            .filter(|r| r.expires_at > now)
            .cloned())
    }
}

// ---- outbox and webhooks ----

impl OutboxRepo for Tx {
    fn enqueue_event(&mut self, e: &NewEvent) -> Result<(), PortError> {
        if self.state.events.iter().any(|x| x.id == e.id) {
            return Err(constraint(format!("event {} exists", e.id)));
        }
        self.state.events.push(EventRow {
            id: e.id,
            tenant: e.tenant.clone(),
            event_type: e.event_type.as_str().to_owned(),
            body: e.body.clone(),
            created_at: e.created_at,
            status: EventStatus::Pending,
            attempts: 0,
            next_attempt_at: e.created_at,
            last_error: None,
            updated_at: e.created_at,
            leased_until: None,
        });
        Ok(())
    }
}

impl WebhookRepo for Tx {
    fn put_webhook_endpoint(&mut self, e: &Endpoint) -> Result<Option<Endpoint>, PortError> {
        let old = self.state.endpoints.get(&e.tenant).cloned();
        let mut new = e.clone();
        if let Some(old) = &old {
            // A replacement keeps the endpoint's creation time.
            new.created_at = old.created_at;
        }
        self.state.endpoints.insert(e.tenant.clone(), new);
        Ok(old)
    }

    fn claim_due_events(&mut self, claim: &Claim) -> Result<Vec<DueEvent>, PortError> {
        if claim.limit == 0 || claim.tenant_max == 0 {
            return Ok(Vec::new());
        }
        let now = claim.now;
        let State {
            events, endpoints, ..
        } = &mut self.state;
        let mut in_flight: BTreeMap<String, usize> = BTreeMap::new();
        for e in events.iter() {
            if e.status == EventStatus::Pending && e.leased_until.is_some_and(|l| l > now) {
                *in_flight.entry(e.tenant.clone()).or_default() += 1;
            }
        }
        let mut candidates = Vec::new();
        for tenant in endpoints.keys().map(|t| t.as_str().to_owned()) {
            let tenant = &tenant;
            let room = tenant_room(claim, in_flight.get(tenant).copied().unwrap_or(0));
            let mut due: Vec<(Timestamp, usize)> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| {
                    e.tenant == *tenant
                        && e.status == EventStatus::Pending
                        && e.next_attempt_at <= now
                        && e.leased_until.is_none_or(|l| l <= now)
                })
                .map(|(row, e)| (e.next_attempt_at, row))
                .collect();
            due.sort_unstable();
            due.truncate(room);
            candidates.extend(due.into_iter().map(|(due_at, row)| ClaimCandidate {
                key: row,
                tenant: tenant.clone(),
                due_at,
            }));
        }
        let chosen = choose_claims(claim, &in_flight, candidates);
        let mut out = Vec::with_capacity(chosen.len());
        for row in chosen {
            let e = &mut events[row];
            e.leased_until = Some(claim.lease_until);
            let tenant = TenantId::from_stored(e.tenant.clone())?;
            let endpoint = &endpoints[&tenant];
            out.push(DueEvent {
                id: e.id,
                tenant: e.tenant.clone(),
                event_type: e.event_type.clone(),
                body: e.body.clone(),
                attempts: e.attempts,
                url: endpoint.url.clone(),
                secret: endpoint.secret.clone(),
            });
        }
        Ok(out)
    }

    fn finish_attempt(&mut self, a: &Attempt, step: Step) -> Result<bool, PortError> {
        let (status, next_at) = match step {
            Step::Delivered => (EventStatus::Delivered, None),
            Step::RetryAt(at) => (EventStatus::Pending, Some(at)),
            Step::DeadLetter => (EventStatus::DeadLettered, None),
        };
        let Some(e) = self
            .state
            .events
            .iter_mut()
            .find(|e| e.id == a.event_id && e.status == EventStatus::Pending)
        else {
            return Ok(false);
        };
        if a.status_code.is_some_and(|s| !(100..=999).contains(&s)) {
            return Err(constraint("webhook_attempts.status_code is 100 to 999"));
        }
        e.attempts = e.attempts.saturating_add(1);
        e.status = status;
        if let Some(at) = next_at {
            e.next_attempt_at = at;
        }
        e.last_error = if status == EventStatus::Delivered {
            None
        } else {
            a.error.clone().or_else(|| e.last_error.take())
        };
        e.leased_until = None;
        e.updated_at = a.at;
        self.state.attempts.push(a.clone());
        Ok(true)
    }

    fn requeue_dead_lettered(&mut self, id: Uuid, now: Timestamp) -> Result<bool, PortError> {
        let Some(e) = self
            .state
            .events
            .iter_mut()
            .find(|e| e.id == id && e.status == EventStatus::DeadLettered)
        else {
            return Ok(false);
        };
        e.status = EventStatus::Pending;
        e.attempts = 0;
        e.next_attempt_at = now;
        e.leased_until = None;
        e.updated_at = now;
        Ok(true)
    }
}

impl WebhookReads for Tx {
    fn webhook_endpoint(&mut self, tenant: &TenantId) -> Result<Option<Endpoint>, PortError> {
        Ok(self.state.endpoints.get(tenant).cloned())
    }

    fn list_webhook_events(&mut self, page: Page) -> Result<Paged<EventView>, PortError> {
        let Some(rows) = page::select(&self.state.events, |e| (e.created_at, e.id), page) else {
            return Ok(None);
        };
        Ok(Some(rows.iter().map(|e| self.event_view(e)).collect()))
    }

    fn webhook_event(&mut self, id: Uuid) -> Result<Option<EventView>, PortError> {
        Ok(self
            .state
            .events
            .iter()
            .find(|e| e.id == id)
            .map(|e| self.event_view(e)))
    }

    fn count_webhook_events(&mut self) -> Result<EventCounts, PortError> {
        let mut counts = EventCounts::default();
        for e in &self.state.events {
            match e.status {
                EventStatus::Pending => counts.pending += 1,
                EventStatus::Delivered => counts.delivered += 1,
                EventStatus::DeadLettered => counts.dead_lettered += 1,
            }
        }
        Ok(counts)
    }
}

// ---- audit, alerts, controls ----

impl AuditRepo for Tx {
    fn append_audit(&mut self, r: &AuditRecord) -> Result<(), PortError> {
        if self.state.audit.iter().any(|x| x.id == r.id) {
            return Err(constraint(format!("audit record {} exists", r.id)));
        }
        self.state.audit.push(r.clone());
        Ok(())
    }
}

impl AuditReads for Tx {
    fn list_audit(&mut self, page: Page) -> Result<Paged<AuditRecord>, PortError> {
        Ok(page::select(
            &self.state.audit,
            |r| (r.created_at, r.id),
            page,
        ))
    }
}

impl AlertRepo for Tx {
    fn raise_alert(&mut self, a: &Alert) -> Result<(), PortError> {
        if !matches!(a.severity.as_str(), "warning" | "critical") {
            return Err(constraint("alerts.severity is warning or critical"));
        }
        if self.state.alerts.iter().any(|x| x.id == a.id) {
            return Err(constraint(format!("alert {} exists", a.id)));
        }
        if a.acknowledged_at.is_some() || a.acknowledged_by.is_some() {
            return Err(constraint("a new alert is unacknowledged"));
        }
        self.state.alerts.push(a.clone());
        Ok(())
    }

    fn acknowledge_alert(&mut self, id: Uuid, at: Timestamp, by: &str) -> Result<(), PortError> {
        let Some(alert) = self.state.alerts.iter_mut().find(|a| a.id == id) else {
            return Err(constraint(format!("no alert {id}")));
        };
        if alert.acknowledged_at.is_none() {
            alert.acknowledged_at = Some(at);
            alert.acknowledged_by = Some(by.to_owned());
        }
        Ok(())
    }
}

impl AlertReads for Tx {
    fn list_alerts(&mut self, page: Page) -> Result<Paged<Alert>, PortError> {
        Ok(page::select(
            &self.state.alerts,
            |a| (a.created_at, a.id),
            page,
        ))
    }

    fn alert(&mut self, id: Uuid) -> Result<Option<Alert>, PortError> {
        Ok(self.state.alerts.iter().find(|a| a.id == id).cloned())
    }

    fn open_alert_count(&mut self) -> Result<u64, PortError> {
        Ok(count(
            self.state
                .alerts
                .iter()
                .filter(|a| a.acknowledged_at.is_none())
                .count(),
        ))
    }
}

impl ControlRepo for Tx {
    fn put_control(&mut self, c: &Control) -> Result<(), PortError> {
        self.state.controls.insert(c.control_key.clone(), c.clone());
        Ok(())
    }
}

impl ControlReads for Tx {
    fn control(&mut self, key: &str) -> Result<Option<Control>, PortError> {
        Ok(self.state.controls.get(key).cloned())
    }

    fn list_controls(&mut self) -> Result<Vec<Control>, PortError> {
        Ok(self.state.controls.values().cloned().collect())
    }
}

// ---- ledger: the reference implementation, inside the transaction ----

impl LedgerRepo for Tx {
    fn put_ledger_account(
        &mut self,
        key: &AccountKey,
        balances: &AccountBalances,
    ) -> Result<(), PortError> {
        self.state.ledger.put_ledger_account(key, balances)
    }

    fn insert_ledger_transaction(&mut self, tx: &LedgerTx) -> Result<(), PortError> {
        self.state.ledger.insert_ledger_transaction(tx)
    }

    fn insert_ledger_hold(&mut self, hold: &Hold) -> Result<(), PortError> {
        self.state.ledger.insert_ledger_hold(hold)
    }

    fn finish_ledger_hold(&mut self, id: Uuid, state: &HoldState) -> Result<(), PortError> {
        self.state.ledger.finish_ledger_hold(id, state)
    }
}

impl LedgerReads for Tx {
    fn ledger_account(&mut self, key: &AccountKey) -> Result<Option<AccountBalances>, PortError> {
        self.state.ledger.ledger_account(key)
    }

    fn ledger_accounts(
        &mut self,
        keys: &[AccountKey],
    ) -> Result<Vec<Option<AccountBalances>>, PortError> {
        self.state.ledger.ledger_accounts(keys)
    }

    fn ledger_transaction(&mut self, id: Uuid) -> Result<Option<LedgerTx>, PortError> {
        self.state.ledger.ledger_transaction(id)
    }

    fn ledger_hold(&mut self, id: Uuid) -> Result<Option<Hold>, PortError> {
        self.state.ledger.ledger_hold(id)
    }

    fn ledger_history(
        &mut self,
        tenant: &TenantId,
        user: &str,
        network: Network,
        limit: usize,
    ) -> Result<Vec<HistoryEntry>, PortError> {
        self.state
            .ledger
            .ledger_history(tenant, user, network, limit)
    }

    fn scan_ledger_accounts(
        &mut self,
        visit: &mut dyn FnMut(&AccountKey, &AccountBalances),
    ) -> Result<(), PortError> {
        self.state.ledger.scan_ledger_accounts(visit)
    }

    fn list_ledger_transactions(&mut self, page: Page) -> Result<Paged<LedgerTx>, PortError> {
        self.state.ledger.list_ledger_transactions(page)
    }

    fn scan_ledger_transactions(
        &mut self,
        visit: &mut dyn FnMut(&LedgerTx),
    ) -> Result<(), PortError> {
        self.state.ledger.scan_ledger_transactions(visit)
    }

    fn scan_ledger_holds(&mut self, visit: &mut dyn FnMut(&Hold)) -> Result<(), PortError> {
        self.state.ledger.scan_ledger_holds(visit)
    }
}

// ---- seed generations ----

impl custody_core::wallet::seeds::SeedReads for Tx {
    fn seeds(&mut self) -> Result<Vec<custody_core::wallet::seeds::SeedRecord>, PortError> {
        let mut out = self.state.seeds.clone();
        out.sort_by_key(|s| s.generation);
        Ok(out)
    }

    fn next_account(&mut self) -> Result<u32, PortError> {
        self.state.next_free_account()
    }
}

impl custody_core::wallet::seeds::SeedRepo for Tx {
    fn insert_seed(
        &mut self,
        seed: &custody_core::wallet::seeds::SeedRecord,
    ) -> Result<(), PortError> {
        if self.state.seeds.iter().any(|s| {
            s.generation == seed.generation
                || s.first_account == seed.first_account
                || s.fingerprint == seed.fingerprint
        }) {
            return Err(constraint(
                "one seed per generation, first account and fingerprint",
            ));
        }
        self.state.seeds.push(seed.clone());
        Ok(())
    }
}

// ---- hot wallets ----

impl custody_core::wallet::hot::HotWalletReads for Tx {
    fn hot_wallet_records(
        &mut self,
        network: Network,
    ) -> Result<Vec<custody_core::wallet::hot::HotWalletRecord>, PortError> {
        let mut out: Vec<_> = self
            .state
            .hot_wallets
            .iter()
            .filter(|r| r.network == network)
            .cloned()
            .collect();
        out.sort_by(|a, b| (a.created_at, &a.address).cmp(&(b.created_at, &b.address)));
        Ok(out)
    }
}

impl custody_core::wallet::hot::HotWalletRepo for Tx {
    fn allocate_hot_wallet_account(
        &mut self,
        label: &str,
        _at: Timestamp,
    ) -> Result<u32, PortError> {
        if self.state.hot_wallet_accounts.contains_key(label) {
            return Err(constraint(format!("account label {label} is taken")));
        }
        let account = self.state.next_free_account()?;
        self.state
            .hot_wallet_accounts
            .insert(label.to_owned(), account);
        Ok(account)
    }

    fn insert_hot_wallet(
        &mut self,
        record: &custody_core::wallet::hot::HotWalletRecord,
    ) -> Result<(), PortError> {
        use custody_core::wallet::hot::HotWalletStatus;
        let same_network = || {
            self.state
                .hot_wallets
                .iter()
                .filter(|r| r.network == record.network)
        };
        if same_network().any(|r| r.address == record.address) {
            return Err(constraint("one record per hot wallet address"));
        }
        if record.status == HotWalletStatus::Active
            && same_network().any(|r| r.status == HotWalletStatus::Active)
        {
            return Err(constraint("one active hot wallet per network"));
        }
        self.state.hot_wallets.push(record.clone());
        Ok(())
    }

    fn retire_hot_wallet(
        &mut self,
        network: Network,
        address: &str,
        at: Timestamp,
    ) -> Result<(), PortError> {
        use custody_core::wallet::hot::HotWalletStatus;
        let Some(r) = self.state.hot_wallets.iter_mut().find(|r| {
            r.network == network && r.address == address && r.status == HotWalletStatus::Active
        }) else {
            return Err(constraint(format!(
                "{address} is not the active {network} hot wallet"
            )));
        };
        r.status = HotWalletStatus::Retired;
        r.retired_at = Some(at);
        Ok(())
    }
}

// ---- wallets ----

impl WalletRepo for Tx {
    fn allocate_tenant_account(
        &mut self,
        tenant: &TenantId,
        _at: Timestamp,
    ) -> Result<u32, PortError> {
        if self.state.tenant_accounts.contains_key(tenant) {
            return Err(constraint(format!("tenant {tenant} has an account")));
        }
        // The next index after the highest ever allocated: never reused.
        let account = self.state.next_free_account()?;
        self.state
            .tenant_accounts
            .insert(tenant.to_owned(), account);
        Ok(account)
    }

    fn take_address_index(
        &mut self,
        tenant: &TenantId,
        network: Network,
    ) -> Result<u32, PortError> {
        let next = self
            .state
            .address_counters
            .entry((tenant.to_owned(), network))
            .or_insert(0);
        let index = *next;
        *next += 1;
        u32::try_from(index).map_err(|_| PortError::permanent("store", "no address index is left"))
    }

    fn insert_wallet(&mut self, w: &Wallet) -> Result<(), PortError> {
        let clash = self.state.wallets.iter().find_map(|x| {
            if x.id == w.id {
                Some("wallets.id")
            } else if x.tenant == w.tenant
                && x.external_user_id == w.external_user_id
                && x.network == w.network
            {
                Some("one wallet per (tenant, external_user_id, network)")
            } else {
                None
            }
        });
        if let Some(what) = clash {
            return Err(constraint(what));
        }
        self.check_new_address(w.network, &w.address, w.account, w.index)?;
        let stored = Wallet {
            previous_addresses: Vec::new(),
            ..w.clone()
        };
        self.state
            .addresses
            .push((w.id, w.network, w.address.clone(), w.account, w.index));
        self.state.wallets.push(stored);
        Ok(())
    }

    fn replace_tenant_account(
        &mut self,
        tenant: &TenantId,
        _at: Timestamp,
    ) -> Result<u32, PortError> {
        if !self.state.tenant_accounts.contains_key(tenant) {
            return Err(constraint(format!("tenant {tenant} has no account")));
        }
        let account = self.state.next_free_account()?;
        self.state
            .tenant_accounts
            .insert(tenant.to_owned(), account);
        self.state.address_counters.retain(|(t, _), _| t != tenant);
        Ok(account)
    }

    fn move_wallet(
        &mut self,
        wallet_id: Uuid,
        address: &str,
        account: u32,
        index: u32,
        at: Timestamp,
    ) -> Result<(), PortError> {
        let Some(pos) = self.state.wallets.iter().position(|w| w.id == wallet_id) else {
            return Err(PortError::permanent(
                "store",
                format!("wallet {wallet_id} does not exist"),
            ));
        };
        let network = self.state.wallets[pos].network;
        self.check_new_address(network, address, account, index)?;
        let w = &mut self.state.wallets[pos];
        w.previous_addresses
            .push(custody_core::wallet::PreviousAddress {
                address: std::mem::replace(&mut w.address, address.to_owned()),
                account: w.account,
                index: w.index,
                retired_at: at,
            });
        w.account = account;
        w.index = index;
        self.state
            .addresses
            .push((wallet_id, network, address.to_owned(), account, index));
        Ok(())
    }
}

impl Tx {
    /// An address, or a path, is never any wallet's twice (current or previous).
    fn check_new_address(
        &self,
        network: Network,
        address: &str,
        account: u32,
        index: u32,
    ) -> Result<(), PortError> {
        for (_, n, a, acc, i) in &self.state.addresses {
            if *n == network && a == address {
                return Err(constraint("one wallet per (network, address)"));
            }
            if *n == network && *acc == account && *i == index {
                return Err(constraint("one wallet per (network, account, index)"));
            }
        }
        Ok(())
    }
}

impl WalletReads for Tx {
    fn wallet_by_user(
        &mut self,
        tenant: &TenantId,
        external_user_id: &str,
        network: Network,
    ) -> Result<Option<Wallet>, PortError> {
        Ok(self
            .state
            .wallets
            .iter()
            .find(|w| {
                w.tenant == tenant && w.external_user_id == external_user_id && w.network == network
            })
            .cloned())
    }

    fn wallet_id_by_user(
        &mut self,
        tenant: &TenantId,
        external_user_id: &str,
        network: Network,
    ) -> Result<Option<Uuid>, PortError> {
        Ok(self
            .wallet_by_user(tenant, external_user_id, network)?
            .map(|w| w.id))
    }

    fn wallet_by_id(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Wallet>, PortError> {
        Ok(self
            .state
            .wallets
            .iter()
            .find(|w| w.id == id && w.tenant == tenant)
            .cloned())
    }

    fn tenant_account(&mut self, tenant: &TenantId) -> Result<Option<u32>, PortError> {
        Ok(self.state.tenant_accounts.get(tenant).copied())
    }

    fn list_wallets(
        &mut self,
        tenant: Option<&TenantId>,
        network: Option<Network>,
    ) -> Result<Vec<Wallet>, PortError> {
        Ok(self
            .state
            .wallets
            .iter()
            .filter(|w| tenant.is_none_or(|t| w.tenant == *t))
            .filter(|w| network.is_none_or(|n| w.network == n))
            .cloned()
            .collect())
    }

    fn address_path(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<custody_core::ports::signer::HdPath>, PortError> {
        Ok(self
            .state
            .addresses
            .iter()
            .find(|(_, n, a, _, _)| *n == network && a == address)
            .map(
                |&(_, network, _, account, index)| custody_core::ports::signer::HdPath {
                    network,
                    account,
                    index,
                },
            ))
    }

    fn wallet_by_address(
        &mut self,
        network: Network,
        address: &custody_core::chain::ChainAddress,
    ) -> Result<Option<Wallet>, PortError> {
        let address = address.as_str();
        let Some(&(id, ..)) = self
            .state
            .addresses
            .iter()
            .find(|(_, n, a, _, _)| *n == network && a == address)
        else {
            return Ok(None);
        };
        Ok(self.state.wallets.iter().find(|w| w.id == id).cloned())
    }

    fn wallet_addresses(&mut self, network: Network) -> Result<Vec<String>, PortError> {
        Ok(self
            .state
            .addresses
            .iter()
            .filter(|(_, n, ..)| *n == network)
            .map(|(_, _, a, ..)| a.clone())
            .collect())
    }

    fn wallet_addresses_after(
        &mut self,
        network: Network,
        after: u64,
        limit: usize,
    ) -> Result<Vec<(u64, String)>, PortError> {
        // An address's position is its place in insertion (commit) order, from 1.
        Ok(self
            .state
            .addresses
            .iter()
            .enumerate()
            .map(|(i, row)| (i as u64 + 1, row))
            .filter(|(seq, (_, n, ..))| *seq > after && *n == network)
            .take(limit)
            .map(|(seq, (_, _, a, ..))| (seq, a.clone()))
            .collect())
    }
}

// ---- wallet migrations ----

impl custody_core::wallet::migration::MigrationRepo for Tx {
    fn insert_migration(
        &mut self,
        m: &custody_core::wallet::migration::WalletMigration,
    ) -> Result<(), PortError> {
        if self.state.migrations.iter().any(|x| x.id == m.id) {
            return Err(constraint("wallet_migrations.id"));
        }
        if !self.state.wallets.iter().any(|w| w.id == m.wallet_id) {
            return Err(PortError::permanent(
                "store",
                format!("FOREIGN KEY: wallet {} does not exist", m.wallet_id),
            ));
        }
        self.state.migrations.push(m.clone());
        Ok(())
    }

    fn update_migration(
        &mut self,
        m: &custody_core::wallet::migration::WalletMigration,
    ) -> Result<(), PortError> {
        let Some(stored) = self.state.migrations.iter_mut().find(|x| x.id == m.id) else {
            return Err(PortError::permanent(
                "store",
                format!("wallet migration {} does not exist", m.id),
            ));
        };
        stored.status = m.status;
        stored.history = m.history.clone();
        stored.updated_at = m.updated_at;
        Ok(())
    }
}

impl custody_core::wallet::migration::MigrationReads for Tx {
    fn migration_by_id(
        &mut self,
        id: Uuid,
    ) -> Result<Option<custody_core::wallet::migration::WalletMigration>, PortError> {
        Ok(self.state.migrations.iter().find(|m| m.id == id).cloned())
    }

    fn open_migrations(
        &mut self,
        network: Network,
    ) -> Result<Vec<custody_core::wallet::migration::WalletMigration>, PortError> {
        Ok(self
            .state
            .migrations
            .iter()
            .filter(|m| m.network == network && m.status.is_open())
            .cloned()
            .collect())
    }

    fn list_migrations(
        &mut self,
        page: Page,
    ) -> Result<Paged<custody_core::wallet::migration::WalletMigration>, PortError> {
        Ok(page::select(
            &self.state.migrations,
            |m| (m.created_at, m.id),
            page,
        ))
    }
}

// ---- deposits ----

fn same_identity(d: &Deposit, network: Network, tx_hash: &str, log_index: Option<u32>) -> bool {
    d.network == network && d.tx_hash == tx_hash && d.log_index == log_index
}

impl DepositRepo for Tx {
    fn insert_deposit(&mut self, d: &Deposit) -> Result<(), PortError> {
        let all = &self.state.deposits;
        if all.iter().any(|x| x.id == d.id) {
            return Err(constraint(format!("deposit {} exists", d.id)));
        }
        if all
            .iter()
            .any(|x| same_identity(x, d.network, &d.tx_hash, d.log_index))
        {
            return Err(constraint("one deposit per (network, tx_hash, log index)"));
        }
        if !self.state.wallets.iter().any(|w| w.id == d.wallet_id) {
            return Err(constraint(format!(
                "FOREIGN KEY: wallet {} does not exist",
                d.wallet_id
            )));
        }
        self.state.deposits.push(d.clone());
        Ok(())
    }

    fn update_deposit(&mut self, d: &Deposit) -> Result<(), PortError> {
        let Some(stored) = self.state.deposits.iter_mut().find(|x| x.id == d.id) else {
            return Err(PortError::permanent(
                "store",
                format!("deposit {} does not exist", d.id),
            ));
        };
        // What a deposit is (tenant, identity, addresses, amount...) is fixed at insert; only
        // its position on the chain and its state move.
        stored.block_number = d.block_number;
        stored.block_hash = d.block_hash.clone();
        stored.confirmations = d.confirmations;
        stored.status = d.status;
        stored.history = d.history.clone();
        stored.credit_tx_id = d.credit_tx_id;
        stored.shortfall = d.shortfall;
        stored.updated_at = d.updated_at;
        Ok(())
    }
}

impl DepositReads for Tx {
    fn deposit_by_identity(
        &mut self,
        network: Network,
        tx_hash: &custody_core::chain::TxHash,
        log_index: Option<u32>,
    ) -> Result<Option<Deposit>, PortError> {
        let tx_hash = tx_hash.to_hex();
        Ok(self
            .state
            .deposits
            .iter()
            .find(|d| same_identity(d, network, &tx_hash, log_index))
            .cloned())
    }

    fn deposit_by_id(&mut self, tenant: &TenantId, id: Uuid) -> Result<Option<Deposit>, PortError> {
        Ok(self
            .state
            .deposits
            .iter()
            .find(|d| d.id == id && d.tenant == tenant)
            .cloned())
    }

    fn list_deposits(
        &mut self,
        tenant: &TenantId,
        filter: &DepositFilter,
        limit: usize,
    ) -> Result<Vec<Deposit>, PortError> {
        let matching: Vec<Deposit> = self
            .state
            .deposits
            .iter()
            .filter(|d| {
                d.tenant == tenant
                    && filter.status.is_none_or(|s| d.status == s)
                    && filter
                        .external_user_id
                        .as_ref()
                        .is_none_or(|u| d.external_user_id == *u)
            })
            .cloned()
            .collect();
        Ok(newest_first(&matching, |d| d.created_at, limit))
    }

    fn deposits_from(
        &mut self,
        network: Network,
        from_address: &str,
        after: Option<Uuid>,
        limit: usize,
    ) -> Result<Vec<Deposit>, PortError> {
        let mut matching: Vec<Deposit> = self
            .state
            .deposits
            .iter()
            .filter(|d| {
                d.network == network
                    && d.from_address == from_address
                    && after.is_none_or(|a| d.id.to_string() > a.to_string())
            })
            .cloned()
            .collect();
        matching.sort_by_key(|d| d.id.to_string());
        matching.truncate(limit);
        Ok(matching)
    }

    fn open_deposits(
        &mut self,
        network: Network,
        min_block: u64,
    ) -> Result<Vec<Deposit>, PortError> {
        let mut open: Vec<Deposit> = self
            .state
            .deposits
            .iter()
            .filter(|d| {
                d.network == network
                    && (d.status.is_pending()
                        || (d.status == DepositStatus::Credited
                            && d.block_number.is_some_and(|b| b >= min_block)))
            })
            .cloned()
            .collect();
        // By block (none first, as SQLite sorts NULL), then insertion: a stable sort.
        open.sort_by_key(|d| d.block_number);
        Ok(open)
    }

    fn pending_deposit_count(&mut self, network: Network) -> Result<u64, PortError> {
        Ok(count(
            self.state
                .deposits
                .iter()
                .filter(|d| d.network == network && d.status.is_pending())
                .count(),
        ))
    }

    fn pending_deposit_units(
        &mut self,
        tenant: &TenantId,
        external_user_id: &str,
        network: Network,
        asset: &str,
    ) -> Result<Amount, PortError> {
        self.state
            .deposits
            .iter()
            .filter(|d| {
                d.tenant == tenant
                    && d.external_user_id == external_user_id
                    && d.network == network
                    && d.asset == asset
                    && d.status.is_pending()
            })
            .try_fold(Amount::ZERO, |sum, d| {
                sum.checked_add(d.amount)
                    .ok_or_else(|| PortError::permanent("store", "pending deposits overflow u128"))
            })
    }

    fn pending_deposit_units_of(
        &mut self,
        tenant: &TenantId,
        external_user_id: &str,
        network: Network,
        assets: &[String],
    ) -> Result<Vec<Amount>, PortError> {
        assets
            .iter()
            .map(|a| self.pending_deposit_units(tenant, external_user_id, network, a))
            .collect()
    }

    fn credited_by_address(
        &mut self,
        network: Network,
    ) -> Result<Vec<(String, String, Amount)>, PortError> {
        let mut sums: BTreeMap<(String, String), Amount> = BTreeMap::new();
        for d in self
            .state
            .deposits
            .iter()
            .filter(|d| d.network == network && d.status == DepositStatus::Credited)
        {
            let total = sums
                .entry((d.address.clone(), d.asset.clone()))
                .or_insert(Amount::ZERO);
            *total = total
                .checked_add(d.amount)
                .ok_or_else(|| PortError::permanent("store", "credited sum overflows"))?;
        }
        Ok(sums.into_iter().map(|((a, s), n)| (a, s, n)).collect())
    }

    fn owed_after_reorg_units(
        &mut self,
        tenant: &TenantId,
        external_user_id: &str,
        network: Network,
        asset: &str,
    ) -> Result<Amount, PortError> {
        self.state
            .deposits
            .iter()
            .filter(|d| {
                d.tenant == tenant
                    && d.external_user_id == external_user_id
                    && d.network == network
                    && d.asset == asset
            })
            .try_fold(Amount::ZERO, |sum, d| {
                sum.checked_add(d.shortfall)
                    .ok_or_else(|| PortError::permanent("store", "owed shortfalls overflow u128"))
            })
    }
}

// ---- outgoing transactions ----

impl OutgoingRepo for Tx {
    fn insert_outgoing(&mut self, t: &OutgoingTx) -> Result<(), PortError> {
        let all = &self.state.outgoing;
        if all.iter().any(|(x, _)| x.id == t.id) {
            return Err(constraint(format!("outgoing transaction {} exists", t.id)));
        }
        if all
            .iter()
            .any(|(x, _)| x.purpose == t.purpose && x.reference_id == t.reference_id)
        {
            return Err(constraint("outgoing_txs (purpose, reference_id) is unique"));
        }
        if t.nonce.is_some()
            && all
                .iter()
                .any(|(x, _)| x.network == t.network && x.from == t.from && x.nonce == t.nonce)
        {
            return Err(constraint(
                "outgoing_txs (network, from_address, nonce) is unique",
            ));
        }
        check_attempt_hashes(all, t)?;
        self.state.outgoing.push((t.clone(), None));
        Ok(())
    }

    fn update_outgoing(&mut self, t: &OutgoingTx) -> Result<(), PortError> {
        let Some((stored, lease)) = self.state.outgoing.iter_mut().find(|(x, _)| x.id == t.id)
        else {
            return Err(PortError::permanent(
                "store",
                format!("outgoing transaction {} does not exist", t.id),
            ));
        };
        if t.lease.is_some() && *lease != t.lease {
            return Err(PortError::transient(
                "store",
                format!(
                    "outgoing transaction {}: its lease ran out and another broadcaster holds it",
                    t.id
                ),
            ));
        }
        if stored.nonce.is_some() && t.nonce.is_some() && stored.nonce != t.nonce {
            return Err(PortError::permanent(
                "store",
                format!(
                    "outgoing transaction {}: its nonce is {:?}, not {:?}",
                    t.id, stored.nonce, t.nonce
                ),
            ));
        }
        let nonce = stored.nonce.or(t.nonce);
        let (network, from) = (stored.network, stored.from.clone());
        let all = &self.state.outgoing;
        if nonce.is_some()
            && all.iter().any(|(x, _)| {
                x.id != t.id && x.network == network && x.from == from && x.nonce == nonce
            })
        {
            return Err(constraint(
                "outgoing_txs (network, from_address, nonce) is unique",
            ));
        }
        check_attempt_hashes(all, t)?;
        let Some((stored, lease)) = self.state.outgoing.iter_mut().find(|(x, _)| x.id == t.id)
        else {
            unreachable!("found above")
        };
        stored.nonce = nonce;
        stored.status = t.status;
        stored.attempts = t.attempts.clone();
        stored.included = t.included.clone();
        stored.failure_reason = t.failure_reason.clone();
        stored.history = t.history.clone();
        stored.next_check_at = t.next_check_at;
        stored.updated_at = t.updated_at;
        *lease = t.lease;
        Ok(())
    }

    fn release_outgoing(&mut self, id: Uuid, at: Timestamp) -> Result<(), PortError> {
        match self.state.outgoing.iter_mut().find(|(x, _)| x.id == id) {
            Some((_, lease)) if *lease == Some(at) => {
                *lease = None;
                Ok(())
            }
            _ => Err(PortError::transient(
                "store",
                format!(
                    "outgoing transaction {id}: its lease ran out and another broadcaster holds it"
                ),
            )),
        }
    }

    fn allocate_nonce(
        &mut self,
        network: Network,
        address: &str,
        seed: u64,
    ) -> Result<u64, PortError> {
        // As the SQL stores: a nonce lives in a BIGINT.
        bigint("seed", seed)?;
        let next = self
            .state
            .nonces_next
            .entry((network, address.to_owned()))
            .or_insert(seed);
        let nonce = *next;
        *next = next
            .checked_add(1)
            .ok_or_else(|| constraint("next_nonce fits"))?;
        Ok(nonce)
    }

    fn advance_nonce(
        &mut self,
        network: Network,
        address: &str,
        next: u64,
    ) -> Result<bool, PortError> {
        bigint("next", next)?;
        match self
            .state
            .nonces_next
            .get_mut(&(network, address.to_owned()))
        {
            Some(n) if *n < next => {
                *n = next;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn claim_outgoing(
        &mut self,
        network: Network,
        now: Timestamp,
        lease_until: Timestamp,
        limit: usize,
    ) -> Result<Vec<OutgoingTx>, PortError> {
        let mut due: Vec<usize> = self
            .state
            .outgoing
            .iter()
            .enumerate()
            .filter(|(_, (t, lease))| {
                t.network == network
                    && !t.status.is_terminal()
                    && t.next_check_at <= now
                    && lease.is_none_or(|l| l <= now)
            })
            .map(|(i, _)| i)
            .collect();
        due.sort_by_key(|&i| {
            let t = &self.state.outgoing[i].0;
            (t.next_check_at, t.created_at, t.id)
        });
        due.truncate(limit);
        Ok(due
            .into_iter()
            .map(|i| {
                let (t, lease) = &mut self.state.outgoing[i];
                *lease = Some(lease_until);
                let mut copy = t.clone();
                copy.lease = Some(lease_until);
                copy
            })
            .collect())
    }
}

impl OutgoingReads for Tx {
    fn outgoing(&mut self, id: Uuid) -> Result<Option<OutgoingTx>, PortError> {
        Ok(self
            .state
            .outgoing
            .iter()
            .find(|(t, _)| t.id == id)
            .map(|(t, _)| t.clone()))
    }

    fn outgoing_for(
        &mut self,
        purpose: Purpose,
        reference_id: Uuid,
    ) -> Result<Option<OutgoingTx>, PortError> {
        Ok(self
            .state
            .outgoing
            .iter()
            .find(|(t, _)| t.purpose == purpose && t.reference_id == reference_id)
            .map(|(t, _)| t.clone()))
    }

    fn outgoing_by_attempt(
        &mut self,
        network: Network,
        hash: &str,
    ) -> Result<Option<OutgoingTx>, PortError> {
        Ok(self
            .state
            .outgoing
            .iter()
            .find(|(t, _)| t.network == network && t.attempts.iter().any(|a| a.hash == hash))
            .map(|(t, _)| t.clone()))
    }

    fn next_nonce(&mut self, network: Network, address: &str) -> Result<Option<u64>, PortError> {
        Ok(self
            .state
            .nonces_next
            .get(&(network, address.to_owned()))
            .copied())
    }

    fn outgoing_in_flight(
        &mut self,
        network: Network,
        from: &str,
    ) -> Result<Vec<OutgoingTx>, PortError> {
        let mut open: Vec<OutgoingTx> = self
            .state
            .outgoing
            .iter()
            .filter(|(t, _)| t.network == network && t.from == from && !t.status.is_terminal())
            .map(|(t, _)| t.clone())
            .collect();
        open.sort_by_key(|t| (t.created_at, t.id));
        Ok(open)
    }

    fn unfinished_outgoing_count(&mut self, network: Network) -> Result<u64, PortError> {
        Ok(count(
            self.state
                .outgoing
                .iter()
                .filter(|(t, _)| t.network == network && !t.status.is_terminal())
                .count(),
        ))
    }
}

// ---- withdrawals ----

impl custody_core::withdrawal::WithdrawalRepo for Tx {
    fn insert_quote(&mut self, q: &custody_core::withdrawal::Quote) -> Result<(), PortError> {
        if self.state.quotes.iter().any(|x| x.id == q.id) {
            return Err(constraint(format!("quote {} exists", q.id)));
        }
        self.state.quotes.push(q.clone());
        Ok(())
    }

    fn use_quote(&mut self, id: Uuid, at: Timestamp) -> Result<bool, PortError> {
        let found = self
            .state
            .quotes
            .iter_mut()
            .find(|q| q.id == id && q.used_at.is_none());
        Ok(found.map(|q| q.used_at = Some(at)).is_some())
    }

    fn insert_withdrawal(
        &mut self,
        w: &custody_core::withdrawal::Withdrawal,
    ) -> Result<(), PortError> {
        let all = &self.state.withdrawals;
        if all.iter().any(|x| x.id == w.id) {
            return Err(constraint(format!("withdrawal {} exists", w.id)));
        }
        if all.iter().any(|x| x.quote_id == w.quote_id) {
            return Err(constraint("withdrawals.quote_id is unique"));
        }
        if !self.state.quotes.iter().any(|q| q.id == w.quote_id) {
            return Err(constraint("withdrawals.quote_id references a quote"));
        }
        self.state.withdrawals.push(w.clone());
        Ok(())
    }

    fn update_withdrawal(
        &mut self,
        w: &custody_core::withdrawal::Withdrawal,
    ) -> Result<(), PortError> {
        let Some(stored) = self.state.withdrawals.iter_mut().find(|x| x.id == w.id) else {
            return Err(PortError::permanent(
                "store",
                format!("withdrawal {} does not exist", w.id),
            ));
        };
        stored.status = w.status;
        stored.tx_hash = w.tx_hash.clone();
        stored.block_number = w.block_number;
        stored.confirmations = w.confirmations;
        stored.actual_network_cost_units = w.actual_network_cost_units;
        stored.failure_reason = w.failure_reason.clone();
        stored.history = w.history.clone();
        stored.updated_at = w.updated_at;
        Ok(())
    }
}

impl custody_core::withdrawal::WithdrawalReads for Tx {
    fn quote(
        &mut self,
        tenant: &TenantId,
        id: Uuid,
    ) -> Result<Option<custody_core::withdrawal::Quote>, PortError> {
        Ok(self
            .state
            .quotes
            .iter()
            .find(|q| q.id == id && q.tenant == tenant)
            .cloned())
    }

    fn withdrawal(
        &mut self,
        tenant: &TenantId,
        id: Uuid,
    ) -> Result<Option<custody_core::withdrawal::Withdrawal>, PortError> {
        Ok(self
            .state
            .withdrawals
            .iter()
            .find(|w| w.id == id && w.tenant == tenant)
            .cloned())
    }

    fn withdrawal_by_id(
        &mut self,
        id: Uuid,
    ) -> Result<Option<custody_core::withdrawal::Withdrawal>, PortError> {
        Ok(self.state.withdrawals.iter().find(|w| w.id == id).cloned())
    }

    fn list_withdrawals(
        &mut self,
        page: Page,
    ) -> Result<Paged<custody_core::withdrawal::Withdrawal>, PortError> {
        Ok(page::select(
            &self.state.withdrawals,
            |w| (w.created_at, w.id),
            page,
        ))
    }

    fn pending_withdrawal_count(&mut self) -> Result<u64, PortError> {
        use custody_core::withdrawal::WithdrawalStatus::{Broadcasted, Reserved};
        let pending =
            |w: &&custody_core::withdrawal::Withdrawal| matches!(w.status, Reserved | Broadcasted);
        Ok(count(self.state.withdrawals.iter().filter(pending).count()))
    }
}

// ---- swaps ----

fn same_allowance(
    a: &custody_core::swap::Allowance,
    network: Network,
    owner: &str,
    token: &str,
    spender: &str,
) -> bool {
    a.network == network
        && a.owner.eq_ignore_ascii_case(owner)
        && a.token.eq_ignore_ascii_case(token)
        && a.spender.eq_ignore_ascii_case(spender)
}

impl custody_core::swap::SwapRepo for Tx {
    fn insert_swap_quote(&mut self, q: &custody_core::swap::SwapQuote) -> Result<(), PortError> {
        if self.state.swap_quotes.iter().any(|x| x.id == q.id) {
            return Err(constraint(format!("swap quote {} exists", q.id)));
        }
        self.state.swap_quotes.push(q.clone());
        Ok(())
    }

    fn use_swap_quote(&mut self, id: Uuid, at: Timestamp) -> Result<bool, PortError> {
        let found = self
            .state
            .swap_quotes
            .iter_mut()
            .find(|q| q.id == id && q.used_at.is_none());
        Ok(found.map(|q| q.used_at = Some(at)).is_some())
    }

    fn insert_swap(&mut self, w: &custody_core::swap::Swap) -> Result<(), PortError> {
        let all = &self.state.swaps;
        if all.iter().any(|x| x.id == w.id) {
            return Err(constraint(format!("swap {} exists", w.id)));
        }
        if all.iter().any(|x| x.quote_id == w.quote_id) {
            return Err(constraint("swaps.quote_id is unique"));
        }
        if !self.state.swap_quotes.iter().any(|q| q.id == w.quote_id) {
            return Err(constraint("swaps.quote_id references a swap quote"));
        }
        self.state.swaps.push(w.clone());
        Ok(())
    }

    fn update_swap(&mut self, w: &custody_core::swap::Swap) -> Result<(), PortError> {
        let Some(stored) = self.state.swaps.iter_mut().find(|x| x.id == w.id) else {
            return Err(PortError::permanent(
                "store",
                format!("swap {} does not exist", w.id),
            ));
        };
        stored.status = w.status;
        stored.tx_hash = w.tx_hash.clone();
        stored.block_number = w.block_number;
        stored.actual_amount_in = w.actual_amount_in;
        stored.actual_amount_out = w.actual_amount_out;
        stored.actual_network_cost_units = w.actual_network_cost_units;
        stored.failure_reason = w.failure_reason.clone();
        stored.history = w.history.clone();
        stored.updated_at = w.updated_at;
        Ok(())
    }

    fn put_allowance(&mut self, a: &custody_core::swap::Allowance) -> Result<(), PortError> {
        self.state
            .allowances
            .retain(|x| !same_allowance(x, a.network, &a.owner, &a.token, &a.spender));
        self.state.allowances.push(a.clone());
        Ok(())
    }

    fn drop_allowance(
        &mut self,
        network: Network,
        owner: &str,
        token: &str,
        spender: &str,
    ) -> Result<(), PortError> {
        self.state
            .allowances
            .retain(|x| !same_allowance(x, network, owner, token, spender));
        Ok(())
    }
}

impl custody_core::swap::SwapReads for Tx {
    fn swap_quote(
        &mut self,
        tenant: &TenantId,
        id: Uuid,
    ) -> Result<Option<custody_core::swap::SwapQuote>, PortError> {
        Ok(self
            .state
            .swap_quotes
            .iter()
            .find(|q| q.id == id && q.tenant == tenant)
            .cloned())
    }

    fn swap(
        &mut self,
        tenant: &TenantId,
        id: Uuid,
    ) -> Result<Option<custody_core::swap::Swap>, PortError> {
        Ok(self
            .state
            .swaps
            .iter()
            .find(|w| w.id == id && w.tenant == tenant)
            .cloned())
    }

    fn swap_by_id(&mut self, id: Uuid) -> Result<Option<custody_core::swap::Swap>, PortError> {
        Ok(self.state.swaps.iter().find(|w| w.id == id).cloned())
    }

    fn list_swaps(&mut self, page: Page) -> Result<Paged<custody_core::swap::Swap>, PortError> {
        Ok(page::select(
            &self.state.swaps,
            |w| (w.created_at, w.id),
            page,
        ))
    }

    fn pending_swap_count(&mut self) -> Result<u64, PortError> {
        use custody_core::swap::SwapStatus::{Broadcasted, Reserved};
        let pending = |s: &&custody_core::swap::Swap| matches!(s.status, Reserved | Broadcasted);
        Ok(count(self.state.swaps.iter().filter(pending).count()))
    }

    fn allowance(
        &mut self,
        network: Network,
        owner: &str,
        token: &str,
        spender: &str,
    ) -> Result<Option<custody_core::swap::Allowance>, PortError> {
        Ok(self
            .state
            .allowances
            .iter()
            .find(|x| same_allowance(x, network, owner, token, spender))
            .cloned())
    }

    fn allowances_of(
        &mut self,
        network: Network,
        owner: &str,
    ) -> Result<Vec<custody_core::swap::Allowance>, PortError> {
        let mut all: Vec<_> = self
            .state
            .allowances
            .iter()
            .filter(|a| a.network == network && a.owner.eq_ignore_ascii_case(owner))
            .map(|a| custody_core::swap::Allowance {
                owner: a.owner.to_ascii_lowercase(),
                token: a.token.to_ascii_lowercase(),
                spender: a.spender.to_ascii_lowercase(),
                ..a.clone()
            })
            .collect();
        all.sort_by(|a, b| (&a.token, &a.spender).cmp(&(&b.token, &b.spender)));
        Ok(all)
    }
}

// ---- chain position ----

impl ChainRepo for Tx {
    fn record_block(
        &mut self,
        network: Network,
        number: u64,
        hash: &str,
        parent_hash: &str,
    ) -> Result<(), PortError> {
        self.state
            .blocks
            .insert((network, number), (hash.to_owned(), parent_hash.to_owned()));
        self.state.cursors.insert(
            network,
            ChainCursor {
                number,
                hash: hash.to_owned(),
            },
        );
        Ok(())
    }

    fn rewind_blocks(&mut self, network: Network, number: u64) -> Result<(), PortError> {
        self.state
            .blocks
            .retain(|&(n, b), _| n != network || b <= number);
        match self.state.blocks.get(&(network, number)) {
            // Moves an existing cursor; a network without one keeps none.
            Some((hash, _)) => {
                if let Some(cursor) = self.state.cursors.get_mut(&network) {
                    *cursor = ChainCursor {
                        number,
                        hash: hash.clone(),
                    };
                }
            }
            None => {
                self.state.cursors.remove(&network);
            }
        }
        Ok(())
    }

    fn prune_blocks(&mut self, network: Network, below: u64) -> Result<(), PortError> {
        self.state
            .blocks
            .retain(|&(n, b), _| n != network || b >= below);
        Ok(())
    }
}

impl ChainReads for Tx {
    fn chain_cursor(&mut self, network: Network) -> Result<Option<ChainCursor>, PortError> {
        Ok(self.state.cursors.get(&network).cloned())
    }

    fn recorded_block_hash(
        &mut self,
        network: Network,
        number: u64,
    ) -> Result<Option<String>, PortError> {
        Ok(self
            .state
            .blocks
            .get(&(network, number))
            .map(|(hash, _)| hash.clone()))
    }
}

// ---- sweeps and treasury fundings ----

impl custody_core::sweep::SweepRepo for Tx {
    fn insert_sweep(&mut self, sweep: &custody_core::sweep::Sweep) -> Result<(), PortError> {
        let all = &self.state.sweeps;
        if all.iter().any(|x| x.id == sweep.id) {
            return Err(constraint(format!("sweep {} exists", sweep.id)));
        }
        if all
            .iter()
            .any(|x| x.network == sweep.network && x.address == sweep.address && x.status.is_open())
        {
            return Err(constraint("one open sweep per (network, address)"));
        }
        self.state.sweeps.push(sweep.clone());
        Ok(())
    }

    fn update_sweep(&mut self, sweep: &custody_core::sweep::Sweep) -> Result<(), PortError> {
        let Some(stored) = self.state.sweeps.iter_mut().find(|x| x.id == sweep.id) else {
            return Err(PortError::permanent(
                "store",
                format!("sweep {} does not exist", sweep.id),
            ));
        };
        stored.amount = sweep.amount;
        stored.status = sweep.status;
        stored.funding_id = sweep.funding_id;
        stored.outgoing_id = sweep.outgoing_id;
        stored.fee_native = sweep.fee_native;
        stored.tx_hash = sweep.tx_hash.clone();
        stored.block_number = sweep.block_number;
        stored.failure_reason = sweep.failure_reason.clone();
        stored.history = sweep.history.clone();
        stored.updated_at = sweep.updated_at;
        Ok(())
    }

    fn insert_funding(&mut self, funding: &custody_core::sweep::Funding) -> Result<(), PortError> {
        if self.state.fundings.iter().any(|x| x.id == funding.id) {
            return Err(constraint(format!(
                "treasury funding {} exists",
                funding.id
            )));
        }
        self.state.fundings.push(funding.clone());
        Ok(())
    }

    fn update_funding(&mut self, funding: &custody_core::sweep::Funding) -> Result<(), PortError> {
        let Some(stored) = self.state.fundings.iter_mut().find(|x| x.id == funding.id) else {
            return Err(PortError::permanent(
                "store",
                format!("treasury funding {} does not exist", funding.id),
            ));
        };
        stored.status = funding.status;
        stored.waits_for = funding.waits_for;
        stored.reclaim_id = funding.reclaim_id;
        stored.fee_native = funding.fee_native;
        stored.tx_hash = funding.tx_hash.clone();
        stored.block_number = funding.block_number;
        stored.failure_reason = funding.failure_reason.clone();
        stored.history = funding.history.clone();
        stored.updated_at = funding.updated_at;
        Ok(())
    }
}

impl custody_core::sweep::SweepReads for Tx {
    fn sweep_by_id(&mut self, id: Uuid) -> Result<Option<custody_core::sweep::Sweep>, PortError> {
        Ok(self.state.sweeps.iter().find(|x| x.id == id).cloned())
    }

    fn funding_by_id(
        &mut self,
        id: Uuid,
    ) -> Result<Option<custody_core::sweep::Funding>, PortError> {
        Ok(self.state.fundings.iter().find(|x| x.id == id).cloned())
    }

    fn open_sweep_at(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<custody_core::sweep::Sweep>, PortError> {
        Ok(self
            .state
            .sweeps
            .iter()
            .find(|x| x.network == network && x.address == address && x.status.is_open())
            .cloned())
    }

    fn latest_sweep_at(
        &mut self,
        network: Network,
        address: &str,
    ) -> Result<Option<custody_core::sweep::Sweep>, PortError> {
        Ok(self
            .state
            .sweeps
            .iter()
            .filter(|x| x.network == network && x.address == address)
            .max_by_key(|x| (x.created_at, x.id))
            .cloned())
    }

    fn sweeps_awaiting_transfer(
        &mut self,
        network: Network,
    ) -> Result<Vec<custody_core::sweep::Sweep>, PortError> {
        let mut out: Vec<_> = self
            .state
            .sweeps
            .iter()
            .filter(|x| {
                x.network == network
                    && x.status == custody_core::sweep::SweepStatus::Funding
                    && x.outgoing_id.is_none()
            })
            .cloned()
            .collect();
        out.sort_by_key(|x| (x.created_at, x.id));
        Ok(out)
    }

    fn list_sweeps(&mut self, page: Page) -> Result<Paged<custody_core::sweep::Sweep>, PortError> {
        Ok(page::select(
            &self.state.sweeps,
            |x| (x.created_at, x.id),
            page,
        ))
    }

    fn open_sweep_count(&mut self) -> Result<u64, PortError> {
        Ok(count(
            self.state
                .sweeps
                .iter()
                .filter(|s| s.status.is_open())
                .count(),
        ))
    }

    fn open_fundings(
        &mut self,
        network: Network,
    ) -> Result<Vec<custody_core::sweep::Funding>, PortError> {
        use custody_core::sweep::FundingStatus;
        let mut out: Vec<_> = self
            .state
            .fundings
            .iter()
            .filter(|x| {
                x.network == network
                    && matches!(
                        x.status,
                        FundingStatus::Planned | FundingStatus::Broadcasted
                    )
            })
            .cloned()
            .collect();
        out.sort_by_key(|x| (x.created_at, x.id));
        Ok(out)
    }

    fn list_fundings(
        &mut self,
        page: Page,
    ) -> Result<Paged<custody_core::sweep::Funding>, PortError> {
        Ok(page::select(
            &self.state.fundings,
            |x| (x.created_at, x.id),
            page,
        ))
    }

    fn sweep_flows(
        &mut self,
        network: Network,
        native: &str,
    ) -> Result<Vec<custody_core::sweep::AddressFlow>, PortError> {
        let sweeps: Vec<_> = self
            .state
            .sweeps
            .iter()
            .filter(|x| x.network == network)
            .cloned()
            .collect();
        let fundings: Vec<_> = self
            .state
            .fundings
            .iter()
            .filter(|x| x.network == network)
            .cloned()
            .collect();
        Ok(custody_core::sweep::flows(&sweeps, &fundings, native))
    }
}

/// Refuses a nonce above what a BIGINT holds, as the SQL stores do.
fn bigint(what: &str, n: u64) -> Result<(), PortError> {
    if i64::try_from(n).is_err() {
        return Err(PortError::permanent(
            "store",
            format!("{what} {n} does not fit a BIGINT"),
        ));
    }
    Ok(())
}
