//! `POST /v1/spec/additions`: ports, NFs and chains added to the desired
//! state, without the rest of it.
//!
//! A client creating one NF in a platform that runs a thousand sent the
//! whole desired state (`PUT /v1/spec`), which the daemon parsed again
//! whole: the request's cost grew with the platform. An addition carries
//! only its objects; the daemon parses those, appends them to the spec it
//! holds (`sluice_spec::add_to`, in place: a taken name is a `409`, the
//! result is validated as a whole spec, errors point into the addition)
//! and applies the result as any change, all or nothing: a refusal takes
//! the objects off again.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use sluice_spec::AddError;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{parse_body, AppState};
use crate::tenancy::Caller;
use crate::types::{ApplyRequest, ApplyResponse};

#[utoipa::path(post, path = "/v1/spec/additions", tag = "spec", request_body(
        content = ApplyRequest,
        description = "`spec` holds only `ports`, `nfs` and/or `chains` to add (the same YAML or JSON as a spec's lists); they may refer to objects that exist"),
    responses(
        (status = 200, description = "Added (or, dry run, what would change)", body = ApplyResponse),
        (status = 400, description = "Malformed request", body = ErrorBody),
        (status = 403, description = "A tenant's token, and an object that is not the tenant's (nothing changed)", body = ErrorBody),
        (status = 409, description = "A name is taken (`already_exists`, naming its field), or another change came first", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 422, description = "Not an addition, or the spec with it is invalid, or a part of it could not start (nothing changed)", body = ErrorBody)))]
pub(crate) async fn post_additions(
    State(app): State<AppState>,
    caller: Caller,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ApplyResponse>, ApiError> {
    let req: ApplyRequest = parse_body(body)?;
    app.control
        .call(move |s| {
            // A stale version is a conflict whatever else is wrong.
            s.check_version(req.resource_version)?;
            let source = req.source.as_deref().unwrap_or("<api>");
            let addition = sluice_spec::parse_additions(&req.spec, source)
                .map_err(|e| ApiError::invalid_spec(&e))?;
            let types: Vec<&str> = s.registry.iter().map(|t| t.name).collect();
            // Appended to the desired state itself, not to a copy of it:
            // whatever is refused below puts it back.
            let base = s.desired.take();
            let grown = match sluice_spec::add_to(base, addition, &types) {
                Ok(g) => g,
                Err(r) => {
                    let r = *r;
                    s.desired = r.base;
                    return Err(refused(r.error));
                }
            };
            if let Err(e) = caller.may_add(&grown) {
                s.desired = grown.into_base();
                return Err(e);
            }
            let c = s.grow_journaled(
                grown,
                req.resource_version,
                req.dry_run,
                (&req.spec, source),
            )?;
            Ok(ApplyResponse::new(c.version, req.dry_run, c.applied))
        })
        .await?
        .map(Json)
}

pub(crate) fn refused(e: AddError) -> ApiError {
    match e {
        AddError::Exists { kind, name, field } => {
            let mut a = ApiError::already_exists(format!(
                "{kind} {name} exists already: delete it first, or change it with a whole spec"
            ));
            a.body.error.field = Some(field);
            a
        }
        AddError::Invalid(e) => ApiError::invalid_spec(&e),
    }
}
