//! One file per command. Each prints its machine-readable result as one JSON object on stdout
//! and every diagnostic on stderr, so scripts can read stdout as it is. What they share is in
//! `crate::support` and the modules beside it (config, data dir, database, chains, seeds);
//! no command imports another.

pub(crate) mod credentials;
pub(crate) mod init;
pub(crate) mod ledger;
pub(crate) mod outgoing;
pub(crate) mod serve;
pub(crate) mod treasury;
pub(crate) mod wallets;
pub(crate) mod webhooks;
