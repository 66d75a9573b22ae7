//! What this store reads of `[store]` in `custody.toml` (the section is
//! [`custody_store_sql::StoreConfig`], shared with the SQLite store): the database's URL, whose
//! password never rests in the data dir, and the pools' sizes.

use custody_core::settings::ConfigError;
use custody_store_sql::StoreConfig;

use crate::{is_postgres_url, StoreOptions};

/// The environment variable naming the PostgreSQL database (over `[store] url`).
pub const DATABASE_URL_ENV: &str = "CUSTODY_DATABASE_URL";

/// The password of `[store] url`, which the data dir's config does not hold.
pub const DATABASE_PASSWORD_ENV: &str = "CUSTODY_DATABASE_PASSWORD";

/// The PostgreSQL database to use, if any: `CUSTODY_DATABASE_URL`, else `[store] url` with
/// the password of `CUSTODY_DATABASE_PASSWORD` (if set). `None`: the data dir's SQLite file.
pub fn database_url(store: &StoreConfig) -> Result<Option<String>, ConfigError> {
    let url = match env_value(DATABASE_URL_ENV) {
        Some(u) => Some(u),
        None => store
            .url
            .as_ref()
            .map(|u| match env_value(DATABASE_PASSWORD_ENV) {
                Some(p) => with_password(&without_password(u), &p),
                None => u.clone(),
            }),
    };
    match url {
        Some(u) if !is_postgres_url(&u) => Err(ConfigError::new(
            format!("[store] url / {DATABASE_URL_ENV}"),
            "must start with postgres:// or postgresql://",
        )),
        other => Ok(other),
    }
}

/// `var`'s value; an empty one counts as unset.
fn env_value(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.is_empty())
}

/// `url` without its password (`postgres://user:secret@host/db` → `postgres://user@host/db`,
/// and no `password=` parameter): what `init` records in the data dir, which is copied to every
/// instance's machine and must not carry the database's credentials.
pub fn without_password(url: &str) -> String {
    let (head, query) = match url.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (url, None),
    };
    let mut out = match head.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let authority = match authority.rsplit_once('@') {
                Some((userinfo, host)) => {
                    let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
                    format!("{user}@{host}")
                }
                None => authority.to_owned(),
            };
            format!("{scheme}://{authority}{path}")
        }
        None => head.to_owned(),
    };
    if let Some(q) = query {
        let kept: Vec<&str> = q
            .split('&')
            .filter(|p| !p.starts_with("password="))
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
    }
    out
}

/// `url` with `password` as its `password` parameter (percent-encoded).
fn with_password(url: &str, password: &str) -> String {
    let encoded: String = password
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}password={encoded}")
}

impl StoreOptions {
    /// The pools `[store]` sizes, with the default queue and retries.
    pub fn from_config(store: &StoreConfig) -> Self {
        StoreOptions {
            writers: store.writers,
            readers: store.readers,
            ..StoreOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_database_url_holds_no_password() {
        assert_eq!(
            without_password("postgres://app:s3cr%40t@db.internal:5432/custody?sslmode=disable"),
            "postgres://app@db.internal:5432/custody?sslmode=disable"
        );
        assert_eq!(
            without_password("postgresql://app@db/custody?password=x&application_name=c"),
            "postgresql://app@db/custody?application_name=c"
        );
        assert_eq!(
            without_password("postgres://db/custody?password=x"),
            "postgres://db/custody"
        );
        let url = with_password("postgres://app@db/custody", "p@ss word");
        assert_eq!(url, "postgres://app@db/custody?password=p%40ss%20word");
    }

    #[test]
    fn a_data_dir_without_store_keys_gets_this_stores_pools() {
        let options = StoreOptions::from_config(&StoreConfig::default());
        let defaults = StoreOptions::default();
        assert_eq!(
            (options.writers, options.readers),
            (defaults.writers, defaults.readers)
        );
    }
}
