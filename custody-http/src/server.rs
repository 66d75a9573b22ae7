//! The hyper server: accept loop, per-connection limits and graceful shutdown (stop accepting,
//! let in-flight requests finish, then return).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::dispatch::handle;
use crate::state::AppState;

/// How long shutdown waits for in-flight requests before giving up on them.
pub const DRAIN_TIMEOUT_MS: u64 = 30_000;

/// Serves until `shutdown` resolves, then drains. Returns once every connection is closed or
/// the drain timeout passed.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(state.limits.connections_max));
    let header_timeout = Duration::from_millis(state.limits.header_read_timeout_ms);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
                    tracing::warn!("connection limit reached; closing a new connection");
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let state = Arc::clone(&state);
                let service = service_fn(move |req| {
                    let state = Arc::clone(&state);
                    async move { Ok::<_, std::convert::Infallible>(handle(state, req).await) }
                });
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _permit = permit;
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(Duration::from_millis(DRAIN_TIMEOUT_MS)) => {
            tracing::warn!("shutdown drain timed out; closing remaining connections");
        }
    }
    Ok(())
}
