//! `GET /`: a web dashboard, one page and one script with no build step
//! and no dependency, served from the binary. It draws every chain as a
//! graph (input port → NFs → output port) and refreshes each node's rate
//! and drops once a second from `/v1/chains` and `/v1/stats`.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("index.html");
const APP: &str = include_str!("app.js");

pub fn routes() -> Router {
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app))
}

async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        INDEX,
    )
}

async fn app() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        APP,
    )
}
