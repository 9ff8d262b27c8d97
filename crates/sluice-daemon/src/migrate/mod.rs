//! Moving an NF, with what is connected to it, to another daemon on the
//! same host while traffic flows (`sluice migrate`).
//!
//! What moves is the NF's component (`Spec::component_of`): its chains,
//! their ports and NFs, and so on until closed. Its ports must be taps:
//! a tap lives while anyone holds a queue descriptor, and frames sent to
//! it wait in its queues while nobody reads. The client drives the move:
//!
//! 1. `export` (source): the handover: this process's id, the taps'
//!    descriptors, the objects as an addition. Traffic still flows.
//! 2. `import` (destination): take copies of the descriptors
//!    (`pidfd_getfd`) and add the objects; their ports open paused on the
//!    copies. Everything slow (forking the NFs, opening the ports) happens
//!    here, before traffic stops.
//! 3. `pause` (source): stop reading the ports, let the packets already
//!    read leave the NFs, checkpoint every NF that keeps state (answered
//!    as a binary bundle, `bundle.rs`). From here frames wait in the taps.
//! 4. `resume` (destination): restore the states, read the ports: the
//!    frames that waited are read now, by NFs that hold the state of every
//!    packet before them.
//! 5. `commit` (source): remove the objects (its descriptors close; the
//!    taps stay, held by the destination).
//!
//! `abort` undoes either side: the source reads its ports again, the
//! destination goes back to what it ran before the import. Nothing is lost
//! as long as a tap's queue (`txqueuelen` frames) holds what arrives
//! between steps 3 and 4.

mod bundle;
pub(crate) mod destination;
pub(crate) mod moves;
pub(crate) mod source;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use sluice_spec::{PortKind, Spec};
use utoipa::ToSchema;

use crate::control::State as Ctl;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{parse_body, AppState};
use crate::tenancy::Caller;
pub use moves::{Incoming, Outgoing};

/// `POST /v1/migrations/{export,pause,commit,abort}`' body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MigrateRequest {
    /// The NF that moves (its whole component moves with it).
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
    pub fds: std::collections::BTreeMap<String, Vec<i32>>,
    /// The moving objects as an addition (`POST /v1/spec/additions`'s
    /// `spec`), JSON text.
    pub spec: String,
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

fn no_move(nf: &str) -> ApiError {
    ApiError::conflict(format!("no move of {nf} is in progress"))
}

/// Goes back to what ran before an import (the moved objects go, and
/// with them this daemon's copies of the descriptors).
fn roll_back(s: &mut Ctl, inc: Incoming) {
    let back = match inc.before {
        Some(b) => s.change(b, None, false).map(|_| ()),
        None => s.clear().map(|_| ()),
    };
    match back {
        Ok(()) => tracing::info!("the move of {} in was undone", inc.nf),
        Err(e) => tracing::error!("cannot undo the move of {} in: {e}", inc.nf),
    }
}

#[utoipa::path(post, path = "/v1/migrations/abort", tag = "migrations",
    request_body = MigrateRequest,
    responses((status = 200, description = "Undone: a source reads its ports again, a destination runs what it ran before the import", body = Finished),
              (status = 400, description = "Malformed request", body = ErrorBody),
              (status = 403, description = "A tenant's token", body = ErrorBody),
              (status = 409, description = "No move of that NF is in progress here", body = ErrorBody),
              (status = 413, description = "Body too large", body = ErrorBody),
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
            if s.incoming.as_ref().is_some_and(|i| i.nf == req.nf) {
                let inc = s.incoming.take().expect("checked above");
                roll_back(s, inc);
            } else {
                let o = source::take_outgoing(s, &req.nf)?;
                if let Err(e) = s.rt.pause_ports(&o.part.ports, false) {
                    s.outgoing = Some(o);
                    return Err(ApiError::unavailable(e));
                }
                tracing::info!("the move of {} out was aborted: its ports are read", o.nf);
            }
            Ok(Finished {
                resource_version: s.version,
            })
        })
        .await?
        .map(Json)
}
