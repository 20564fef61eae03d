//! The typed error every API operation returns, and its HTTP status.
//!
//! Owns the mapping from "what went wrong" to a status code and a message that names the field
//! and the limit. Must never carry memory content or request text in its message (errors are
//! logged).

use crate::store::StoreError;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    /// 400: the request is malformed or a value is out of range.
    pub fn bad(field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: naming(field, message.into()),
            field: Some(field.to_string()),
        }
    }

    /// 400 without a single field to blame.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            field: None,
        }
    }

    /// 422: well-formed but semantically refused (e.g. content too long).
    pub fn unprocessable(field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 422,
            message: naming(field, message.into()),
            field: Some(field.to_string()),
        }
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 404,
            message: message.into(),
            field: None,
        }
    }

    pub fn too_large(limit: usize) -> ApiError {
        ApiError {
            status: 413,
            message: format!("request body larger than the {limit} byte limit"),
            field: None,
        }
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 503,
            message: message.into(),
            field: None,
        }
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 500,
            message: message.into(),
            field: None,
        }
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
        let status = if e.is_storage_full() {
            507
        } else if e.is_read_only() {
            503
        } else {
            500
        };
        ApiError {
            status,
            message: format!("storage: {e}"),
            field: None,
        }
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
