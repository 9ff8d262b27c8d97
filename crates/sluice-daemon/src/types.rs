//! Request and response bodies of the `/v1` API.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sluice_dataplane::diff::Diff;
use sluice_dataplane::logbook::LogLine;
use sluice_dataplane::ports::PortStats;
use sluice_dataplane::worker::Instance;
use utoipa::{IntoParams, ToSchema};

/// `GET /v1/version`.
#[derive(Debug, Serialize, ToSchema)]
pub struct VersionInfo {
    /// The daemon's version.
    pub version: String,
    /// The API version (`v1`).
    pub api: String,
}

/// `PUT /v1/spec`: make a spec the desired state.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    /// The spec document, YAML or JSON text (see docs/spec-reference.md).
    #[schema(
        example = "ports:\n  - { name: gen, kind: generator, rate_pps: 1000 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: acl, type: acl, config: { default: accept } }\nchains:\n  - { name: main, from: gen, nfs: [acl], to: out }\n"
    )]
    pub spec: String,
    /// The file the spec came from: errors name it and relative paths in
    /// it resolve beside it. Default: `<api>` (relative paths resolve
    /// against the daemon's working directory).
    #[serde(default)]
    pub source: Option<String>,
    /// Apply only if the desired state is still at this version
    /// (optimistic concurrency: `409` otherwise).
    #[serde(default)]
    pub resource_version: Option<u64>,
    /// Say what would change; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// What an apply did (or, with `dry_run`, would do).
#[derive(Debug, Serialize, ToSchema)]
pub struct ApplyResponse {
    /// The desired state's version now.
    pub resource_version: u64,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Ports, NFs and chains added, changed and removed.
    pub diff: Diff,
    /// Longest drain of ingress on any worker, µs (0 when none was needed).
    pub quiesce_us: u64,
    /// Time from the request to the change running on every worker, µs.
    pub took_us: u64,
    /// Of it: compiling and diffing the spec, µs.
    pub compile_us: u64,
    /// Opening ports, building NFs and starting new process NFs, µs.
    pub prepare_us: u64,
    /// Installing the change on every worker, µs.
    pub commit_us: u64,
}

impl ApplyResponse {
    /// The answer to a change that left the desired state at `version`.
    pub fn new(version: u64, dry_run: bool, a: sluice_dataplane::Applied) -> ApplyResponse {
        ApplyResponse {
            resource_version: version,
            dry_run,
            diff: a.diff,
            quiesce_us: a.quiesce_us,
            took_us: a.took_us,
            compile_us: a.compile_us,
            prepare_us: a.prepare_us,
            commit_us: a.commit_us,
        }
    }
}

/// `GET /v1/spec`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpecDocument {
    /// Its version (0: nothing applied yet).
    pub resource_version: u64,
    /// The desired state as a JSON spec document (`null` before the first
    /// apply).
    pub spec: Value,
}

/// A port: its definition and counters.
#[derive(Debug, Serialize, ToSchema)]
pub struct PortView {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Its entry in the spec document.
    pub definition: Value,
    /// Counters (summed over workers).
    pub stats: Option<PortStats>,
}

/// An NF: its definition, counters and instances.
#[derive(Debug, Serialize, ToSchema)]
pub struct NfView {
    /// Name.
    pub name: String,
    /// Type.
    #[serde(rename = "type")]
    pub nf_type: String,
    /// `inline` or `process`.
    pub isolation: String,
    /// Its entry in the spec document.
    pub definition: Value,
    /// Packets processed (all instances).
    pub packets: u64,
    /// CPU time in its batch handler, ns.
    pub cpu_ns: u64,
    /// CPU time of its processes as the kernel counts it (handler, ring
    /// I/O, polling), µs; 0 for inline NFs.
    pub process_cpu_us: u64,
    /// Times the kernel put its processes on a CPU (context switches); 0
    /// for inline NFs.
    pub process_switches: u64,
    /// Restarts after crashes.
    pub restarts: u32,
    /// What its processes may do (process NFs), as this platform gives it.
    pub sandbox: Option<sluice_dataplane::host::SandboxReport>,
    /// Processes its sandbox killed for a system call outside its list.
    pub sandbox_kills: u32,
    /// Processes killed at their memory limit.
    pub oom_kills: u32,
    /// Its trust domain (`platform` unless the spec names one).
    pub domain: String,
    /// Packets copied into its trust domain on their way to it.
    pub domain_copies: u64,
    /// Drops under its own reasons.
    pub drops: std::collections::BTreeMap<String, u64>,
    /// Its instances, one per worker and replica.
    pub instances: Vec<Instance>,
    /// With `replicas` above 1: each replica's share (the figures above
    /// are their sums), replica 0 first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaView>,
    /// With `steer: per_flow`: its pool of instances now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<PoolView>,
    /// Its rollout in progress (`sluice rollout`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rollout: Option<crate::rollout::RolloutView>,
}

/// A `per_flow` NF's pool (summed over the workers' copies).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PoolView {
    /// Instances in the pool.
    pub instances: u32,
    /// Instances serving a flow.
    pub busy: u32,
    /// Instances idle, reset, waiting for a flow.
    pub idle: u32,
    /// Flows served (more than `busy` only under `fallback: shared`).
    pub flows: u64,
}

/// One replica of an NF with `replicas` (named `NAME`, `NAME.1`, …).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReplicaView {
    /// The replica's name.
    pub name: String,
    /// Packets it processed.
    pub packets: u64,
    /// Its restarts after crashes.
    pub restarts: u32,
}

/// A chain: its definition and path.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainView {
    /// Name.
    pub name: String,
    /// Input port.
    pub from: String,
    /// The NFs packets pass (following `to` links into other chains), then
    /// the output port.
    pub path: Vec<String>,
    /// Its entry in the spec document.
    pub definition: Value,
}

/// Query of `DELETE` requests.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// Delete only if the desired state is still at this version.
    pub resource_version: Option<u64>,
}

/// Query of `GET /v1/nfs/{name}/logs`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct LogsQuery {
    /// Only lines after this sequence number (follow with the previous
    /// answer's `next`).
    pub after: Option<u64>,
}

/// `GET /v1/nfs/{name}/logs`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LogsResponse {
    /// Lines, oldest first.
    pub lines: Vec<LogLine>,
    /// Pass as `after` to get only newer lines.
    pub next: u64,
}

/// What a `DELETE` did.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeleteResponse {
    /// The desired state's version now.
    pub resource_version: u64,
    /// What changed.
    pub diff: Diff,
}
