//! What handlers take from a request: the shared state, a strictly
//! parsed JSON body or query, a path name. Apart from the routes so that
//! every route module (`api`, `capture`, `metrics`) can use it without
//! importing another.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequestParts, Path};
use serde::de::DeserializeOwned;

use crate::control::Control;
use crate::error::ApiError;
use crate::tenancy::Caller;

/// Largest request body (a spec is at most 16 MiB as a file; its JSON
/// string escaping may grow it).
pub const BODY_LIMIT: usize = 32 << 20;

/// What every handler reaches.
#[derive(Clone)]
pub struct AppState {
    /// The control thread.
    pub control: Control,
}

/// A body's bytes: a body above [`BODY_LIMIT`] is a `413`, one that
/// could not be read a `400`.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    let body = body.map_err(|e| match e {
        BytesRejection::FailedToBufferBody(_) => ApiError::too_large(BODY_LIMIT),
        other => ApiError::bad_request(other.body_text(), None),
    })?;
    if body.len() > BODY_LIMIT {
        return Err(ApiError::too_large(BODY_LIMIT));
    }
    Ok(body)
}

/// Parses a JSON body; errors name the field (`spec`, `dry_run`, ...).
pub fn parse_body<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let body = body_bytes(body)?;
    let de = &mut serde_json::Deserializer::from_slice(&body);
    let value = serde_path_to_error::deserialize(&mut *de).map_err(|e| {
        let field = e.path().to_string();
        ApiError::bad_request(format!("invalid request body: {}", e.inner()), Some(field))
    })?;
    // One JSON document: `{...}}` or `{...} {...}` is not a body.
    de.end()
        .map_err(|e| ApiError::bad_request(format!("invalid request body: {e}"), None))?;
    Ok(value)
}

/// The `{name}` of a path, or a JSON 400 naming it (a name that is not
/// UTF-8 once percent-decoded), where axum's own extractor answers in
/// plain text.
pub struct Name(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Name {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(n)| Name(n))
            .map_err(|e| ApiError::bad_request(e.body_text(), Some("name".into())))
    }
}

/// Who sent the request. Every listener's layer sets it (`auth`); a
/// request without it is refused rather than taken for the operator's.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(ApiError::unauthorized)
    }
}

/// Parses a query string strictly.
pub fn parse_query<T: DeserializeOwned>(q: Option<String>) -> Result<T, ApiError> {
    serde_urlencoded::from_str(q.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}"), None))
}
