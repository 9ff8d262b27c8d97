//! Checkpoint and restore of a running NF: its state, one part per
//! instance (per worker, per replica), in a sealed file
//! (`sluice_nf::checkpoint`).
//!
//! A restore is checked whole before any instance changes: the file must
//! fit the NF (type, state version, number of instances) and every part
//! must be accepted by a scratch instance built from the NF's own recipe,
//! so a bad part is refused with the running NF untouched. Only then are
//! the parts sent to the workers, where each instance takes its part
//! between two batches (in ring order with its packets, for a process NF).

use std::sync::mpsc::sync_channel;
use std::time::Duration;

use sluice_nf::checkpoint::{Checkpoint, CheckpointError, Part};

use super::Runtime;
use crate::naming::instance_of;
use crate::worker::mailbox::{RestoreError, StatePart};
use crate::worker::Command;

/// Why a checkpoint or restore did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFailure {
    /// No NF of that name runs.
    NoSuchNf(String),
    /// This NF cannot be checkpointed now, and why.
    Unsupported(String),
    /// This NF's type keeps no state (nothing to checkpoint, nothing lost
    /// by starting it afresh).
    Stateless(String),
    /// The checkpoint file does not fit this NF.
    Refused(CheckpointError),
    /// A part of the file is not a state this NF accepts.
    Invalid(String),
    /// An instance failed or did not answer in time.
    Failed(String),
}

impl std::fmt::Display for StateFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateFailure::NoSuchNf(nf) => write!(f, "no NF named {nf:?} runs"),
            StateFailure::Unsupported(why)
            | StateFailure::Stateless(why)
            | StateFailure::Invalid(why) => f.write_str(why),
            StateFailure::Refused(e) => write!(f, "{e}"),
            StateFailure::Failed(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for StateFailure {}

/// How long the control thread waits for a worker's job (the worker's own
/// timeout, plus slack).
const WAIT: Duration = Duration::from_secs(12);

impl Runtime {
    /// The plan ids of spec NF `nf`'s current instances, in replica order,
    /// with its type and state version.
    fn state_targets(&self, nf: &str) -> Result<(Vec<u16>, &'static str, u16), StateFailure> {
        let mut ids: Vec<(u32, u16)> = Vec::new();
        let mut nf_type = None;
        let mut version = None;
        for (id, p) in self.plan.nfs.iter().enumerate() {
            let Some(p) = p else { continue };
            let of = instance_of(&p.name);
            if of.nf != nf {
                continue;
            }
            if p.draining {
                return Err(StateFailure::Unsupported(format!(
                    "{nf} is rolling out: checkpoint it when the old version has retired"
                )));
            }
            let per_flow = p
                .set
                .and_then(|s| self.plan.sets.get(s as usize)?.as_ref())
                .is_some_and(|s| s.steer.exclusive());
            if per_flow {
                return Err(StateFailure::Unsupported(format!(
                    "{nf} runs one instance per flow or class: each is reset when its flows end"
                )));
            }
            nf_type = Some(p.nf_type.name);
            version = p.state_version;
            ids.push((of.replica, id as u16));
        }
        let Some(nf_type) = nf_type else {
            return Err(StateFailure::NoSuchNf(nf.to_string()));
        };
        let Some(version) = version else {
            return Err(StateFailure::Stateless(format!(
                "a {nf_type} NF keeps no state to checkpoint"
            )));
        };
        ids.sort_unstable();
        Ok((
            ids.into_iter().map(|(_, id)| id).collect(),
            nf_type,
            version,
        ))
    }

    /// Exports spec NF `nf`'s state: every instance's, each taken between
    /// two of its batches while traffic flows.
    pub fn checkpoint(&self, nf: &str) -> Result<Checkpoint, StateFailure> {
        let (ids, nf_type, state_version) = self.state_targets(nf)?;
        let mut rxs = Vec::new();
        for w in 0..self.workers.len() {
            let (tx, rx) = sync_channel(1);
            self.post(w, Command::Checkpoint(ids.clone(), tx));
            rxs.push(rx);
        }
        let mut parts = Vec::new();
        for (w, rx) in rxs.into_iter().enumerate() {
            let got = rx
                .recv_timeout(WAIT)
                .map_err(|_| StateFailure::Failed(format!("worker {w} did not answer")))?
                .map_err(StateFailure::Failed)?;
            parts.extend(got.into_iter().map(|p: StatePart| Part {
                instance: format!("{}/worker{w}", p.instance),
                state: p.state,
            }));
        }
        Ok(Checkpoint {
            nf_type: nf_type.to_string(),
            state_version,
            nf: nf.to_string(),
            parts,
        })
    }

    /// Restores spec NF `nf` from `checkpoint`: all parts are checked
    /// first; then every instance takes its part.
    pub fn restore(&self, nf: &str, checkpoint: &Checkpoint) -> Result<(), StateFailure> {
        let (ids, nf_type, state_version) = self.state_targets(nf)?;
        checkpoint
            .check_fits(nf_type, state_version, ids.len() * self.workers.len())
            .map_err(StateFailure::Refused)?;
        // A scratch instance per id, built as the running ones were, so a
        // part no instance would take is refused before any takes its own.
        // An NF of one instance needs none: its own restore is all or
        // nothing.
        let single = checkpoint.parts.len() == 1;
        for (k, &id) in ids.iter().enumerate().filter(|_| !single) {
            let plan = self.plan.nfs[id as usize]
                .as_ref()
                .expect("state_targets returned it");
            let mut scratch = plan.recipe.build(self.registry, 0).map_err(|e| {
                StateFailure::Failed(format!(
                    "{}: cannot build a scratch instance: {e}",
                    plan.name
                ))
            })?;
            for (i, part) in checkpoint.parts.iter().enumerate() {
                if i % ids.len() == k {
                    scratch.restore(&part.state).map_err(|e| {
                        StateFailure::Invalid(format!(
                            "checkpoint part {i} ({}) is refused: {e}",
                            part.instance
                        ))
                    })?;
                }
            }
        }
        let mut rxs = Vec::new();
        for w in 0..self.workers.len() {
            let parts = checkpoint.parts[w * ids.len()..(w + 1) * ids.len()]
                .iter()
                .zip(&ids)
                .map(|(p, &id)| (id, p.state.clone()))
                .collect();
            let (tx, rx) = sync_channel(1);
            self.post(w, Command::Restore(parts, tx));
            rxs.push(rx);
        }
        let (mut errors, mut refused) = (Vec::new(), false);
        for (w, rx) in rxs.into_iter().enumerate() {
            match rx.recv_timeout(WAIT) {
                Ok(Ok(())) => {}
                Ok(Err(RestoreError::Refused(e))) => {
                    refused = true;
                    errors.push(e);
                }
                Ok(Err(RestoreError::Failed(e))) => errors.push(e),
                Err(_) => errors.push(format!("worker {w} did not answer")),
            }
        }
        match (errors.is_empty(), refused) {
            (true, _) => Ok(()),
            // Only an NF of one instance gets here with a part it refuses
            // (others were checked on a scratch instance): it is untouched.
            (false, true) => Err(StateFailure::Invalid(format!(
                "the checkpoint is refused: {}",
                errors.join("; ")
            ))),
            (false, false) => Err(StateFailure::Failed(errors.join("; "))),
        }
    }
}
