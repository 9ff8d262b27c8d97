//! The control thread: it alone owns the [`Runtime`] and the desired
//! state, and runs one request at a time, so an apply is never
//! interleaved with another change (HTTP handlers, on the async runtime,
//! send it closures and await the result; nothing async ever blocks on
//! the data plane).
//!
//! The desired state is a spec and a resource version that grows by one
//! per change. A change names the version it was computed from, and is
//! refused (409) if another change came first: two concurrent applies,
//! one wins. Each change is persisted in the state directory before it
//! is acknowledged, and re-applied when the daemon starts.

use std::path::PathBuf;
use std::sync::mpsc;

use sluice_dataplane::{PlatformSettings, RunError, Runtime};
use sluice_nf::NfType;
use sluice_spec::{IndexedSpec, Spec};

pub use crate::candidate::Candidate;
use crate::error::ApiError;
use crate::state::StateDir;

/// Everything the control thread holds.
pub struct State {
    /// The data plane.
    pub rt: Runtime,
    /// The spec it runs (`None` before the first apply).
    pub desired: Option<IndexedSpec>,
    /// Version of `desired`; 0 before the first apply.
    pub version: u64,
    /// Where `desired` is persisted.
    pub dir: StateDir,
    /// Capacities and sizes the daemon was started with.
    pub platform: PlatformSettings,
    /// NF types.
    pub registry: &'static [NfType],
    /// Deadlines of rollouts in progress.
    pub rollouts: Rollouts,
    /// What the `per_flow` pool sizer remembers.
    pub sizer: Sizer,
    /// A move to another daemon waiting for its commit or abort.
    pub outgoing: Option<crate::migrate::moves::Outgoing>,
    /// A move from another daemon waiting for its resume or abort.
    pub incoming: Option<crate::migrate::moves::Incoming>,
    /// Additions journaled since the desired state was last written whole.
    pub journal_len: usize,
    /// Syncs an addition's journal line while the addition applies.
    pub(crate) syncer: crate::syncer::Syncer,
}

/// Deadlines of the rollouts in progress, by NF name (`rollout.rs`, which
/// owns their logic; the data lives here so that the control thread's
/// state depends on no module that extends it).
#[derive(Debug, Default)]
pub struct Rollouts {
    pub(crate) deadlines: std::collections::HashMap<String, std::time::Instant>,
}

/// What the `per_flow` pool sizer (`pools.rs`) remembers between looks.
#[derive(Debug, Default)]
pub struct Sizer {
    pub(crate) last: Option<std::time::Instant>,
    /// `nf_pool_exhausted` drops at the last look.
    pub(crate) refused: u64,
    /// Since when each NF's pool could have been smaller.
    pub(crate) shrink_since: std::collections::HashMap<String, std::time::Instant>,
}

type Job = Box<dyn FnOnce(&mut State) + Send>;

/// Why the data plane failed, once it has (`None` until then).
pub type Failed = tokio::sync::watch::Receiver<Option<String>>;

/// How often the control thread looks whether a rollout's old version
/// can retire when no request comes.
const ROLLOUT_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// A handle on the control thread.
#[derive(Clone)]
pub struct Control {
    tx: mpsc::Sender<Job>,
}

impl Control {
    /// Starts the control thread with a fresh data plane, and re-applies
    /// the persisted desired state if there is one. The watch it returns
    /// turns to the reason if the data plane fails (a worker's code
    /// panicked: `Runtime::failure`), seen within a tick.
    pub fn start(
        platform: PlatformSettings,
        registry: &'static [NfType],
        dir: StateDir,
    ) -> Result<(Control, std::thread::JoinHandle<()>, Failed), String> {
        let (tx, rx) = mpsc::channel::<Job>();
        let (failed_tx, failed) = tokio::sync::watch::channel(None);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let thread = std::thread::Builder::new()
            .name("sluice-control".into())
            .spawn(move || {
                let rt = match Runtime::start(platform.clone(), registry) {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let syncer = match crate::syncer::Syncer::start() {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("cannot start the sync thread: {e}")));
                        return;
                    }
                };
                let mut state = State {
                    rt,
                    desired: None,
                    version: 0,
                    dir,
                    platform,
                    registry,
                    rollouts: Default::default(),
                    sizer: Default::default(),
                    outgoing: None,
                    incoming: None,
                    journal_len: 0,
                    syncer,
                };
                state.restore();
                let _ = ready_tx.send(Ok(()));
                // Between requests, at least every ROLLOUT_TICK: retire
                // a rollout's old version once its flows have ended, and
                // size per-flow pools to their load.
                loop {
                    match rx.recv_timeout(ROLLOUT_TICK) {
                        Ok(job) => job(&mut state),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                    // A failed data plane applies nothing more: the
                    // daemon stops (and says why) rather than answer for
                    // a platform whose packets no longer move.
                    if failed_tx.borrow().is_none() {
                        if let Some(why) = state.rt.failure() {
                            let _ = failed_tx.send(Some(why));
                        }
                    }
                    state.tick_rollouts();
                    state.tick_pools();
                }
                // Every handle is gone: the daemon is shutting down.
                let State { rt, dir, .. } = state;
                let report = rt.stop();
                // What an operator (or `sluice soak`) reads after the stop:
                // the run's totals and whether buffers leaked.
                let saved = serde_json::to_value(&report)
                    .map_err(std::io::Error::from)
                    .and_then(|v| dir.save_last_run(&v));
                if let Err(e) = saved {
                    tracing::error!(
                        "cannot keep the final report in {}: {e}",
                        dir.path().display()
                    );
                }
                tracing::info!(
                    "stopped: {} packets in, {} out, {} dropped, {} leaked buffers",
                    report.packets_in,
                    report.packets_out,
                    report.drops_total,
                    report.leaked_buffers
                );
            })
            .map_err(|e| format!("cannot start the control thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok((Control { tx }, thread, failed)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err("the control thread stopped while starting".into()),
        }
    }

    /// Runs `f` on the control thread without waiting for it (from code
    /// that cannot await).
    pub fn post(&self, f: impl FnOnce(&mut State) + Send + 'static) {
        let _ = self.tx.send(Box::new(f));
    }

    /// Runs `f` on the control thread and returns its result.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut State) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move |s| {
            let _ = tx.send(f(s));
        });
        self.tx
            .send(job)
            .map_err(|_| ApiError::unavailable("the control thread has stopped"))?;
        rx.await
            .map_err(|_| ApiError::unavailable("the control thread has stopped"))
    }
}

impl State {
    /// The entry named `name` of `key` (`ports`, `nfs`, `chains`) in the
    /// desired spec, as its JSON document has it (the rest unwritten).
    pub fn desired_entry(&self, key: &str, name: &str) -> Option<serde_json::Value> {
        self.desired.as_ref()?.entry_json(key, name)
    }

    /// The entries of `key` (`ports`, `nfs`, `chains`) in the desired
    /// spec, as its JSON document has them, or only the one named `only`
    /// (written alone).
    pub fn desired_entries(&self, key: &str, only: Option<&str>) -> Vec<serde_json::Value> {
        if let Some(name) = only {
            return self.desired_entry(key, name).into_iter().collect();
        }
        let Some(d) = &self.desired else {
            return Vec::new();
        };
        match d.to_json().get_mut(key).map(serde_json::Value::take) {
            Some(serde_json::Value::Array(entries)) => entries,
            _ => Vec::new(),
        }
    }

    /// The spec with one object removed (`kind` is `port`, `nf` or
    /// `chain`), as a new desired state.
    pub fn without(&self, kind: &str, name: &str) -> Result<Spec, ApiError> {
        let Some(mut spec) = self.desired.as_deref().cloned() else {
            return Err(ApiError::not_found(format!("no {kind} named {name}")));
        };
        let before = (spec.ports.len(), spec.nfs.len(), spec.chains.len());
        match kind {
            "port" => spec.ports.retain(|p| p.name != name),
            "nf" => spec.nfs.retain(|n| n.name != name),
            _ => spec.chains.retain(|c| c.name != name),
        }
        if (spec.ports.len(), spec.nfs.len(), spec.chains.len()) == before {
            return Err(ApiError::not_found(format!("no {kind} named {name}")));
        }
        // Refuse, naming them, while chains use it: the spec left would
        // be invalid, and its error would name a field path, not the chain.
        let users: Vec<(&str, String)> = spec
            .chains
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let at = match kind {
                    "nf" => c
                        .nfs
                        .iter()
                        .position(|n| n == name)
                        .map(|j| format!("chains[{i}].nfs[{j}]")),
                    "port" if c.from == name => Some(format!("chains[{i}].from")),
                    _ if c.to == name => Some(format!("chains[{i}].to")),
                    _ => None,
                };
                at.map(|at| (c.name.as_str(), at))
            })
            .collect();
        if let Some((_, field)) = users.first() {
            let names: Vec<&str> = users.iter().map(|(n, _)| *n).collect();
            let (noun, them) = if names.len() == 1 {
                ("chain", "it")
            } else {
                ("chains", "them")
            };
            let mut e = ApiError::unprocessable(
                "in_use",
                format!(
                    "{kind} {name} is used by {noun} {}: delete or change {them} first",
                    names.join(", ")
                ),
            );
            e.body.error.field = Some(field.clone());
            return Err(e);
        }
        if spec.chains.is_empty() {
            // A spec needs a chain (sluice-spec's rule): say so, rather than
            // blame the file the desired state came from.
            return Err(ApiError::unprocessable(
                "last_chain",
                format!(
                    "chain {name} is the last chain, and a desired state needs at least one: \
                     apply a spec without it instead, or stop everything (DELETE /v1/spec, \
                     `sluice delete spec`)"
                ),
            ));
        }
        Ok(spec)
    }
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Spec(e) => ApiError::invalid_spec(&e),
            RunError::Setup(m) => ApiError::unprocessable("setup_failed", m),
            e @ RunError::Failed(_) => ApiError::unavailable(e.to_string()),
        }
    }
}

/// The daemon's default state directory.
pub fn default_state_dir() -> PathBuf {
    if rustix::process::geteuid().is_root() {
        PathBuf::from("/var/lib/sluice")
    } else {
        std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
            .unwrap_or_else(|| PathBuf::from("."))
            .join("sluice")
    }
}
