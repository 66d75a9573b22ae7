//! Rate-limit windows counted in the database (migration 0002), so that a credential's limit
//! holds across every instance on it (decisions §16). Each request is one atomic upsert that
//! commits on its own, outside any job's SERIALIZABLE transaction: a hot credential's row is
//! then a short row lock, not a stream of serialization conflicts.
//!
//! If the database cannot be reached the instance counts in memory for as long, so the limit
//! still holds per instance (the tolerance decisions §16 allows is one window's worth).

use std::any::Any;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use custody_core::auth::{window_of, RateDecision, RateLimit, RateLimiter};
use custody_core::error::{CoreError, CoreResult};
use custody_core::time::Timestamp;
use uuid::Uuid;

use crate::worker::Task;
use crate::PgStore;
use custody_store_sql::sql::OptionalExtension;
use custody_store_sql::{db_err, params, Db};

/// A [`RateLimit`] over the `rate_windows` table of a [`PgStore`].
pub struct PgRateLimiter {
    store: Arc<PgStore>,
    fallback: RateLimiter,
    /// The window old rows were last deleted in, by this instance.
    pruned: AtomicI64,
}

impl std::fmt::Debug for PgRateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRateLimiter").finish_non_exhaustive()
    }
}

fn i64_of(n: u32) -> i64 {
    i64::from(n)
}

fn u32_of(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

impl PgRateLimiter {
    pub fn new(store: Arc<PgStore>) -> Self {
        PgRateLimiter {
            store,
            fallback: RateLimiter::new(),
            pruned: AtomicI64::new(i64::MIN),
        }
    }

    async fn direct<T: Send + 'static>(
        &self,
        f: impl FnOnce(&crate::sql::Conn) -> CoreResult<T> + Send + 'static,
    ) -> CoreResult<T> {
        let job: crate::worker::DirectJob =
            Box::new(move |c| f(c).map(|v| Box::new(v) as Box<dyn Any + Send>));
        let answer = self
            .store
            .writes
            .submit(|reply| Task::Direct(job, reply))
            .await?;
        answer.downcast::<T>().map(|b| *b).map_err(|_| {
            CoreError::Invariant("rate counter answered a value of another type".into())
        })
    }

    fn degraded(&self, what: &str, e: &CoreError) {
        tracing::warn!(error = %e, "rate limit: {what} failed; counting in this instance's memory");
    }
}

#[async_trait]
impl RateLimit for PgRateLimiter {
    async fn peek(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision {
        let (window, reset_after_s) = window_of(now);
        let used = self
            .direct(move |c| {
                Db::new(c).query_row(
                    "SELECT used FROM rate_windows WHERE credential_id = ?1 AND window_number = ?2",
                    params![credential.to_string(), window],
                    |r| r.get::<_, i64>(0),
                )
                .optional()
                .map_err(|e| CoreError::Port(db_err(e)))
            })
            .await;
        match used {
            Ok(used) => {
                let used = u32_of(used.unwrap_or(0));
                RateDecision {
                    allowed: used < limit,
                    limit,
                    remaining: limit.saturating_sub(used),
                    reset_after_s,
                }
            }
            Err(e) => {
                self.degraded("reading a window", &e);
                self.fallback.peek(credential, limit, now)
            }
        }
    }

    async fn check(&self, credential: Uuid, limit: u32, now: Timestamp) -> RateDecision {
        let (window, reset_after_s) = window_of(now);
        if limit == 0 {
            // Nothing is allowed, so nothing is counted (the upsert would count the first one).
            return RateDecision {
                allowed: false,
                limit,
                remaining: 0,
                reset_after_s,
            };
        }
        let prune = self.pruned.swap(window, Ordering::Relaxed) != window;
        let counted = self
            .direct(move |c| {
                if prune {
                    Db::new(c)
                        .execute(
                            "DELETE FROM rate_windows WHERE window_number < ?1",
                            params![window - 1],
                        )
                        .map_err(|e| CoreError::Port(db_err(e)))?;
                }
                // No row back: the window is full, and a refused request is not counted.
                Db::new(c)
                    .query_row(
                        "INSERT INTO rate_windows (credential_id, window_number, used) \
                     VALUES (?1, ?2, 1) \
                     ON CONFLICT (credential_id, window_number) \
                     DO UPDATE SET used = rate_windows.used + 1 WHERE rate_windows.used < ?3 \
                     RETURNING used",
                        params![credential.to_string(), window, i64_of(limit)],
                        |r| r.get::<_, i64>(0),
                    )
                    .optional()
                    .map_err(|e| CoreError::Port(db_err(e)))
            })
            .await;
        match counted {
            Ok(Some(used)) => RateDecision {
                allowed: true,
                limit,
                remaining: limit.saturating_sub(u32_of(used)),
                reset_after_s,
            },
            Ok(_) => RateDecision {
                allowed: false,
                limit,
                remaining: 0,
                reset_after_s,
            },
            Err(e) => {
                self.degraded("counting a request", &e);
                self.fallback.check(credential, limit, now)
            }
        }
    }

    async fn refund(&self, credential: Uuid, now: Timestamp) {
        let (window, _) = window_of(now);
        let refunded = self
            .direct(move |c| {
                Db::new(c)
                    .execute(
                        "UPDATE rate_windows SET used = used - 1 \
                     WHERE credential_id = ?1 AND window_number = ?2 AND used > 0",
                        params![credential.to_string(), window],
                    )
                    .map_err(|e| CoreError::Port(db_err(e)))
            })
            .await;
        if let Err(e) = refunded {
            self.degraded("giving back a request", &e);
            self.fallback.refund(credential, now);
        }
    }
}
