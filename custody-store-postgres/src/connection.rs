//! How every connection of the store is made, so that a dead peer is noticed in seconds, not in
//! the two hours TCP takes by default: a host that lost power leaves a half-open socket that
//! would hang a worker thread, and keep the scanner's work lock (a session advisory lock, see
//! [`crate::exclusive`]) held on the server for as long.
//!
//! Client side, on every connection: a connect timeout, TCP keepalives (idle 15 s, then every
//! 5 s, 3 probes) and `tcp_user_timeout` (30 s of unacknowledged data ends the connection).
//! Values given in the URL for `connect_timeout` and `tcp_user_timeout` are kept.

use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const USER_TIMEOUT: Duration = Duration::from_secs(30);

/// `config` with the timeouts and keepalives every connection of the store uses.
pub(crate) fn hardened(config: &postgres::Config) -> postgres::Config {
    let mut c = config.clone();
    if c.get_connect_timeout().is_none() {
        c.connect_timeout(CONNECT_TIMEOUT);
    }
    if c.get_tcp_user_timeout().is_none() {
        c.tcp_user_timeout(USER_TIMEOUT);
    }
    c.keepalives(true)
        .keepalives_idle(Duration::from_secs(15))
        .keepalives_interval(Duration::from_secs(5))
        .keepalives_retries(3);
    c
}

/// The work lock's session is tighter still: its holder must learn within seconds that it lost
/// the lock, and the server must drop the session (releasing the lock for a standby) within
/// seconds of the holder's host going silent. It is named after the process
/// (`custody work lock pid=N`), so `pg_stat_activity` joined with `pg_locks` tells which
/// instance scans.
pub(crate) fn lock_session(config: &postgres::Config) -> postgres::Config {
    let mut c = hardened(config);
    c.application_name(&format!("custody work lock pid={}", std::process::id()));
    c.tcp_user_timeout(Duration::from_secs(10))
        .keepalives_idle(Duration::from_secs(5))
        .keepalives_interval(Duration::from_secs(2))
        .keepalives_retries(3);
    c
}

/// Run on the lock's session once connected: the server probes the holder (5 s idle, every 2 s,
/// 3 probes, so a silent holder's session ends in about 11 s and its locks with it), and no
/// statement of that session may wait more than 5 s.
pub(crate) const LOCK_SESSION_SETTINGS: &str = "SET tcp_keepalives_idle = 5;
     SET tcp_keepalives_interval = 2;
     SET tcp_keepalives_count = 3;
     SET statement_timeout = '5s'";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_connection_notices_a_dead_peer_in_seconds_and_the_url_keeps_its_timeouts() {
        let plain: postgres::Config = "postgres://u@127.0.0.1/db".parse().unwrap();
        let c = hardened(&plain);
        assert_eq!(c.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        assert_eq!(c.get_tcp_user_timeout(), Some(&USER_TIMEOUT));
        assert!(c.get_keepalives());
        assert_eq!(c.get_keepalives_idle(), Duration::from_secs(15));

        let lock = lock_session(&plain);
        assert_eq!(lock.get_tcp_user_timeout(), Some(&Duration::from_secs(10)));
        assert_eq!(lock.get_keepalives_idle(), Duration::from_secs(5));

        let given: postgres::Config = "postgres://u@127.0.0.1/db?connect_timeout=3"
            .parse()
            .unwrap();
        assert_eq!(
            hardened(&given).get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
    }
}
