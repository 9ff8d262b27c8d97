//! The TCP listener's bearer tokens: the operator's, and one per tenant.
//! Every request must carry one, as `Authorization: Bearer <token>` or,
//! for the dashboard in a browser, as the `sluice_token` cookie, which
//! `/?token=<token>` sets (then redirects to `/`, so the token leaves the
//! address bar). The token says who calls ([`Caller`], a request
//! extension the handlers read); the UNIX socket's callers are the
//! operator ([`as_operator`]).

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;

use crate::error::ApiError;
use crate::tenancy::Caller;

/// The tokens a TCP listener accepts.
#[derive(Debug, Clone)]
pub struct Tokens {
    /// The operator's (`--token-file`).
    pub operator: String,
    /// `(tenant, token)` (`--tenant NAME=FILE`).
    pub tenants: Vec<(String, String)>,
}

impl Tokens {
    /// Who `presented` is, if anyone. Every token is compared, each in time
    /// independent of where it differs, so the answer's timing does not
    /// say which token came close.
    fn caller(&self, presented: &str) -> Option<Caller> {
        let mut found = None;
        if same(presented.as_bytes(), self.operator.as_bytes()) {
            found = Some(Caller::Operator);
        }
        for (tenant, token) in &self.tenants {
            if same(presented.as_bytes(), token.as_bytes()) && found.is_none() {
                found = Some(Caller::Tenant(tenant.clone()));
            }
        }
        found
    }
}

/// Wraps `router` so every request needs one of `tokens`.
pub fn require_token(router: Router, tokens: Tokens) -> Router {
    let tokens = Arc::new(tokens);
    router.layer(axum::middleware::from_fn(
        move |req: Request, next: Next| {
            let tokens = tokens.clone();
            async move { check(&tokens, req, next).await }
        },
    ))
}

/// Wraps `router` so every request is the operator's (the UNIX socket:
/// its file mode decides who connects).
pub fn as_operator(router: Router) -> Router {
    router.layer(axum::middleware::from_fn(
        |mut req: Request, next: Next| async move {
            req.extensions_mut().insert(Caller::Operator);
            next.run(req).await
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

async fn check(tokens: &Tokens, mut req: Request, next: Next) -> Response {
    if let Some(caller) = presented(&req).and_then(|t| tokens.caller(&t)) {
        req.extensions_mut().insert(caller);
        return next.run(req).await;
    }
    // The dashboard's way in: `/?token=...` sets the cookie.
    if req.uri().path() == "/" {
        let q = req.uri().query().unwrap_or("");
        let given = url_param(q, "token");
        if let Some(token) = given.filter(|t| tokens.caller(t).is_some()) {
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
    fn a_token_names_its_caller() {
        let t = Tokens {
            operator: "op-token".into(),
            tenants: vec![
                ("a".into(), "a-token".into()),
                ("b".into(), "b-token".into()),
            ],
        };
        assert_eq!(t.caller("op-token"), Some(Caller::Operator));
        assert_eq!(t.caller("a-token"), Some(Caller::Tenant("a".into())));
        assert_eq!(t.caller("b-token"), Some(Caller::Tenant("b".into())));
        assert_eq!(t.caller("b-toke"), None);
        assert_eq!(t.caller(""), None);
    }

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
