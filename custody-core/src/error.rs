//! Errors of the core. `Refusal` is a business answer with a stable contract code (decisions §7);
//! `StoreError` is a failure of a port. The HTTP layer maps both in one exhaustive match.

use std::fmt;

use serde::Serialize;

/// Every error code of the contract (decisions §7). Stored values are the `as_str` strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    MalformedJson,
    AuthenticationFailed,
    TimestampOutOfWindow,
    ReplayDetected,
    PinRequired,
    InvalidPin,
    OtpRequired,
    InvalidOtp,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    IdempotencyConflict,
    IdempotencyInProgress,
    InsufficientBalance,
    QuoteExpired,
    QuoteAlreadyUsed,
    PayloadTooLarge,
    /// The request body did not arrive in time (not in decisions §7, which has no code for it;
    /// documented in the OpenAPI document and docs/operations.md).
    RequestTimeout,
    ValidationFailed,
    UnsupportedAsset,
    InvalidAddress,
    CrossChainNotSupported,
    AmountTooSmall,
    AmountTooLarge,
    UnsupportedPair,
    RecipientNotFound,
    RateLimited,
    InternalError,
    ChainUnavailable,
    Maintenance,
    KillSwitchActive,
}

impl ErrorCode {
    pub const fn as_str(self) -> &'static str {
        use ErrorCode::*;
        match self {
            MalformedJson => "MALFORMED_JSON",
            AuthenticationFailed => "AUTHENTICATION_FAILED",
            TimestampOutOfWindow => "TIMESTAMP_OUT_OF_WINDOW",
            ReplayDetected => "REPLAY_DETECTED",
            PinRequired => "PIN_REQUIRED",
            InvalidPin => "INVALID_PIN",
            OtpRequired => "OTP_REQUIRED",
            InvalidOtp => "INVALID_OTP",
            Forbidden => "FORBIDDEN",
            NotFound => "NOT_FOUND",
            MethodNotAllowed => "METHOD_NOT_ALLOWED",
            IdempotencyConflict => "IDEMPOTENCY_CONFLICT",
            IdempotencyInProgress => "IDEMPOTENCY_IN_PROGRESS",
            InsufficientBalance => "INSUFFICIENT_BALANCE",
            QuoteExpired => "QUOTE_EXPIRED",
            QuoteAlreadyUsed => "QUOTE_ALREADY_USED",
            PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            RequestTimeout => "REQUEST_TIMEOUT",
            ValidationFailed => "VALIDATION_FAILED",
            UnsupportedAsset => "UNSUPPORTED_ASSET",
            InvalidAddress => "INVALID_ADDRESS",
            CrossChainNotSupported => "CROSS_CHAIN_NOT_SUPPORTED",
            AmountTooSmall => "AMOUNT_TOO_SMALL",
            AmountTooLarge => "AMOUNT_TOO_LARGE",
            UnsupportedPair => "UNSUPPORTED_PAIR",
            RecipientNotFound => "RECIPIENT_NOT_FOUND",
            RateLimited => "RATE_LIMITED",
            InternalError => "INTERNAL_ERROR",
            ChainUnavailable => "CHAIN_UNAVAILABLE",
            Maintenance => "MAINTENANCE",
            KillSwitchActive => "KILL_SWITCH_ACTIVE",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One problem with one input field, for `details` of a validation error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldIssue {
    pub field: String,
    pub issue: String,
}

/// A business answer that is not a success: the contract code, a message safe to show the
/// partner, and optional field details. Never carries secrets or internal text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: ErrorCode,
    pub message: String,
    pub details: Vec<FieldIssue>,
    /// Seconds after which a retry may succeed, where that is known.
    pub retry_after_s: Option<u64>,
}

impl Refusal {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Refusal {
            code,
            message: message.into(),
            details: Vec::new(),
            retry_after_s: None,
        }
    }

    pub fn validation(field: impl Into<String>, issue: impl Into<String>) -> Self {
        Refusal::new(ErrorCode::ValidationFailed, "the request is not valid")
            .with_detail(field, issue)
    }

    pub fn not_found(what: &str) -> Self {
        Refusal::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    pub fn with_detail(mut self, field: impl Into<String>, issue: impl Into<String>) -> Self {
        self.details.push(FieldIssue {
            field: field.into(),
            issue: issue.into(),
        });
        self
    }

    pub fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Whether retrying the same operation later may succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    Transient,
    Permanent,
}

/// A failure of a port (store, chain, signer...). `message` is for operators' logs only and is
/// never sent to a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{port} error ({retry:?}): {message}")]
pub struct PortError {
    pub port: &'static str,
    pub retry: Retry,
    pub message: String,
}

impl PortError {
    pub fn transient(port: &'static str, message: impl Into<String>) -> Self {
        PortError {
            port,
            retry: Retry::Transient,
            message: message.into(),
        }
    }
    pub fn permanent(port: &'static str, message: impl Into<String>) -> Self {
        PortError {
            port,
            retry: Retry::Permanent,
            message: message.into(),
        }
    }
}

/// Everything a core operation can end with other than success.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// A business refusal with its contract code.
    #[error("{0}")]
    Refused(Refusal),
    /// A port failed; the operation did not happen (the store rolled back).
    #[error(transparent)]
    Port(#[from] PortError),
    /// A ledger or state invariant would break. The caller must stop moving money.
    #[error("invariant violated: {0}")]
    Invariant(String),
}

impl From<Refusal> for CoreError {
    fn from(r: Refusal) -> Self {
        CoreError::Refused(r)
    }
}

impl CoreError {
    pub fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        CoreError::Refused(Refusal::new(code, message))
    }
}

pub type CoreResult<T> = Result<T, CoreError>;
