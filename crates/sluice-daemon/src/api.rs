//! The `/v1` REST API: routes and handlers. Every handler parses its
//! input strictly (unknown fields, wrong types and oversized bodies are a
//! `4xx` naming the field), then runs on the control thread.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::Value;
use sluice_dataplane::report::RunReport;
use sluice_dataplane::worker::Instance;
use sluice_dataplane::CpuRead;
use utoipa::OpenApi;

use crate::control::State as Ctl;
use crate::error::{ApiError, ErrorBody};
pub use crate::extract::{parse_body, parse_query, AppState, Name, BODY_LIMIT};
use crate::nf_view::nf_views;
use crate::tenancy::Caller;
use crate::types::*;

/// The API routes (no authentication: the caller adds it per listener).
pub fn routes(state: AppState) -> Router {
    Router::new()
        .route("/v1/version", get(version))
        .route("/v1/spec", get(get_spec).put(put_spec).delete(delete_spec))
        .route(
            "/v1/spec/additions",
            axum::routing::post(crate::additions::post_additions),
        )
        .route("/v1/ports", get(list_ports))
        .route("/v1/ports/{name}", get(get_port).delete(delete_port))
        .route("/v1/nfs", get(list_nfs))
        .route("/v1/nfs/{name}", get(get_nf).delete(delete_nf))
        .route("/v1/nfs/{name}/logs", get(nf_logs))
        .route(
            "/v1/nfs/{name}/rollout",
            axum::routing::post(crate::rollout::post_rollout),
        )
        .route(
            "/v1/nfs/{name}/checkpoint",
            get(crate::checkpoint::get_checkpoint),
        )
        .route(
            "/v1/nfs/{name}/restore",
            axum::routing::post(crate::checkpoint::post_restore),
        )
        .route(
            "/v1/migrations/export",
            axum::routing::post(crate::migrate::source::post_export),
        )
        .route(
            "/v1/migrations/import",
            axum::routing::post(crate::migrate::destination::post_import),
        )
        .route(
            "/v1/migrations/pause",
            axum::routing::post(crate::migrate::source::post_pause),
        )
        .route(
            "/v1/migrations/resume",
            axum::routing::post(crate::migrate::destination::post_resume),
        )
        .route(
            "/v1/migrations/commit",
            axum::routing::post(crate::migrate::source::post_commit),
        )
        .route(
            "/v1/migrations/abort",
            axum::routing::post(crate::migrate::post_abort),
        )
        .route("/v1/chains", get(list_chains))
        .route("/v1/chains/{name}", get(get_chain).delete(delete_chain))
        .route("/v1/instances", get(instances))
        .route("/v1/stats", get(stats))
        .route("/v1/openapi.json", get(openapi))
        .with_state(state)
}

#[utoipa::path(get, path = "/v1/version", tag = "daemon",
    responses((status = 200, description = "Versions", body = VersionInfo)))]
async fn version() -> Json<VersionInfo> {
    Json(VersionInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        api: "v1".to_string(),
    })
}

#[utoipa::path(get, path = "/v1/spec", tag = "spec",
    responses((status = 200, description = "The desired state", body = SpecDocument)))]
async fn get_spec(State(app): State<AppState>) -> Result<Json<SpecDocument>, ApiError> {
    app.control
        .call(|s| SpecDocument {
            resource_version: s.version,
            spec: s.desired.as_deref().map_or(Value::Null, |d| d.to_json()),
        })
        .await
        .map(Json)
}

#[utoipa::path(put, path = "/v1/spec", tag = "spec", request_body = ApplyRequest,
    responses(
        (status = 200, description = "Applied (or, dry run, what would change)", body = ApplyResponse),
        (status = 400, description = "Malformed request", body = ErrorBody),
        (status = 403, description = "A tenant's token, and an object that is not the tenant's (nothing changed)", body = ErrorBody),
        (status = 409, description = "Another change came first", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 422, description = "Invalid spec, or a part of it could not start (nothing changed)", body = ErrorBody)))]
async fn put_spec(
    State(app): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ApplyResponse>, ApiError> {
    let req: ApplyRequest = parse_body(body)?;
    app.control
        .call(move |s| {
            let source = req.source.as_deref().unwrap_or("<api>");
            let mut spec = s
                .parse(&req.spec, source)
                .map_err(|e| ApiError::invalid_spec(&e))?;
            s.carry_versions(&mut spec);
            caller.may_change(s.desired.as_deref(), &spec)?;
            let c = s.change(spec, req.resource_version, req.dry_run)?;
            Ok(ApplyResponse::new(c.version, req.dry_run, c.applied))
        })
        .await?
        .map(Json)
}

/// The views of every port, or only of the one named `only`.
fn port_views(s: &Ctl, report: &RunReport, only: Option<&str>) -> Vec<PortView> {
    s.desired_entries("ports", only)
        .into_iter()
        .map(|d| {
            let name = d["name"].as_str().unwrap_or_default().to_string();
            PortView {
                kind: d["kind"].as_str().unwrap_or_default().to_string(),
                stats: report
                    .ports
                    .iter()
                    .find(|p| p.name == name)
                    .map(|p| p.stats.clone()),
                name,
                definition: d,
            }
        })
        .collect()
}

#[utoipa::path(get, path = "/v1/ports", tag = "ports",
    responses((status = 200, description = "Ports", body = [PortView])))]
async fn list_ports(State(app): State<AppState>) -> Result<Json<Vec<PortView>>, ApiError> {
    app.control
        .call(|s| port_views(s, &s.rt.report_reading(CpuRead::None), None))
        .await
        .map(Json)
}

#[utoipa::path(get, path = "/v1/ports/{name}", tag = "ports",
    params(("name" = String, Path, description = "Port name", example = "gen")),
    responses((status = 200, description = "The port", body = PortView),
              (status = 404, description = "No such port", body = ErrorBody)))]
async fn get_port(
    State(app): State<AppState>,
    Name(name): Name,
) -> Result<Json<PortView>, ApiError> {
    app.control
        .call(move |s| {
            port_views(s, &s.rt.report_reading(CpuRead::None), Some(&name))
                .pop()
                .ok_or_else(|| ApiError::not_found(format!("no port named {name}")))
        })
        .await?
        .map(Json)
}

#[utoipa::path(get, path = "/v1/nfs", tag = "nfs",
    responses((status = 200, description = "NFs", body = [NfView])))]
async fn list_nfs(State(app): State<AppState>) -> Result<Json<Vec<NfView>>, ApiError> {
    app.control
        .call(|s| nf_views(s, &s.rt.report(), &s.rt.instances(), None))
        .await
        .map(Json)
}

#[utoipa::path(get, path = "/v1/nfs/{name}", tag = "nfs",
    params(("name" = String, Path, description = "NF name", example = "acl")),
    responses((status = 200, description = "The NF", body = NfView),
              (status = 404, description = "No such NF", body = ErrorBody)))]
async fn get_nf(State(app): State<AppState>, Name(name): Name) -> Result<Json<NfView>, ApiError> {
    app.control
        .call(move |s| {
            let report = s.rt.report_reading(CpuRead::Nf(&name));
            nf_views(s, &report, &s.rt.instances(), Some(&name))
                .pop()
                .ok_or_else(|| ApiError::not_found(format!("no NF named {name}")))
        })
        .await?
        .map(Json)
}

#[utoipa::path(get, path = "/v1/nfs/{name}/logs", tag = "nfs",
    params(("name" = String, Path, description = "NF name", example = "acl"), LogsQuery),
    responses((status = 200, description = "Its log lines", body = LogsResponse),
              (status = 400, description = "Bad query", body = ErrorBody),
              (status = 403, description = "A tenant's token, and an NF that is not the tenant's", body = ErrorBody),
              (status = 404, description = "No such NF", body = ErrorBody)))]
async fn nf_logs(
    State(app): State<AppState>,
    caller: Caller,
    Name(name): Name,
    RawQuery(q): RawQuery,
) -> Result<Json<LogsResponse>, ApiError> {
    let q: LogsQuery = parse_query(q)?;
    app.control
        .call(move |s| {
            s.desired_entry("nfs", &name)
                .ok_or_else(|| ApiError::not_found(format!("no NF named {name}")))?;
            caller.may_look_into(s.desired.as_deref(), &name)?;
            let after = q.after.unwrap_or(0);
            let lines = s.rt.logs(&name, after);
            let next = lines.last().map_or(after, |l| l.seq);
            Ok(LogsResponse { lines, next })
        })
        .await?
        .map(Json)
}

/// The views of every chain, or only of the one named `only`.
fn chain_views(s: &Ctl, only: Option<&str>) -> Vec<ChainView> {
    let Some(spec) = &s.desired else {
        return Vec::new();
    };
    s.desired_entries("chains", only)
        .into_iter()
        .map(|d| {
            let name = d["name"].as_str().unwrap_or_default().to_string();
            ChainView {
                from: d["from"].as_str().unwrap_or_default().to_string(),
                path: spec
                    .resolve_chain_path(&name)
                    .into_iter()
                    .map(str::to_string)
                    .collect(),
                name,
                definition: d,
            }
        })
        .collect()
}

#[utoipa::path(get, path = "/v1/chains", tag = "chains",
    responses((status = 200, description = "Chains", body = [ChainView])))]
async fn list_chains(State(app): State<AppState>) -> Result<Json<Vec<ChainView>>, ApiError> {
    app.control.call(|s| chain_views(s, None)).await.map(Json)
}

#[utoipa::path(get, path = "/v1/chains/{name}", tag = "chains",
    params(("name" = String, Path, description = "Chain name", example = "main")),
    responses((status = 200, description = "The chain", body = ChainView),
              (status = 404, description = "No such chain", body = ErrorBody)))]
async fn get_chain(
    State(app): State<AppState>,
    Name(name): Name,
) -> Result<Json<ChainView>, ApiError> {
    app.control
        .call(move |s| {
            chain_views(s, Some(&name))
                .pop()
                .ok_or_else(|| ApiError::not_found(format!("no chain named {name}")))
        })
        .await?
        .map(Json)
}

#[utoipa::path(delete, path = "/v1/spec", tag = "spec",
    params(DeleteQuery),
    responses((status = 200, description = "Nothing runs now (already nothing: the version is unchanged)", body = DeleteResponse),
              (status = 400, description = "Bad query", body = ErrorBody),
              (status = 403, description = "A tenant's token: the whole desired state is the operator's", body = ErrorBody),
              (status = 409, description = "Another change came first, or a move to or from another daemon is in progress", body = ErrorBody),
              (status = 422, description = "The data plane could not stop what runs (nothing changed)", body = ErrorBody)))]
async fn delete_spec(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(q): RawQuery,
) -> Result<Json<DeleteResponse>, ApiError> {
    let q: DeleteQuery = parse_query(q)?;
    app.control
        .call(move |s| {
            s.check_version(q.resource_version)?;
            if let Caller::Tenant(t) = &caller {
                return Err(ApiError::forbidden(format!(
                    "tenant \"{t}\" may change only its own NFs and chains: the whole \
                     desired state is the operator's"
                )));
            }
            if s.outgoing.is_some() || s.incoming.is_some() {
                return Err(ApiError::conflict(
                    "a move to or from another daemon is in progress: commit or abort it first \
                     (`sluice migrate --commit` or `--abort`)",
                ));
            }
            if s.desired.is_none() {
                return Ok(DeleteResponse {
                    resource_version: s.version,
                    diff: Default::default(),
                });
            }
            let c = s.clear()?;
            Ok(DeleteResponse {
                resource_version: c.version,
                diff: c.applied.diff,
            })
        })
        .await?
        .map(Json)
}

async fn delete(
    app: AppState,
    caller: Caller,
    (kind, name): (&'static str, String),
    q: Option<String>,
) -> Result<Json<DeleteResponse>, ApiError> {
    let q: DeleteQuery = parse_query(q)?;
    app.control
        .call(move |s| {
            // A stale version is a conflict whatever else is wrong.
            s.check_version(q.resource_version)?;
            caller.may_delete(s.desired.as_deref(), kind, &name)?;
            let spec = s.without(kind, &name)?;
            caller.may_change(s.desired.as_deref(), &spec)?;
            let c = s.change(spec, q.resource_version, false)?;
            Ok(DeleteResponse {
                resource_version: c.version,
                diff: c.applied.diff,
            })
        })
        .await?
        .map(Json)
}

#[utoipa::path(delete, path = "/v1/ports/{name}", tag = "ports",
    params(("name" = String, Path, description = "Port name", example = "gen"), DeleteQuery),
    responses((status = 200, description = "Deleted", body = DeleteResponse),
              (status = 400, description = "Bad query", body = ErrorBody),
              (status = 404, description = "No such port", body = ErrorBody),
              (status = 403, description = "A tenant's token, and an object that is not the tenant's (nothing changed)", body = ErrorBody),
              (status = 409, description = "Another change came first", body = ErrorBody),
              (status = 422, description = "Something still uses it (nothing changed)", body = ErrorBody)))]
async fn delete_port(
    State(app): State<AppState>,
    caller: Caller,
    Name(name): Name,
    RawQuery(q): RawQuery,
) -> Result<Json<DeleteResponse>, ApiError> {
    delete(app, caller, ("port", name), q).await
}

#[utoipa::path(delete, path = "/v1/nfs/{name}", tag = "nfs",
    params(("name" = String, Path, description = "NF name", example = "acl"), DeleteQuery),
    responses((status = 200, description = "Deleted", body = DeleteResponse),
              (status = 400, description = "Bad query", body = ErrorBody),
              (status = 404, description = "No such NF", body = ErrorBody),
              (status = 403, description = "A tenant's token, and an object that is not the tenant's (nothing changed)", body = ErrorBody),
              (status = 409, description = "Another change came first", body = ErrorBody),
              (status = 422, description = "A chain still uses it (nothing changed)", body = ErrorBody)))]
async fn delete_nf(
    State(app): State<AppState>,
    caller: Caller,
    Name(name): Name,
    RawQuery(q): RawQuery,
) -> Result<Json<DeleteResponse>, ApiError> {
    delete(app, caller, ("nf", name), q).await
}

#[utoipa::path(delete, path = "/v1/chains/{name}", tag = "chains",
    params(("name" = String, Path, description = "Chain name", example = "main"), DeleteQuery),
    responses((status = 200, description = "Deleted", body = DeleteResponse),
              (status = 400, description = "Bad query", body = ErrorBody),
              (status = 404, description = "No such chain", body = ErrorBody),
              (status = 403, description = "A tenant's token, and an object that is not the tenant's (nothing changed)", body = ErrorBody),
              (status = 409, description = "Another change came first", body = ErrorBody),
              (status = 422, description = "Something still uses it (nothing changed)", body = ErrorBody)))]
async fn delete_chain(
    State(app): State<AppState>,
    caller: Caller,
    Name(name): Name,
    RawQuery(q): RawQuery,
) -> Result<Json<DeleteResponse>, ApiError> {
    delete(app, caller, ("chain", name), q).await
}

#[utoipa::path(get, path = "/v1/instances", tag = "nfs",
    responses((status = 200, description = "Every NF instance on every worker", body = [Instance])))]
async fn instances(State(app): State<AppState>) -> Result<Json<Vec<Instance>>, ApiError> {
    app.control.call(|s| s.rt.instances()).await.map(Json)
}

#[utoipa::path(get, path = "/v1/stats", tag = "stats",
    responses((status = 200, description = "Counters since start (the keys of `sluice run --json`)", body = RunReport)))]
async fn stats(State(app): State<AppState>) -> Result<Json<RunReport>, ApiError> {
    app.control.call(|s| s.rt.report()).await.map(Json)
}

#[utoipa::path(get, path = "/v1/openapi.json", tag = "daemon",
    responses((status = 200, description = "This API's OpenAPI 3 document")))]
async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// The OpenAPI document, generated from the handlers above.
#[derive(OpenApi)]
#[openapi(
    info(title = "sluice", description = "The sluice daemon's control API (v1)."),
    paths(
        version, get_spec, put_spec, delete_spec, list_ports, get_port, delete_port, list_nfs, get_nf,
        delete_nf, nf_logs, list_chains, get_chain, delete_chain, instances, stats, openapi,
        crate::capture::capture, crate::rollout::post_rollout, crate::checkpoint::get_checkpoint,
        crate::checkpoint::post_restore, crate::additions::post_additions,
        crate::migrate::source::post_export, crate::migrate::destination::post_import, crate::migrate::source::post_pause,
        crate::migrate::destination::post_resume, crate::migrate::source::post_commit, crate::migrate::post_abort
    ),
    tags(
        (name = "daemon", description = "The daemon itself"),
        (name = "spec", description = "The desired state"),
        (name = "ports", description = "Ports"),
        (name = "nfs", description = "Network functions and their instances"),
        (name = "chains", description = "Chains"),
        (name = "stats", description = "Counters"),
        (name = "capture", description = "Live packet capture"),
        (name = "migrations", description = "Moving NFs between daemons")
    )
)]
pub struct ApiDoc;
