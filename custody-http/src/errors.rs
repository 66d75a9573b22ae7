//! The one place where domain outcomes become HTTP statuses (decisions §7). Exhaustive on
//! purpose: a new error code does not compile until it has a status.

use custody_core::error::{CoreError, ErrorCode, Refusal};

pub fn status_of(code: ErrorCode) -> u16 {
    use ErrorCode::*;
    match code {
        MalformedJson => 400,
        AuthenticationFailed | TimestampOutOfWindow | ReplayDetected | PinRequired | InvalidPin
        | OtpRequired | InvalidOtp => 401,
        Forbidden => 403,
        NotFound => 404,
        MethodNotAllowed => 405,
        IdempotencyConflict | IdempotencyInProgress | QuoteExpired | QuoteAlreadyUsed => 409,
        RequestTimeout => 408,
        PayloadTooLarge => 413,
        ValidationFailed
        | UnsupportedAsset
        | InvalidAddress
        | CrossChainNotSupported
        | AmountTooSmall
        | AmountTooLarge
        | UnsupportedPair
        | RecipientNotFound => 422,
        RateLimited => 429,
        InternalError => 500,
        ChainUnavailable | Maintenance | KillSwitchActive => 503,
        // Same code, two statuses (decisions §7): 409 on withdrawals and swaps, 422 on internal
        // transfers. The handler decides; see `insufficient_balance_status`.
        InsufficientBalance => 409,
    }
}

/// Where `INSUFFICIENT_BALANCE` is a validation failure (internal transfers) it is a 422.
pub fn status_for(refusal: &Refusal, insufficient_balance_status: u16) -> u16 {
    if refusal.code == ErrorCode::InsufficientBalance {
        insufficient_balance_status
    } else {
        status_of(refusal.code)
    }
}

/// Turns any core error into a refusal safe to show. Port and invariant failures are logged
/// by the caller with their detail and become a bare `INTERNAL_ERROR`; a transient store
/// failure (busy, I/O, a full disk) says the request may be retried, and when (`Retry-After`).
pub fn sanitize(err: &CoreError) -> Refusal {
    match err {
        CoreError::Refused(r) => r.clone(),
        CoreError::Port(p)
            if p.port == "store" && p.retry == custody_core::error::Retry::Transient =>
        {
            Refusal::new(
                ErrorCode::InternalError,
                "the service could not complete the request; retry later",
            )
            .retry_after(1)
        }
        CoreError::Port(_) | CoreError::Invariant(_) => Refusal::new(
            ErrorCode::InternalError,
            "the service could not complete the request",
        ),
    }
}
