//! The credentials fence of one request.
//!
//! A request's credential comes from `crate::authn::CredentialCache`, which keeps it with the
//! store's credentials version it was read at. Most routes read that version before they trust
//! the entry: one read transaction of its own per request. The hottest routes
//! ([`crate::routes::RouteId::fences_in_route`]) skip that read and carry the entry's version
//! here instead; their first transaction, before it reads or writes anything else, checks that
//! the version is unchanged ([`holds`]). So a revoked credential is refused exactly as before
//! (the check and the route's work share one snapshot, or one write transaction), for one read
//! transaction per request instead of two.
//!
//! When the check fails, nothing of the route happened (the check comes first, and a failed
//! check ends the transaction's work); the dispatcher authenticates the request again from the
//! store and, if its credential still stands, runs the route again (`crate::dispatch`). When a
//! route ends without reaching its transaction (a refusal before it), the dispatcher checks the
//! credential before it answers. Either way no answer leaves on a credential the store no
//! longer holds.

use std::sync::Mutex;

use custody_core::auth::CredentialReads;
use custody_core::error::{CoreResult, ErrorCode, PortError, Refusal};
use custody_core::ports::store::{read_quick, ReadTx, Store};
use custody_core::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceState {
    /// The credential was read, or its version checked, since the request arrived.
    Held,
    /// The credential came from the cache at this credentials version, not checked yet.
    Pending(u64),
    /// The route's transaction found another version: the credential may have changed.
    Stale,
}

#[derive(Debug)]
pub struct CredentialFence {
    state: Mutex<FenceState>,
    /// When the request was authenticated: its window is judged at that time again if it is
    /// authenticated again.
    authenticated_at: Option<Timestamp>,
}

impl CredentialFence {
    pub fn held() -> Self {
        CredentialFence {
            state: Mutex::new(FenceState::Held),
            authenticated_at: None,
        }
    }

    pub fn pending(version: u64, authenticated_at: Timestamp) -> Self {
        CredentialFence {
            state: Mutex::new(FenceState::Pending(version)),
            authenticated_at: Some(authenticated_at),
        }
    }

    pub fn state(&self) -> FenceState {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, state: FenceState) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = state;
    }

    pub fn authenticated_at(&self) -> Option<Timestamp> {
        self.authenticated_at
    }

    /// The credentials version the route's transaction must find; `None` when nothing is left
    /// to check.
    pub fn expected(&self) -> Option<u64> {
        match self.state() {
            FenceState::Pending(v) => Some(v),
            FenceState::Held | FenceState::Stale => None,
        }
    }

    /// Records what the route's transaction found: `Some` when [`holds`] passed (or had nothing
    /// to check), `None` when it did not. A failed check is answered with a refusal that the
    /// dispatcher replaces (it authenticates again and runs the route again, or refuses the
    /// credential).
    pub fn settle<T>(&self, found: Option<T>) -> CoreResult<T> {
        match found {
            Some(t) => {
                if self.expected().is_some() {
                    self.set(FenceState::Held);
                }
                Ok(t)
            }
            None => {
                self.set(FenceState::Stale);
                Err(changed().into())
            }
        }
    }

    /// The dispatcher read the credential again: it stands.
    pub fn hold(&self) {
        self.set(FenceState::Held);
    }
}

/// What a client sees if a stale check were ever answered as it is (the dispatcher answers
/// instead, see the module's comment).
fn changed() -> Refusal {
    Refusal::new(
        ErrorCode::AuthenticationFailed,
        "the credentials changed while the request was checked; sign it again",
    )
}

/// In the route's first transaction, before anything else: whether the credentials version is
/// still `expected` (always true when nothing is to be checked).
pub fn holds<T: CredentialReads + ?Sized>(
    tx: &mut T,
    expected: Option<u64>,
) -> Result<bool, PortError> {
    match expected {
        None => Ok(true),
        Some(v) => Ok(tx.credentials_version()? == Some(v)),
    }
}

/// A quick read (`Store::read_quick`) as a fenced route's first transaction: the fence is
/// checked in the same snapshot as `f` reads.
pub async fn read_quick_fenced<T, F>(
    store: &dyn Store,
    fence: &CredentialFence,
    mut f: F,
) -> CoreResult<T>
where
    T: Send + 'static,
    F: FnMut(&mut dyn ReadTx) -> CoreResult<T> + Send + 'static,
{
    let expected = fence.expected();
    let found = read_quick(store, move |tx| {
        if !holds(tx, expected)? {
            return Ok(None);
        }
        f(tx).map(Some)
    })
    .await?;
    fence.settle(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_fence_holds_once_settled_and_goes_stale_on_a_failed_check() {
        let fence = CredentialFence::pending(7, Timestamp::from_unix_millis(0));
        assert_eq!(fence.expected(), Some(7));
        assert_eq!(fence.settle(Some(1)).unwrap(), 1);
        assert_eq!(fence.state(), FenceState::Held);
        assert_eq!(fence.expected(), None);

        let fence = CredentialFence::pending(7, Timestamp::from_unix_millis(0));
        let err = fence.settle::<u8>(None).unwrap_err();
        assert_eq!(fence.state(), FenceState::Stale);
        assert!(
            matches!(err, custody_core::error::CoreError::Refused(r) if r.code == ErrorCode::AuthenticationFailed)
        );
        assert_eq!(fence.expected(), None, "a stale fence checks nothing more");
    }

    #[test]
    fn a_held_fence_checks_nothing() {
        let fence = CredentialFence::held();
        assert_eq!(fence.expected(), None);
        assert_eq!(fence.settle(Some(())), Ok(()));
        assert_eq!(fence.state(), FenceState::Held);
    }
}
