//! `GET /v1/nfs/{name}/checkpoint` and `POST /v1/nfs/{name}/restore`: an
//! NF's state (connections, mappings, counters) as a sealed file
//! (`sluice_nf::checkpoint`), and back.
//!
//! The checkpoint is taken while traffic flows: each instance writes its
//! state between two of its batches. A restore is checked whole first (the
//! file's seal, its NF type and state version, the NF's number of
//! instances, and every part against a scratch instance), so a bad file
//! leaves the running NF untouched; then every instance takes its part.
//! A restored process NF that later crashes restarts empty, as it would
//! have without the restore.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use sluice_dataplane::StateFailure;
use sluice_nf::checkpoint::{Checkpoint, CheckpointError};
use utoipa::ToSchema;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{body_bytes, AppState, Name};
use crate::tenancy::Caller;

/// The answer to a restore.
#[derive(Debug, Serialize, ToSchema)]
pub struct RestoreResponse {
    /// The NF restored.
    pub nf: String,
    /// Its type.
    #[serde(rename = "type")]
    pub nf_type: String,
    /// Instances that took their part.
    pub instances: usize,
    /// Bytes of state restored.
    pub bytes: usize,
}

pub(crate) fn api_error(e: StateFailure) -> ApiError {
    match e {
        StateFailure::NoSuchNf(_) => ApiError::not_found(e.to_string()),
        StateFailure::Unsupported(_) | StateFailure::Stateless(_) => {
            ApiError::conflict(e.to_string())
        }
        StateFailure::Refused(_) | StateFailure::Invalid(_) => {
            ApiError::unprocessable("checkpoint_refused", e.to_string())
        }
        StateFailure::Failed(_) => ApiError::unavailable(e.to_string()),
    }
}

#[utoipa::path(get, path = "/v1/nfs/{name}/checkpoint", tag = "nfs",
    params(("name" = String, Path, description = "NF name", example = "fw")),
    responses((status = 200, description = "The NF's state, a checkpoint file (`application/octet-stream`)", content_type = "application/octet-stream", body = Vec<u8>),
              (status = 403, description = "A tenant's token, and an NF that is not the tenant's", body = ErrorBody),
              (status = 404, description = "No such NF", body = ErrorBody),
              (status = 409, description = "Its type keeps no state, it runs one instance per flow, or it is rolling out", body = ErrorBody),
              (status = 503, description = "An instance did not answer", body = ErrorBody)))]
pub(crate) async fn get_checkpoint(
    State(app): State<AppState>,
    caller: Caller,
    Name(name): Name,
) -> Result<Response, ApiError> {
    let bytes = app
        .control
        .call(move |s| {
            caller.may_look_into(s.desired.as_deref(), &name)?;
            let c = s.rt.checkpoint(&name).map_err(api_error)?;
            tracing::info!(
                "checkpoint of {name}: {} instance(s), {} bytes of state",
                c.parts.len(),
                c.parts.iter().map(|p| p.state.len()).sum::<usize>()
            );
            Ok::<_, ApiError>(c.encode())
        })
        .await??;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

#[utoipa::path(post, path = "/v1/nfs/{name}/restore", tag = "nfs",
    params(("name" = String, Path, description = "NF name", example = "fw")),
    request_body(content = Vec<u8>, content_type = "application/octet-stream", description = "A checkpoint file"),
    responses((status = 200, description = "Every instance took its state", body = RestoreResponse),
              (status = 400, description = "Not a checkpoint file, truncated or corrupt (nothing changed)", body = ErrorBody),
              (status = 403, description = "A tenant's token, and an NF that is not the tenant's (nothing changed)", body = ErrorBody),
              (status = 404, description = "No such NF", body = ErrorBody),
              (status = 409, description = "Its type keeps no state, it runs one instance per flow, or it is rolling out", body = ErrorBody),
              (status = 413, description = "Larger than the API's body limit", body = ErrorBody),
              (status = 422, description = "Another NF type's, another state version's or another shape's checkpoint, or a state the NF refuses (nothing changed)", body = ErrorBody),
              (status = 503, description = "An instance failed or did not answer", body = ErrorBody)))]
pub(crate) async fn post_restore(
    State(app): State<AppState>,
    caller: Caller,
    Name(name): Name,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RestoreResponse>, ApiError> {
    let body = body_bytes(body)?;
    let checkpoint = Checkpoint::decode(&body).map_err(|e| match e {
        CheckpointError::NotACheckpoint
        | CheckpointError::UnsupportedFormat(_)
        | CheckpointError::Truncated
        | CheckpointError::Corrupt { .. }
        | CheckpointError::Malformed(_) => ApiError::bad_request(e.to_string(), None),
        other => ApiError::unprocessable("checkpoint_refused", other.to_string()),
    })?;
    app.control
        .call(move |s| {
            caller.may_delete(s.desired.as_deref(), "nf", &name)?;
            s.rt.restore(&name, &checkpoint).map_err(api_error)?;
            let bytes = checkpoint.parts.iter().map(|p| p.state.len()).sum();
            tracing::info!(
                "restore of {name} from a checkpoint of {}: {bytes} bytes of state",
                checkpoint.nf
            );
            Ok(RestoreResponse {
                nf: name,
                nf_type: checkpoint.nf_type.clone(),
                instances: checkpoint.parts.len(),
                bytes,
            })
        })
        .await?
        .map(Json)
}
