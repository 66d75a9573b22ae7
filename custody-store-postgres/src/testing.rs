//! A fresh schema per test: tests run in parallel on one database, each in its own schema
//! (selected by the connection's `search_path`), dropped when the test ends.
//!
//! The database is `CUSTODY_TEST_DATABASE_URL` (`./scripts/test.sh` creates one and drops it
//! afterwards), or the local server's `postgres` database.

use std::sync::atomic::{AtomicU64, Ordering};

/// The database tests create their schemas in.
pub fn base_url() -> String {
    std::env::var("CUSTODY_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A schema of its own, dropped (with everything in it) on drop.
#[derive(Debug)]
pub struct TestSchema {
    base: String,
    name: String,
}

fn admin(base: &str) -> postgres::Client {
    let base = base.to_owned();
    std::thread::spawn(move || {
        postgres::Client::connect(&base, postgres::NoTls)
            .unwrap_or_else(|e| panic!("the test database {base} is reachable: {e}"))
    })
    .join()
    .expect("connecting does not panic")
}

impl TestSchema {
    pub fn new() -> TestSchema {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base_url();
        let name = format!(
            "t_{}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        );
        let sql = format!("CREATE SCHEMA {name}");
        let b = base.clone();
        std::thread::spawn(move || admin(&b).batch_execute(&sql))
            .join()
            .expect("creating a schema does not panic")
            .expect("the test schema is created");
        TestSchema { base, name }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL of the database with this schema as the search path.
    pub fn url(&self) -> String {
        let sep = if self.base.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-c%20search_path%3D{}", self.base, self.name)
    }
}

impl Default for TestSchema {
    fn default() -> Self {
        TestSchema::new()
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        let base = self.base.clone();
        let _ = std::thread::spawn(move || admin(&base).batch_execute(&sql)).join();
    }
}

/// A connection lost during `COMMIT`, on purpose: the next write job's `COMMIT` (of any store in
/// the process) meets the armed fault. Tests that arm it run alone in their test binary.
pub mod commit_fault {
    use std::sync::Mutex;

    use crate::sql::{Conn, Error, Result};

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum CommitFault {
        /// The server process is terminated before the `COMMIT` is sent: it never commits.
        KillBeforeCommit,
        /// The `COMMIT` succeeds, then the connection dies before the client may read the
        /// answer: the client sees a connection error although the server committed.
        LoseReplyAfterCommit,
    }

    static ARMED: Mutex<Option<CommitFault>> = Mutex::new(None);

    pub fn arm(fault: CommitFault) {
        *ARMED.lock().unwrap_or_else(|p| p.into_inner()) = Some(fault);
    }

    fn terminate(conn: &Conn, config: &postgres::Config) {
        let pid = conn.backend_pid().expect("the backend pid is read");
        let mut admin = config
            .connect(postgres::NoTls)
            .expect("a second connection");
        // Waits (up to 5 s) until the process is gone.
        admin
            .execute("SELECT pg_terminate_backend($1, 5000)", &[&pid])
            .expect("the backend is terminated");
    }

    /// Runs the worker's `COMMIT` with the armed fault, if any, and answers what the worker
    /// would see.
    pub(crate) fn commit(
        conn: &Conn,
        config: &postgres::Config,
        run: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        let fault = ARMED.lock().unwrap_or_else(|p| p.into_inner()).take();
        match fault {
            None => run(),
            Some(CommitFault::KillBeforeCommit) => {
                terminate(conn, config);
                run()
            }
            Some(CommitFault::LoseReplyAfterCommit) => {
                run()?;
                terminate(conn, config);
                conn.execute_batch("SELECT 1")?;
                Err(Error::Conversion(
                    "the connection survived its backend".into(),
                ))
            }
        }
    }
}
