//! Pausing and resuming input ports (`sluice migrate`), and handing a
//! port's descriptors over to another daemon.
//!
//! A pause stops reading the ports on every worker and waits until the
//! packets already read have left the NFs (`crate::worker::pause`); the
//! frames that arrive meanwhile wait in the interface's queue. The answer
//! carries each paused port's descriptors, for the other daemon to take
//! (`sluice_sys::take_fds`) and offer to its own port of the same spec
//! (`sluice_nic::handover`), which opens paused until resumed.

use std::collections::BTreeMap;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::mpsc::sync_channel;
use std::time::Duration;

use sluice_spec::PortKind;

use super::Runtime;
use crate::worker::Command;

/// What a pause did, over every worker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortsPaused {
    /// By port name: its descriptors, for another daemon to take over
    /// (absent for a port that cannot move).
    pub fds: BTreeMap<String, Vec<RawFd>>,
    /// The longest drain of the packets already read, µs.
    pub drain_us: u64,
    /// Every worker's NFs let go of every packet (false: a drain timed
    /// out, so a checkpoint now may miss the last packets' effects).
    pub drained: bool,
}

/// How long the control thread waits for a worker's answer (its drain is
/// bounded by `QUIESCE_TIMEOUT_NS`).
const WAIT: Duration = Duration::from_secs(5);

impl Runtime {
    /// Stops (`pause`) or resumes reading the input ports `names`; either
    /// way, answers with their descriptors (resuming ports that run is
    /// how to ask for those alone).
    ///
    /// # Errors
    /// A name that is no port of the running plan (nothing changed), or a
    /// worker that did not answer.
    pub fn pause_ports(&self, names: &[String], pause: bool) -> Result<PortsPaused, String> {
        let mut ids = Vec::with_capacity(names.len());
        for name in names {
            let id = self
                .plan
                .ports
                .iter()
                .position(|p| p.as_ref().is_some_and(|p| &p.name == name))
                .ok_or_else(|| format!("no port named {name:?} runs"))?;
            ids.push(id as u16);
        }
        let mut rxs = Vec::new();
        for w in 0..self.workers.len() {
            let (tx, rx) = sync_channel(1);
            self.post(w, Command::Pause(ids.clone(), pause, tx));
            rxs.push(rx);
        }
        let mut out = PortsPaused {
            drained: true,
            ..PortsPaused::default()
        };
        for (w, rx) in rxs.into_iter().enumerate() {
            let got = rx
                .recv_timeout(WAIT)
                .map_err(|_| format!("worker {w} did not answer"))?;
            out.drain_us = out.drain_us.max(got.drain_us);
            out.drained &= got.drained;
            for (id, fds) in got.fds {
                if let Some(p) = self.plan.port(id) {
                    out.fds.entry(p.name.clone()).or_default().extend(fds);
                }
            }
        }
        Ok(out)
    }
}

/// Offers descriptors `fds`, taken from another daemon, to the next port
/// opened with `kind` (which then opens paused).
///
/// # Errors
/// `kind` cannot run on handed-over descriptors (only `tap` can).
pub fn offer_port(kind: &PortKind, fds: Vec<OwnedFd>) -> Result<(), String> {
    sluice_nic::handover::offer(kind, fds).map_err(|e| e.0)
}

/// Closes an offer no port took (the move failed).
pub fn withdraw_port(kind: &PortKind) {
    sluice_nic::handover::withdraw(kind);
}

/// Whether a port of `kind` can move to another daemon.
pub fn port_can_move(kind: &PortKind) -> bool {
    sluice_nic::handover::interface_of(kind).is_some()
}
