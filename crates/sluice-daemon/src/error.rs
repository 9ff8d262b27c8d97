//! API errors: every failure is a status code and a JSON body naming what
//! was wrong (and where, for a spec), never a panic or a bare 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sluice_spec::SpecError;
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code: `bad_request`, `invalid_spec`, `in_use`,
    /// `last_chain`, `conflict`, `not_found`, `method_not_allowed`, `unauthorized`,
    /// `forbidden`, `too_large`, `setup_failed`, `unavailable`.
    pub code: String,
    /// A sentence for people.
    pub message: String,
    /// The field at fault: a JSON path in the request body, or a path in
    /// the spec (`nfs[1].config.rules[0].src`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// Line in the spec text (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// Column in the spec text (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<usize>,
}

/// An error with its status.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Body.
    pub body: ErrorBody,
}

impl ApiError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            body: ErrorBody {
                error: ErrorDetail {
                    code: code.into(),
                    message: message.into(),
                    field: None,
                    line: None,
                    column: None,
                },
            },
        }
    }

    /// 400: the request body is malformed; `field` is where.
    pub fn bad_request(message: impl Into<String>, field: Option<String>) -> ApiError {
        let mut e = Self::new(StatusCode::BAD_REQUEST, "bad_request", message);
        e.body.error.field = field.filter(|f| !f.is_empty() && f != ".");
        e
    }

    /// 422: the spec is invalid (file, line, field, message).
    pub fn invalid_spec(e: &SpecError) -> ApiError {
        let mut a = Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_spec",
            e.to_string(),
        );
        a.body.error.field = (!e.field.is_empty()).then(|| e.field.clone());
        a.body.error.line = (e.line > 0).then_some(e.line);
        a.body.error.column = (e.column > 0).then_some(e.column);
        a
    }

    /// 422 with another code (`setup_failed`: a port or NF could not
    /// start; nothing changed).
    pub fn unprocessable(code: &str, message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// 409: another change came first.
    pub fn conflict(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 409: the name of an object to add is taken.
    pub fn already_exists(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::CONFLICT, "already_exists", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 401.
    pub fn unauthorized() -> ApiError {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this listener needs `Authorization: Bearer <token>` (the daemon's --token-file)",
        )
    }

    /// 403: a tenant's token asked for something that is not its own.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// 405.
    pub fn method_not_allowed() -> ApiError {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this path does not take that method",
        )
    }

    /// 413.
    pub fn too_large(limit: usize) -> ApiError {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("the request body exceeds {limit} bytes"),
        )
    }

    /// 503.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.body.error.message)
    }
}
