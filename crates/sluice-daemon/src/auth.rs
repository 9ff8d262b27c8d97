//! The TCP listener's bearer token. Every request must carry it, as
//! `Authorization: Bearer <token>` or, for the dashboard in a browser, as
//! the `sluice_token` cookie, which `/?token=<token>` sets (then
//! redirects to `/`, so the token leaves the address bar).

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::error::ApiError;

/// Wraps `router` so every request needs `token`.
pub fn require_token(router: Router, token: String) -> Router {
    let token = Arc::new(token);
    router.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let token = token.clone();
            async move { check(&token, req, next).await }
        },
    ))
}

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn presented(req: &Request) -> Option<String> {
    let headers = req.headers();
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        return v.strip_prefix("Bearer ").map(|t| t.trim().to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| c.trim().strip_prefix("sluice_token=").map(str::to_string))
}

async fn check(token: &str, req: Request, next: Next) -> Response {
    if presented(&req).is_some_and(|t| same(t.as_bytes(), token.as_bytes())) {
        return next.run(req).await;
    }
    // The dashboard's way in: `/?token=...` sets the cookie.
    if req.uri().path() == "/" {
        let q = req.uri().query().unwrap_or("");
        let given = url_param(q, "token");
        if given.is_some_and(|t| same(t.as_bytes(), token.as_bytes())) {
            return (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, "/".to_string()),
                    (
                        header::SET_COOKIE,
                        format!("sluice_token={token}; HttpOnly; SameSite=Strict; Path=/"),
                    ),
                ],
            )
                .into_response();
        }
    }
    ApiError::unauthorized().into_response()
}

fn url_param(q: &str, key: &str) -> Option<String> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(q)
        .ok()?
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert_eq!(
            url_param("a=1&token=x%20y", "token").as_deref(),
            Some("x y")
        );
    }
}
