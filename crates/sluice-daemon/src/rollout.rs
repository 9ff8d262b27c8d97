//! Rolling upgrade: `POST /v1/nfs/{name}/rollout` runs an NF's new config
//! as a new version beside the running one, and retires the old version
//! when the flows it served have ended, or at the rollout's deadline.
//!
//! The rollout lives in the desired state (`nfs[].generation`,
//! `nfs[].draining`; the data plane's side is `sluice_dataplane::held`),
//! so it survives a daemon restart. The control thread owns the rest: a
//! deadline per rollout, and [`Ctl::tick_rollouts`], which it runs between
//! requests, retires the old version when the workers keep no flow on it
//! (`Runtime::held_flows`) or when its deadline passes (its remaining
//! flows then move to the new version, with their per-flow state lost).
//! One rollout runs at a time: `held_flows` counts flows, not versions.

use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_dataplane::diff::Diff;
use utoipa::ToSchema;

use crate::control::State as Ctl;
use crate::error::{ApiError, ErrorBody};
use crate::extract::{parse_body, AppState, Name};
use crate::tenancy::Caller;

/// How long the old version may drain unless the request says.
const DEFAULT_TIMEOUT_S: u64 = 300;
/// Longest drain a request may ask for (a day).
const MAX_TIMEOUT_S: u64 = 86_400;

/// `POST /v1/nfs/{name}/rollout`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RolloutRequest {
    /// The new version's config (the NF's `config` mapping).
    #[schema(value_type = Object)]
    pub config: Value,
    /// Seconds the old version may drain before it is removed and its
    /// remaining flows move to the new one (default 300, at most 86400).
    #[serde(default)]
    pub timeout_s: Option<u64>,
    /// Refuse (409) unless the desired state is at this version.
    #[serde(default)]
    pub resource_version: Option<u64>,
}

/// The answer to a rollout request.
#[derive(Debug, Serialize, ToSchema)]
pub struct RolloutResponse {
    /// The desired state's new version.
    pub resource_version: u64,
    /// The new version's generation (its instances are `NAME@g`, …).
    pub generation: u32,
    /// The draining version's generation.
    pub draining_generation: u32,
    /// Flows the workers keep on the old version.
    pub held_flows: u64,
    /// What changed (the new version's instances were added).
    pub diff: Diff,
}

/// A rollout in progress, as `GET /v1/nfs/{name}` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RolloutView {
    /// The new version's generation.
    pub generation: u32,
    /// The draining version's generation.
    pub draining_generation: u32,
    /// Flows still kept on the old version (by every NF's rollout: one
    /// runs at a time).
    pub held_flows: u64,
    /// Seconds until the old version is removed whatever it still serves.
    pub deadline_s: f64,
}

#[utoipa::path(post, path = "/v1/nfs/{name}/rollout", tag = "nfs", request_body = RolloutRequest,
    params(("name" = String, Path, description = "NF name", example = "fw")),
    responses((status = 200, description = "The new version runs; the old one drains", body = RolloutResponse),
              (status = 400, description = "Malformed request", body = ErrorBody),
              (status = 403, description = "A tenant's token, and an NF that is not the tenant's (nothing changed)", body = ErrorBody),
              (status = 404, description = "No such NF", body = ErrorBody),
              (status = 409, description = "Another change came first, or a rollout is in progress", body = ErrorBody),
              (status = 422, description = "The new config is invalid or unchanged (nothing changed)", body = ErrorBody)))]
pub(crate) async fn post_rollout(
    State(app): State<AppState>,
    caller: Caller,
    Name(name): Name,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RolloutResponse>, ApiError> {
    let req: RolloutRequest = parse_body(body)?;
    let timeout = req.timeout_s.unwrap_or(DEFAULT_TIMEOUT_S);
    if timeout > MAX_TIMEOUT_S {
        return Err(ApiError::bad_request(
            format!("timeout_s {timeout} is above the most, {MAX_TIMEOUT_S} (a day)"),
            Some("timeout_s".into()),
        ));
    }
    app.control
        .call(move |s| s.start_rollout(&caller, &name, &req, Duration::from_secs(timeout)))
        .await?
        .map(Json)
}

impl Ctl {
    /// Starts a rollout of NF `name` to `req.config` (see the module).
    fn start_rollout(
        &mut self,
        caller: &Caller,
        name: &str,
        req: &RolloutRequest,
        timeout: Duration,
    ) -> Result<RolloutResponse, ApiError> {
        self.check_version(req.resource_version)?;
        let Some(desired) = self.desired.as_deref() else {
            return Err(ApiError::not_found(format!("no nf named {name}")));
        };
        let Some(nf) = desired.nfs.iter().find(|n| n.name == name) else {
            return Err(ApiError::not_found(format!("no nf named {name}")));
        };
        if let Some(other) = desired.nfs.iter().find(|n| n.draining.is_some()) {
            return Err(ApiError::conflict(format!(
                "a rollout of {} is in progress (one runs at a time): wait for its old version \
                 to retire",
                other.name
            )));
        }
        if !req.config.is_object() {
            return Err(ApiError::bad_request(
                "config must be a mapping (the NF's config)",
                Some("config".into()),
            ));
        }
        if nf.config.to_json() == req.config {
            return Err(ApiError::unprocessable(
                "unchanged",
                format!("{name} already runs this config: a rollout needs a new one"),
            ));
        }
        let (old, new) = (nf.generation, nf.generation + 1);
        // Through the spec's own text form, so the new config is parsed
        // and located like any other (its errors name `nfs[i].config`).
        let mut doc = desired.to_json();
        for n in doc["nfs"].as_array_mut().into_iter().flatten() {
            if n["name"] == name {
                let was = std::mem::replace(&mut n["config"], req.config.clone());
                n["generation"] = new.into();
                n["draining"] = serde_json::json!({
                    "generation": old,
                    "config": was,
                    "replicas": n.get("replicas").cloned().unwrap_or(1.into()),
                });
            }
        }
        let spec = self
            .parse(&doc.to_string(), "<rollout>")
            .map_err(|e| ApiError::invalid_spec(&e))?;
        caller.may_change(self.desired.as_deref(), &spec)?;
        let c = self.change(spec, req.resource_version, false)?;
        self.rollouts
            .deadlines
            .insert(name.to_string(), Instant::now() + timeout);
        tracing::info!("rollout of {name}: generation {new} runs, {old} drains");
        Ok(RolloutResponse {
            resource_version: c.version,
            generation: new,
            draining_generation: old,
            held_flows: self.rt.held_flows(),
            diff: c.applied.diff,
        })
    }

    /// Retires each draining version whose flows have all ended or whose
    /// deadline has passed. Cheap when no rollout runs (the control thread
    /// calls it between requests).
    pub fn tick_rollouts(&mut self) {
        let Some(desired) = self.desired.as_deref() else {
            return;
        };
        let Some(nf) = desired.nfs.iter().find(|n| n.draining.is_some()) else {
            self.rollouts.deadlines.clear();
            return;
        };
        let name = nf.name.clone();
        let now = Instant::now();
        // A rollout found in the state a restarted daemon re-applied gets
        // a fresh deadline.
        let deadline = *self
            .rollouts
            .deadlines
            .entry(name.clone())
            .or_insert(now + Duration::from_secs(DEFAULT_TIMEOUT_S));
        let held = self.rt.held_flows();
        if held > 0 && now < deadline {
            return;
        }
        let mut spec = desired.clone();
        for n in spec.nfs.iter_mut().filter(|n| n.name == name) {
            n.draining = None;
        }
        match self.change(spec, None, false) {
            Ok(c) => {
                self.rollouts.deadlines.remove(&name);
                if held > 0 {
                    tracing::warn!(
                        "rollout of {name}: deadline passed with {held} flows on the old version; \
                         they move to the new one (version {})",
                        c.version
                    );
                } else {
                    tracing::info!(
                        "rollout of {name}: the old version retired (version {})",
                        c.version
                    );
                }
            }
            Err(e) => {
                // Try again later rather than every pass.
                tracing::error!("rollout of {name}: cannot retire the old version: {e:?}");
                self.rollouts
                    .deadlines
                    .insert(name, now + Duration::from_secs(10));
            }
        }
    }

    /// NF `name`'s rollout in progress, if it has one.
    pub(crate) fn rollout_view(&self, name: &str) -> Option<RolloutView> {
        let nf = self
            .desired
            .as_deref()?
            .nfs
            .iter()
            .find(|n| n.name == name)?;
        let d = nf.draining.as_ref()?;
        let left = self
            .rollouts
            .deadlines
            .get(name)
            .map_or(DEFAULT_TIMEOUT_S as f64, |t| {
                t.saturating_duration_since(Instant::now()).as_secs_f64()
            });
        Some(RolloutView {
            generation: nf.generation,
            draining_generation: d.generation,
            held_flows: self.rt.held_flows(),
            deadline_s: left,
        })
    }

    /// A spec applied whole (`PUT /v1/spec`) whose NFs say nothing of
    /// versions keeps the running ones': the same NF of the same type
    /// keeps its generation (so its instances keep running) and its
    /// rollout in progress. A spec that sets either is taken as it is.
    /// A sized `per_flow` pool keeps its current size too.
    pub fn carry_versions(&self, spec: &mut sluice_spec::Spec) {
        let Some(desired) = self.desired.as_deref() else {
            return;
        };
        for n in spec
            .nfs
            .iter_mut()
            .filter(|n| n.generation == 0 && n.draining.is_none())
        {
            if let Some(d) = desired
                .nfs
                .iter()
                .find(|d| d.name == n.name && d.nf_type == n.nf_type)
            {
                n.generation = d.generation;
                n.draining = d.draining.clone();
            }
        }
        // A sized pool's size is the daemon's (`pools.rs`): kept, within
        // the new bounds.
        for n in spec.nfs.iter_mut() {
            let (Some(b), Some(d)) = (
                n.pool,
                desired
                    .nfs
                    .iter()
                    .find(|d| d.name == n.name && d.pool.is_some()),
            ) else {
                continue;
            };
            n.replicas = d.replicas.clamp(b.min, b.max);
        }
    }
}
