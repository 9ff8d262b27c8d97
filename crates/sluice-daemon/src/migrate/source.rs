//! The source's side of a move: `export`, `pause`, `commit` (see the
//! module above).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use sluice_dataplane::{port_can_move, StateFailure};
use sluice_spec::Spec;

use super::bundle::Bundle;
use super::{kind_of, no_move, operator_only, Finished, Handover, MigrateRequest, Outgoing};
use crate::control::State as Ctl;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{parse_body, AppState};
use crate::tenancy::Caller;

/// The moving objects as an addition: the spec's lists without its
/// settings (the destination keeps its own).
fn addition_text(moved: &Spec) -> String {
    let mut v = moved.to_json();
    if let Some(m) = v.as_object_mut() {
        m.remove("version");
        m.remove("settings");
    }
    v.to_string()
}

pub(super) fn take_outgoing(s: &mut Ctl, nf: &str) -> Result<Outgoing, ApiError> {
    match s.outgoing.take() {
        Some(o) if o.nf == nf => Ok(o),
        other => {
            s.outgoing = other;
            Err(no_move(nf))
        }
    }
}

#[utoipa::path(post, path = "/v1/migrations/export", tag = "migrations",
    request_body = MigrateRequest,
    responses((status = 200, description = "The handover for the destination (traffic still flows here)", body = Handover),
              (status = 400, description = "Malformed request", body = ErrorBody),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 404, description = "No such NF", body = ErrorBody),
              (status = 409, description = "A move is in progress already", body = ErrorBody),
              (status = 413, description = "Body too large", body = ErrorBody),
              (status = 422, description = "A port of the component cannot move (`cannot_move`: only taps can)", body = ErrorBody),
              (status = 503, description = "A worker did not answer", body = ErrorBody)))]
pub(crate) async fn post_export(
    State(app): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Handover>, ApiError> {
    let req: MigrateRequest = parse_body(body)?;
    app.control
        .call(move |s| {
            operator_only(&caller)?;
            export(s, req.nf)
        })
        .await?
        .map(Json)
}

fn export(s: &mut Ctl, nf: String) -> Result<Handover, ApiError> {
    let no_nf = || ApiError::not_found(format!("no NF named {nf}"));
    let spec = s.desired.as_deref().ok_or_else(no_nf)?;
    let part = spec.component_of(&nf).ok_or_else(no_nf)?;
    if let Some(o) = &s.outgoing {
        return Err(ApiError::conflict(format!(
            "{} is moving already: commit or abort that move first",
            o.nf
        )));
    }
    for p in &part.ports {
        let kind = kind_of(spec, p).expect("a component's ports are the spec's");
        if !port_can_move(kind) {
            return Err(ApiError::unprocessable(
                "cannot_move",
                format!(
                    "port {p} ({}) moves with {nf} but cannot: only tap ports hand their \
                     interface over to another daemon",
                    kind.kind_name()
                ),
            ));
        }
    }
    let (moved, _) = spec.split_off(&part);
    // Asking running ports to run yields their descriptors.
    let fds =
        s.rt.pause_ports(&part.ports, false)
            .map_err(ApiError::unavailable)?
            .fds;
    let h = Handover {
        nf: nf.clone(),
        pid: std::process::id(),
        ports: part.ports.clone(),
        nfs: part.nfs.clone(),
        chains: part.chains.clone(),
        fds,
        spec: addition_text(&moved),
    };
    tracing::info!("{nf} is moving out: ports {:?}", part.ports);
    s.outgoing = Some(Outgoing { nf, part });
    Ok(h)
}

#[utoipa::path(post, path = "/v1/migrations/pause", tag = "migrations",
    request_body = MigrateRequest,
    responses((status = 200, description = "The ports are paused, the NFs drained, their states taken: the move's states (`application/octet-stream`, the layout of the daemon's `migrate/bundle.rs`) for the resume", content_type = "application/octet-stream", body = Vec<u8>),
              (status = 400, description = "Malformed request", body = ErrorBody),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "No move of that NF is in progress, or an NF's state cannot be taken now (rolling out, one instance per flow); the ports are read again", body = ErrorBody),
              (status = 413, description = "Body too large", body = ErrorBody),
              (status = 503, description = "The NFs did not let go of their packets, or an instance did not answer; the ports are read again", body = ErrorBody)))]
pub(crate) async fn post_pause(
    State(app): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let req: MigrateRequest = parse_body(body)?;
    let bundle = app
        .control
        .call(move |s| {
            operator_only(&caller)?;
            pause(s, req.nf)
        })
        .await??;
    Ok((
        [(header::CONTENT_TYPE, "application/octet-stream")],
        bundle.encode(),
    )
        .into_response())
}

fn pause(s: &mut Ctl, nf: String) -> Result<Bundle, ApiError> {
    let part = match &s.outgoing {
        Some(o) if o.nf == nf => o.part.clone(),
        _ => return Err(no_move(&nf)),
    };
    let paused =
        s.rt.pause_ports(&part.ports, true)
            .map_err(ApiError::unavailable)?;
    let resume = |s: &mut Ctl| {
        if let Err(e) = s.rt.pause_ports(&part.ports, false) {
            tracing::error!("cannot resume the ports of {nf}: {e}");
        }
    };
    if !paused.drained {
        resume(s);
        return Err(ApiError::unavailable(format!(
            "the NFs connected to {nf} did not let go of their packets in time: nothing moved"
        )));
    }
    let t = std::time::Instant::now();
    let mut states = Vec::new();
    for n in &part.nfs {
        match s.rt.checkpoint(n) {
            Ok(c) => states.push(c),
            Err(StateFailure::Stateless(_)) => {}
            Err(e) => {
                resume(s);
                return Err(crate::checkpoint::api_error(e));
            }
        }
    }
    tracing::info!("{nf} paused to move: {} state(s) taken", states.len());
    Ok(Bundle {
        drain_us: paused.drain_us,
        taken_us: t.elapsed().as_micros() as u64,
        states,
    })
}

#[utoipa::path(post, path = "/v1/migrations/commit", tag = "migrations",
    request_body = MigrateRequest,
    responses((status = 200, description = "The moved objects are gone from this daemon", body = Finished),
              (status = 400, description = "Malformed request", body = ErrorBody),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "No move of that NF is in progress", body = ErrorBody),
              (status = 413, description = "Body too large", body = ErrorBody),
              (status = 422, description = "The rest of the desired state cannot be applied; the move stays in progress", body = ErrorBody)))]
pub(crate) async fn post_commit(
    State(app): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Finished>, ApiError> {
    let req: MigrateRequest = parse_body(body)?;
    app.control
        .call(move |s| {
            operator_only(&caller)?;
            let o = take_outgoing(s, &req.nf)?;
            let (_, rest) = s
                .desired
                .as_ref()
                .expect("a move starts from a desired state")
                .split_off(&o.part);
            let done = if rest.chains.is_empty() {
                if !rest.nfs.is_empty() || !rest.ports.is_empty() {
                    tracing::warn!(
                        "no chain is left after {} moved: the NFs and ports on no chain stop too",
                        o.nf
                    );
                }
                s.clear().map(|c| c.version)
            } else {
                s.change(rest, None, false).map(|c| c.version)
            };
            match done {
                Ok(v) => {
                    tracing::info!("{} moved out", o.nf);
                    Ok(Finished {
                        resource_version: v,
                    })
                }
                Err(e) => {
                    s.outgoing = Some(o);
                    Err(e)
                }
            }
        })
        .await?
        .map(Json)
}
