//! The typed error every engine operation returns.
//!
//! Owns the kinds of failure (bad input naming its field, refused, not found, too large,
//! conflict, unavailable, storage full, internal) and messages that name the field and the
//! limit. Must never carry memory content or request text in its message (errors are logged),
//! and never decide an HTTP status: memd-server maps kinds to codes (`body::status_of`).

use crate::store::StoreError;
use std::fmt;

/// What went wrong, as a caller can act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The request is malformed or a value is out of range.
    BadInput,
    /// Well-formed but refused (e.g. a text over its length limit): nothing was stored.
    Refused,
    NotFound,
    /// A body over its byte limit.
    TooLarge,
    /// The request contradicts the current state.
    Conflict,
    /// The engine cannot serve it now (e.g. writes after the data dir vanished).
    Unavailable,
    /// The disk is full.
    StorageFull,
    Internal,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> ApiError {
        ApiError {
            kind,
            message: message.into(),
            field: None,
        }
    }

    /// Bad input in `field` (the message names it).
    pub fn bad(field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            kind: ErrorKind::BadInput,
            message: naming(field, message.into()),
            field: Some(field.to_string()),
        }
    }

    /// Bad input without a single field to blame.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::BadInput, message)
    }

    /// Well-formed but semantically refused (e.g. content too long).
    pub fn unprocessable(field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            kind: ErrorKind::Refused,
            message: naming(field, message.into()),
            field: Some(field.to_string()),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::NotFound, message)
    }

    pub fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            ErrorKind::TooLarge,
            format!("request body larger than the {limit} byte limit"),
        )
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Conflict, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorKind::Internal, message)
    }

    pub fn body(&self) -> proto::ErrorBody {
        proto::ErrorBody {
            error: self.message.clone(),
            field: self.field.clone(),
        }
    }
}

/// Every field error names its field, so a client (or a model) knows what to fix.
fn naming(field: &str, message: String) -> String {
    if message.contains(field) {
        message
    } else {
        format!("{field}: {message}")
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{} ({field})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ApiError {}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        let kind = if e.is_storage_full() {
            ErrorKind::StorageFull
        } else if e.is_read_only() {
            ErrorKind::Unavailable
        } else {
            ErrorKind::Internal
        };
        ApiError::new(kind, format!("storage: {e}"))
    }
}

/// Checks a text field's length in characters.
pub fn check_len(field: &str, text: &str, max: usize) -> Result<(), ApiError> {
    let n = text.chars().count();
    if n > max {
        return Err(ApiError::unprocessable(
            field,
            format!(
                "{field} is {n} characters; the limit is {max}. Shorten it (nothing was stored)"
            ),
        ));
    }
    Ok(())
}

/// Checks a number is within an inclusive range.
pub fn check_range_f64(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ApiError> {
    if !v.is_finite() || v < lo || v > hi {
        return Err(ApiError::bad(
            field,
            format!("{field} must be between {lo} and {hi} (got {v})"),
        ));
    }
    Ok(())
}
