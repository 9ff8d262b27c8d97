//! The destination's side of a move: `import`, then `resume` (see the
//! module above).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use sluice_dataplane::{offer_port, withdraw_port};
use sluice_spec::PortKind;
use utoipa::ToSchema;

use super::bundle::Bundle;
use super::{kind_of, no_move, operator_only, roll_back, Handover, Incoming};
use crate::control::State as Ctl;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{body_bytes, parse_body, parse_query, AppState};
use crate::tenancy::Caller;

/// The answer to an import.
#[derive(Debug, Serialize, ToSchema)]
pub struct Imported {
    /// The desired state version now.
    pub resource_version: u64,
    /// Taking the descriptors and adding the objects (ports paused), µs.
    pub add_us: u64,
}

/// The answer to a resume.
#[derive(Debug, Serialize, ToSchema)]
pub struct Resumed {
    /// At the source: how long the packets already read took to leave
    /// the NFs, µs.
    pub drain_us: u64,
    /// At the source: how long the checkpoints took, µs.
    pub checkpoint_us: u64,
    /// Restoring the states, µs.
    pub restore_us: u64,
    /// From the request's body read to the ports read, µs.
    pub took_us: u64,
}

#[utoipa::path(post, path = "/v1/migrations/import", tag = "migrations",
    request_body = Handover,
    responses((status = 200, description = "The objects run here on the source's taps, their ports paused until the resume", body = Imported),
              (status = 400, description = "Malformed request", body = ErrorBody),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "A name is taken here (`already_exists`), or a move in is in progress", body = ErrorBody),
              (status = 413, description = "Body too large", body = ErrorBody),
              (status = 422, description = "The objects are invalid here, or their descriptors cannot be taken (`handover_failed`); nothing changed", body = ErrorBody)))]
pub(crate) async fn post_import(
    State(app): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Imported>, ApiError> {
    let h: Handover = parse_body(body)?;
    app.control
        .call(move |s| {
            operator_only(&caller)?;
            import(s, h)
        })
        .await?
        .map(Json)
}

fn import(s: &mut Ctl, h: Handover) -> Result<Imported, ApiError> {
    let t0 = std::time::Instant::now();
    if let Some(i) = &s.incoming {
        return Err(ApiError::conflict(format!(
            "{} is moving in already: resume or abort that move first",
            i.nf
        )));
    }
    let addition = sluice_spec::parse_additions(&h.spec, "<migration>")
        .map_err(|e| ApiError::invalid_spec(&e))?;
    let types: Vec<&str> = s.registry.iter().map(|t| t.name).collect();
    let spec = sluice_spec::add(s.desired.as_deref(), addition, &types)
        .map_err(crate::additions::refused)?;
    let pid = sluice_sys::Pid::from_raw(h.pid as i32)
        .ok_or_else(|| ApiError::bad_request(format!("{} is no process id", h.pid), None))?;
    let mut offered: Vec<PortKind> = Vec::new();
    let withdraw = |offered: &[PortKind]| offered.iter().for_each(withdraw_port);
    for p in &h.ports {
        let offer = kind_of(&spec, p)
            .ok_or_else(|| {
                ApiError::bad_request(format!("port {p} is not among the objects moved"), None)
            })
            .and_then(|kind| {
                let fds = h.fds.get(p).map(Vec::as_slice).unwrap_or_default();
                let taken = sluice_sys::take_fds(pid, fds).map_err(|e| {
                    ApiError::unprocessable(
                        "handover_failed",
                        format!(
                            "cannot take port {p}'s descriptors from process {}: {e} (the \
                             destination daemon needs root or CAP_SYS_PTRACE)",
                            h.pid
                        ),
                    )
                })?;
                offer_port(kind, taken)
                    .map_err(|e| ApiError::unprocessable("handover_failed", e))?;
                Ok(kind.clone())
            });
        match offer {
            Ok(kind) => offered.push(kind),
            Err(e) => {
                withdraw(&offered);
                return Err(e);
            }
        }
    }
    let before = s.desired.as_deref().cloned();
    let added = s.change(spec, None, false);
    // Every offer was taken by its port, or the change failed: none may
    // wait for a later port of the same interface.
    withdraw(&offered);
    added?;
    tracing::info!(
        "{} is moving in from process {}: ports {:?} open, paused",
        h.nf,
        h.pid,
        h.ports
    );
    s.incoming = Some(Incoming {
        nf: h.nf,
        ports: h.ports,
        before,
    });
    Ok(Imported {
        resource_version: s.version,
        add_us: t0.elapsed().as_micros() as u64,
    })
}

/// `POST /v1/migrations/resume`'s query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumeQuery {
    nf: String,
}

#[utoipa::path(post, path = "/v1/migrations/resume", tag = "migrations",
    params(("nf" = String, Query, description = "The NF that moves", example = "fw")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "The pause's answer, as it came"),
    responses((status = 200, description = "The states are restored and the ports read", body = Resumed),
              (status = 400, description = "Malformed request, or not the states of a move; the move stays in progress", body = ErrorBody),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "No move of that NF in is in progress", body = ErrorBody),
              (status = 413, description = "Larger than the API's body limit", body = ErrorBody),
              (status = 422, description = "A state is refused; the import is undone", body = ErrorBody),
              (status = 503, description = "An instance did not answer; the import is undone", body = ErrorBody)))]
pub(crate) async fn post_resume(
    State(app): State<AppState>,
    caller: Caller,
    RawQuery(q): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Resumed>, ApiError> {
    let q: ResumeQuery = parse_query(q)?;
    let body = body_bytes(body)?;
    let t0 = std::time::Instant::now();
    let bundle = Bundle::decode(&body).map_err(|e| ApiError::bad_request(e, None))?;
    app.control
        .call(move |s| {
            operator_only(&caller)?;
            resume(s, &q.nf, bundle, t0)
        })
        .await?
        .map(Json)
}

fn resume(
    s: &mut Ctl,
    nf: &str,
    bundle: Bundle,
    t0: std::time::Instant,
) -> Result<Resumed, ApiError> {
    if s.incoming.as_ref().is_none_or(|i| i.nf != nf) {
        return Err(no_move(nf));
    }
    let inc = s.incoming.take().expect("checked above");
    let t1 = std::time::Instant::now();
    let restored = bundle.states.iter().try_for_each(|c| {
        s.rt.restore(&c.nf, c).map_err(|e| {
            let mut a = crate::checkpoint::api_error(e);
            a.body.error.message = format!("{}: {}", c.nf, a.body.error.message);
            a
        })
    });
    let restore_us = t1.elapsed().as_micros() as u64;
    let resumed = restored.and_then(|()| {
        s.rt.pause_ports(&inc.ports, false)
            .map_err(ApiError::unavailable)
    });
    if let Err(e) = resumed {
        roll_back(s, inc);
        return Err(e);
    }
    tracing::info!("{} moved in: ports {:?} read", inc.nf, inc.ports);
    Ok(Resumed {
        drain_us: bundle.drain_us,
        checkpoint_us: bundle.taken_us,
        restore_us,
        took_us: t0.elapsed().as_micros() as u64,
    })
}
