//! Moving an NF, with what is connected to it, to another daemon on the
//! same host while traffic flows (`sluice migrate`).
//!
//! What moves is the NF's component (`Spec::component_of`): its chains,
//! their ports and NFs, and so on until closed. Its ports must be taps:
//! a tap lives while anyone holds a queue descriptor, and frames sent to
//! it wait in its queues while nobody reads. The move, driven by the
//! client, in three calls:
//!
//! 1. `POST /v1/migrations/export` on the source: pause the ports (the
//!    packets already read leave the NFs; new frames wait in the taps),
//!    checkpoint every NF that keeps state, and answer the *handover*:
//!    this process's id, the taps' descriptors, the objects as an
//!    addition, the states.
//! 2. `POST /v1/migrations/import` on the destination, with the handover:
//!    take copies of the descriptors (`pidfd_getfd`), add the objects (the
//!    ports open paused on those copies), restore the states, resume the
//!    ports: the frames that waited are read now, by NFs that hold the
//!    state of every packet before them. All or nothing: on any failure
//!    the destination goes back to what it ran.
//! 3. `POST /v1/migrations/commit` on the source removes the objects (its
//!    copies of the descriptors close; the taps stay, held by the
//!    destination), or `POST /v1/migrations/abort` resumes its ports.
//!
//! Nothing is lost on the way as long as a tap's queue (`txqueuelen`
//! frames) holds what arrives during the move.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use base64::Engine;
use serde::{Deserialize, Serialize};
use sluice_dataplane::{offer_port, port_can_move, withdraw_port, StateFailure};
use sluice_nf::checkpoint::Checkpoint;
use sluice_spec::{Component, PortKind, Spec};
use utoipa::ToSchema;

use crate::control::State as Ctl;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{parse_body, AppState};
use crate::tenancy::Caller;

/// A move out of this daemon, exported and not yet committed or aborted.
#[derive(Debug, Clone)]
pub struct Outgoing {
    nf: String,
    part: Component,
}

/// `POST /v1/migrations/{export,commit,abort}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrateRequest {
    /// The NF to move (its whole component moves with it).
    #[schema(example = "fw")]
    pub nf: String,
}

/// What the destination needs to run the moved objects: the answer to an
/// export and the body of an import.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Handover {
    /// The NF asked for.
    pub nf: String,
    /// The source daemon's process id (the destination takes the
    /// descriptors from it).
    pub pid: u32,
    /// Ports that move.
    pub ports: Vec<String>,
    /// NFs that move.
    pub nfs: Vec<String>,
    /// Chains that move.
    pub chains: Vec<String>,
    /// By port: its descriptors in the source daemon.
    pub fds: BTreeMap<String, Vec<i32>>,
    /// The moving objects as an addition (`POST /v1/spec/additions`'s
    /// `spec`), JSON text.
    pub spec: String,
    /// By NF that keeps state: its checkpoint file, base64.
    pub states: BTreeMap<String, String>,
    /// How long the packets already read took to leave the NFs, µs.
    pub drain_us: u64,
    /// How long the checkpoints took, µs.
    pub checkpoint_us: u64,
}

/// The answer to an import.
#[derive(Debug, Serialize, ToSchema)]
pub struct Imported {
    /// The destination's desired state version now.
    pub resource_version: u64,
    /// Adding the objects (ports open paused), µs.
    pub add_us: u64,
    /// Restoring the states, µs.
    pub restore_us: u64,
    /// From the request to the ports read again, µs.
    pub took_us: u64,
}

/// The answer to a commit or an abort.
#[derive(Debug, Serialize, ToSchema)]
pub struct Finished {
    /// The desired state version now.
    pub resource_version: u64,
}

fn operator_only(caller: &Caller) -> Result<(), ApiError> {
    match caller {
        Caller::Operator => Ok(()),
        Caller::Tenant(t) => Err(ApiError::forbidden(format!(
            "tenant \"{t}\" may not move objects between daemons: ports are the operator's"
        ))),
    }
}

fn kind_of<'s>(spec: &'s Spec, port: &str) -> Option<&'s PortKind> {
    spec.ports.iter().find(|p| p.name == port).map(|p| &p.kind)
}

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

#[utoipa::path(post, path = "/v1/migrations/export", tag = "migrations",
    request_body = MigrateRequest,
    responses((status = 200, description = "The ports are paused and the states taken: the handover for the destination", body = Handover),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 404, description = "No such NF", body = ErrorBody),
              (status = 409, description = "A move is in progress already, or an NF's state cannot be taken now (rolling out, one instance per flow); nothing changed", body = ErrorBody),
              (status = 422, description = "A port of the component cannot move (`cannot_move`: only taps can); nothing changed", body = ErrorBody),
              (status = 503, description = "The NFs did not let go of their packets, or an instance did not answer; nothing changed", body = ErrorBody)))]
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
    let spec = s.desired.clone().ok_or_else(no_nf)?;
    let part = spec.component_of(&nf).ok_or_else(no_nf)?;
    if let Some(o) = &s.outgoing {
        return Err(ApiError::conflict(format!(
            "{} is moving already: commit or abort that move first",
            o.nf
        )));
    }
    for p in &part.ports {
        let kind = kind_of(&spec, p).expect("a component's ports are the spec's");
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
    let mut states = BTreeMap::new();
    for n in &part.nfs {
        match s.rt.checkpoint(n) {
            Ok(c) => {
                states.insert(
                    n.clone(),
                    base64::engine::general_purpose::STANDARD.encode(c.encode()),
                );
            }
            Err(StateFailure::Stateless(_)) => {}
            Err(e) => {
                resume(s);
                return Err(crate::checkpoint::api_error(e));
            }
        }
    }
    let checkpoint_us = t.elapsed().as_micros() as u64;
    let (moved, _) = spec.split_off(&part);
    tracing::info!(
        "{nf} is moving out: ports {:?} paused, {} state(s) taken",
        part.ports,
        states.len()
    );
    let h = Handover {
        nf: nf.clone(),
        pid: std::process::id(),
        ports: part.ports.clone(),
        nfs: part.nfs.clone(),
        chains: part.chains.clone(),
        fds: paused.fds,
        spec: addition_text(&moved),
        states,
        drain_us: paused.drain_us,
        checkpoint_us,
    };
    s.outgoing = Some(Outgoing { nf, part });
    Ok(h)
}

#[utoipa::path(post, path = "/v1/migrations/import", tag = "migrations",
    request_body = Handover,
    responses((status = 200, description = "The objects run here with their states, on the source's taps", body = Imported),
              (status = 400, description = "Malformed request, or a state that is not a checkpoint file", body = ErrorBody),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "A name is taken here (`already_exists`)", body = ErrorBody),
              (status = 422, description = "The objects are invalid here, their descriptors cannot be taken (`handover_failed`), or a state is refused; nothing changed", body = ErrorBody),
              (status = 503, description = "An instance did not answer; nothing changed", body = ErrorBody)))]
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
    // Everything that can be refused without touching the platform is
    // checked first: the objects, the states, the descriptors.
    let addition = sluice_spec::parse_additions(&h.spec, "<migration>")
        .map_err(|e| ApiError::invalid_spec(&e))?;
    let types: Vec<&str> = s.registry.iter().map(|t| t.name).collect();
    let spec = sluice_spec::add(s.desired.as_ref(), addition, &types)
        .map_err(crate::additions::refused)?;
    let mut states = Vec::with_capacity(h.states.len());
    for (nf, text) in &h.states {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| {
                ApiError::bad_request(format!("the state of {nf} is not base64: {e}"), None)
            })?;
        let c = Checkpoint::decode(&bytes).map_err(|e| {
            ApiError::bad_request(format!("the state of {nf} is not a checkpoint: {e}"), None)
        })?;
        states.push((nf.clone(), c));
    }
    let pid = sluice_sys::Pid::from_raw(h.pid as i32)
        .ok_or_else(|| ApiError::bad_request(format!("{} is no process id", h.pid), None))?;
    let mut offered: Vec<PortKind> = Vec::new();
    let withdraw = |offered: &[PortKind]| offered.iter().for_each(withdraw_port);
    for p in &h.ports {
        let Some(kind) = kind_of(&spec, p) else {
            withdraw(&offered);
            return Err(ApiError::bad_request(
                format!("port {p} is not among the objects moved"),
                None,
            ));
        };
        let fds = h.fds.get(p).map(Vec::as_slice).unwrap_or_default();
        let taken = sluice_sys::take_fds(pid, fds).map_err(|e| {
            ApiError::unprocessable(
                "handover_failed",
                format!(
                    "cannot take port {p}'s descriptors from process {}: {e} (the destination \
                     daemon needs root or CAP_SYS_PTRACE)",
                    h.pid
                ),
            )
        });
        let offer = taken.and_then(|fds| {
            offer_port(kind, fds).map_err(|e| ApiError::unprocessable("handover_failed", e))
        });
        if let Err(e) = offer {
            withdraw(&offered);
            return Err(e);
        }
        offered.push(kind.clone());
    }
    let before = s.desired.clone();
    let added = s.change(spec, None, false);
    // Every offer was taken by its port, or the change failed: none may
    // wait for a later port of the same interface.
    withdraw(&offered);
    added?;
    let add_us = t0.elapsed().as_micros() as u64;
    let t1 = std::time::Instant::now();
    let resumed = states
        .iter()
        .try_for_each(|(nf, c)| {
            s.rt.restore(nf, c)
                .map_err(|e| match crate::checkpoint::api_error(e) {
                    mut a if a.status.is_client_error() => {
                        a.body.error.message = format!("{nf}: {}", a.body.error.message);
                        a
                    }
                    a => a,
                })
        })
        .and_then(|()| {
            s.rt.pause_ports(&h.ports, false)
                .map_err(ApiError::unavailable)
        });
    if let Err(e) = resumed {
        // Back to what ran before: the moved objects go, and with them
        // this daemon's copies of the descriptors.
        let back = match before {
            Some(b) => s.change(b, None, false).map(|_| ()),
            None => s.clear().map(|_| ()),
        };
        if let Err(b) = back {
            tracing::error!("cannot go back after a failed import: {b}");
        }
        return Err(e);
    }
    tracing::info!(
        "{} moved in from process {}: ports {:?} resumed",
        h.nf,
        h.pid,
        h.ports
    );
    Ok(Imported {
        resource_version: s.version,
        add_us,
        restore_us: t1.elapsed().as_micros() as u64,
        took_us: t0.elapsed().as_micros() as u64,
    })
}

fn take_outgoing(s: &mut Ctl, nf: &str) -> Result<Outgoing, ApiError> {
    match s.outgoing.take() {
        Some(o) if o.nf == nf => Ok(o),
        other => {
            s.outgoing = other;
            Err(ApiError::conflict(format!(
                "no move of {nf} is in progress"
            )))
        }
    }
}

#[utoipa::path(post, path = "/v1/migrations/commit", tag = "migrations",
    request_body = MigrateRequest,
    responses((status = 200, description = "The moved objects are gone from this daemon", body = Finished),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "No move of that NF is in progress", body = ErrorBody),
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
                s.clear()
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

#[utoipa::path(post, path = "/v1/migrations/abort", tag = "migrations",
    request_body = MigrateRequest,
    responses((status = 200, description = "The ports are read again; nothing moved", body = Finished),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "No move of that NF is in progress", body = ErrorBody),
              (status = 503, description = "A worker did not answer", body = ErrorBody)))]
pub(crate) async fn post_abort(
    State(app): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Finished>, ApiError> {
    let req: MigrateRequest = parse_body(body)?;
    app.control
        .call(move |s| {
            operator_only(&caller)?;
            let o = take_outgoing(s, &req.nf)?;
            if let Err(e) = s.rt.pause_ports(&o.part.ports, false) {
                s.outgoing = Some(o);
                return Err(ApiError::unavailable(e));
            }
            tracing::info!("the move of {} was aborted: its ports are read again", o.nf);
            Ok(Finished {
                resource_version: s.version,
            })
        })
        .await?
        .map(Json)
}
