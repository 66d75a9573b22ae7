//! What became of a transaction whose `COMMIT` got no answer. The connection may have died
//! before the server received the `COMMIT`, while it committed, or after it committed and before
//! the reply arrived: the client cannot tell these apart, the server can. The worker takes each
//! write transaction's id (`txid_current()`) in the round trip of its `BEGIN`; after a
//! connection error at `COMMIT` it asks, on a fresh connection, `txid_status(xid)`: `committed`
//! means the job happened, `aborted` means it did not, `in progress` means the old session is
//! still being torn down (the server aborts it once it sees the connection gone), so it asks
//! again.

use std::time::{Duration, Instant};

/// The fate of a transaction, as far as the server can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    Aborted,
    /// Still in progress at the deadline, the server unreachable, or the id too old to be known.
    Unknown(String),
}

/// How long a worker keeps asking before it answers that the outcome is unknown.
pub(crate) const RESOLVE_FOR: Duration = Duration::from_secs(30);
const ASK_EVERY: Duration = Duration::from_millis(100);

/// Asks the server what became of transaction `xid`, on a connection of its own, until it knows
/// or `patience` has passed.
pub fn resolve(config: &postgres::Config, xid: i64, patience: Duration) -> Outcome {
    let deadline = Instant::now() + patience;
    let mut client: Option<postgres::Client> = None;
    loop {
        let last = match ask(config, &mut client, xid) {
            Ok(Some(status)) => match status.as_str() {
                "committed" => return Outcome::Committed,
                "aborted" => return Outcome::Aborted,
                other => format!("transaction {xid} is still {other}"),
            },
            // NULL: older than the status the server keeps; waiting will not help.
            Ok(None) => {
                return Outcome::Unknown(format!("the server no longer knows transaction {xid}"))
            }
            Err(e) => {
                client = None;
                format!("cannot ask the server about transaction {xid}: {e}")
            }
        };
        if Instant::now() >= deadline {
            return Outcome::Unknown(last);
        }
        std::thread::sleep(ASK_EVERY);
    }
}

fn ask(
    config: &postgres::Config,
    client: &mut Option<postgres::Client>,
    xid: i64,
) -> Result<Option<String>, postgres::Error> {
    let c = match client {
        Some(c) if !c.is_closed() => c,
        _ => client.insert(config.connect(postgres::NoTls)?),
    };
    c.query_one("SELECT txid_status($1)", &[&xid])?.try_get(0)
}
