//! [`Exclusive`] on PostgreSQL: a session advisory lock per name, held on a connection of its
//! own. When the holding process dies its connection closes and the server releases the lock
//! as soon as it has ended that session (a moment later), so a standby instance takes the work
//! on one of its next asks (no lease to wait out). The
//! lock is keyed by the schema too, so deployments sharing a server do not block each other.
//!
//! A holder whose host goes silent (power lost, network cut) closes nothing: the session is
//! ended by the server's TCP keepalives set on it ([`crate::connection`], about 11 s), and the
//! holder's own next ask fails within the session's timeouts, so it stops scanning instead of
//! scanning on a lock it no longer holds.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use custody_core::ports::Exclusive;

/// The locks of this process, and the connection that holds them.
pub struct PgExclusive {
    config: postgres::Config,
    state: Arc<Mutex<Session>>,
}

#[derive(Default)]
struct Session {
    client: Option<postgres::Client>,
    held: BTreeSet<String>,
}

impl std::fmt::Debug for PgExclusive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgExclusive").finish_non_exhaustive()
    }
}

const KEY: &str = "hashtextextended('custody-work:' || current_schema() || ':' || $1, 0)";

impl PgExclusive {
    /// Locks on the database of `config` (connected on first use).
    pub(crate) fn new(config: postgres::Config) -> Self {
        PgExclusive {
            config,
            state: Arc::default(),
        }
    }
}

fn hold(config: &postgres::Config, session: &mut Session, work: &str) -> Result<bool, String> {
    if session
        .client
        .as_ref()
        .is_none_or(postgres::Client::is_closed)
    {
        // A new session holds nothing: whatever the old one held is released by the server.
        session.held.clear();
        let mut client = crate::connection::lock_session(config)
            .connect(postgres::NoTls)
            .map_err(|e| e.to_string())?;
        client
            .batch_execute(crate::connection::LOCK_SESSION_SETTINGS)
            .map_err(|e| e.to_string())?;
        session.client = Some(client);
    }
    let Some(client) = session.client.as_mut() else {
        return Ok(false);
    };
    if session.held.contains(work) {
        // Still ours while the session lives; a round trip proves it does.
        return match client.simple_query("SELECT 1") {
            Ok(_) => Ok(true),
            Err(e) => {
                session.client = None;
                session.held.clear();
                Err(e.to_string())
            }
        };
    }
    let taken: bool = client
        .query_one(&format!("SELECT pg_try_advisory_lock({KEY})"), &[&work])
        .and_then(|r| r.try_get(0))
        .map_err(|e| e.to_string())?;
    if taken {
        session.held.insert(work.to_owned());
    }
    Ok(taken)
}

#[async_trait]
impl Exclusive for PgExclusive {
    async fn hold(&self, work: &str) -> bool {
        let (config, state, name) = (
            self.config.clone(),
            Arc::clone(&self.state),
            work.to_owned(),
        );
        let answer = tokio::task::spawn_blocking(move || {
            let mut session = state.lock().unwrap_or_else(|p| p.into_inner());
            hold(&config, &mut session, &name)
        })
        .await;
        match answer {
            Ok(Ok(held)) => held,
            Ok(Err(e)) => {
                tracing::warn!(work, error = %e, "cannot reach PostgreSQL for the work lock; standing by");
                false
            }
            Err(e) => {
                tracing::warn!(work, error = %e, "the work lock check failed; standing by");
                false
            }
        }
    }
}

impl Drop for PgExclusive {
    /// Ends the session (releasing every lock) on a thread of its own: closing the client
    /// blocks, which a Tokio worker must not.
    fn drop(&mut self) {
        let client = self
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .client
            .take();
        if let Some(client) = client {
            let _ = std::thread::spawn(move || drop(client)).join();
        }
    }
}
