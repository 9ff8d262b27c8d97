//! Checkpoint and restore of this worker's NF instances (`sluice
//! checkpoint`, `sluice restore`).
//!
//! An inline NF is read or written at once, between two passes. A process
//! NF is asked over its message channel (`crate::nf_msg`), in order with
//! its packets, one chunk per round trip: the worker keeps passing packets
//! meanwhile, and the job answers when every instance has answered, one has
//! refused, or [`STATE_TIMEOUT_NS`] has passed. One job at a time.

use sluice_mem::NotSent;

use super::mailbox::{Reply, RestoreError, StatePart};
use super::{Worker, MS};
use crate::inline_nf::{panic_message, Fault};
use crate::nf_msg::{read_chunk, NfMsg};
use crate::nf_rt::Exec;

/// How long a job waits for its process NFs.
pub const STATE_TIMEOUT_NS: u64 = 10_000 * MS;

/// State bytes per restore message (a message is at most
/// `link_blob::MAX_BYTES`; the kind, offset and total take 9).
const RESTORE_CHUNK: usize = sluice_mem::link_blob::MAX_BYTES - 16;

/// Who waits for the job.
pub(crate) enum JobReply {
    /// `Command::Checkpoint`.
    Export(Reply<Result<Vec<StatePart>, String>>),
    /// `Command::Restore`.
    Import(Reply<Result<(), RestoreError>>),
}

/// One instance's part of the job.
struct Item {
    nf: u16,
    name: String,
    /// The message in flight (0: none).
    msg: u32,
    /// Export: the bytes received; import: the whole state.
    bytes: Vec<u8>,
    /// Import: bytes the NF has taken; export: the state's length once known.
    at: usize,
    /// Import: the length of the chunk in flight.
    sending: usize,
    done: bool,
}

/// A checkpoint or restore in progress.
pub(crate) struct StateJob {
    reply: JobReply,
    items: Vec<Item>,
    errors: Vec<String>,
    /// An instance refused its state (rather than failing to answer).
    refused: bool,
    deadline: u64,
}

impl<'a> Worker<'a> {
    /// Starts exporting the state of NFs `ids`.
    pub(super) fn start_checkpoint(
        &mut self,
        ids: Vec<u16>,
        reply: Reply<Result<Vec<StatePart>, String>>,
        now: u64,
    ) {
        let items = ids.into_iter().map(|id| (id, Vec::new())).collect();
        self.start_state_job(items, JobReply::Export(reply), now);
    }

    /// Starts restoring `parts` (NF id, state) into this worker's NFs.
    pub(super) fn start_restore(
        &mut self,
        parts: Vec<(u16, Vec<u8>)>,
        reply: Reply<Result<(), RestoreError>>,
        now: u64,
    ) {
        self.start_state_job(parts, JobReply::Import(reply), now);
    }

    fn start_state_job(&mut self, parts: Vec<(u16, Vec<u8>)>, reply: JobReply, now: u64) {
        let mut job = StateJob {
            reply,
            items: Vec::with_capacity(parts.len()),
            errors: Vec::new(),
            refused: false,
            deadline: now + STATE_TIMEOUT_NS,
        };
        if self.cmd.state_job.is_some() {
            job.errors
                .push("a checkpoint or restore is already in progress".into());
            return finish(job);
        }
        let import = matches!(job.reply, JobReply::Import(_));
        let mut crashed = Vec::new();
        for (id, bytes) in parts {
            let Some(nf) = self.nf_mut(id) else {
                job.errors.push(format!("NF {id} does not run here"));
                continue;
            };
            let mut item = Item {
                nf: id,
                name: nf.name.clone(),
                msg: 0,
                bytes,
                at: 0,
                sending: 0,
                done: false,
            };
            match &mut nf.exec {
                Exec::Inline(f) => {
                    let bytes = &mut item.bytes;
                    let called = f.call(|code| {
                        if import {
                            code.restore(bytes).map_err(|e| e.to_string())
                        } else {
                            let mut w = sluice_nf::StateWriter::new();
                            code.checkpoint(&mut w);
                            *bytes = w.into_bytes();
                            Ok(())
                        }
                    });
                    let failed = match called {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(e),
                        Err(Fault::Down) => Some("its code panicked; it is down".to_string()),
                        Err(Fault::Panicked(p)) => {
                            let why = format!("its code panicked: {}", panic_message(p.as_ref()));
                            crashed.push((id, p));
                            Some(why)
                        }
                    };
                    if let Some(e) = failed {
                        job.errors.push(format!("{}: {e}", item.name));
                        job.refused |= import;
                    }
                    item.done = true;
                }
                Exec::Process(p) if !p.phase.alive() || !p.phase.accepts() => {
                    job.errors
                        .push(format!("{}: its process is not running", item.name));
                }
                Exec::Process(_) => {}
            }
            job.items.push(item);
        }
        for (id, p) in crashed {
            self.inline_crashed(id, p, &mut sluice_mem::HandleBatch::new(), now);
        }
        self.cmd.state_job = Some(job);
        self.advance_state_job(now);
    }

    /// Sends the next chunks, and answers the job once it is over.
    pub(super) fn advance_state_job(&mut self, now: u64) {
        let Some(mut job) = self.cmd.state_job.take() else {
            return;
        };
        let arena = self.arena;
        let import = matches!(job.reply, JobReply::Import(_));
        for item in job.items.iter_mut().filter(|i| !i.done && i.msg == 0) {
            if !job.errors.is_empty() {
                break;
            }
            let Some(p) = self.nfs.get_mut(item.nf as usize).and_then(Option::as_mut) else {
                job.errors.push(format!("{}: removed", item.name));
                continue;
            };
            let Some(proc_) = p.process() else { continue };
            if !proc_.phase.alive() {
                job.errors.push(format!("{}: its process ended", item.name));
                continue;
            }
            let msg = if import {
                item.sending = (item.bytes.len() - item.at).min(RESTORE_CHUNK);
                NfMsg::Restore {
                    offset: item.at as u32,
                    total: item.bytes.len() as u32,
                    chunk: &item.bytes[item.at..item.at + item.sending],
                }
                .encode()
            } else {
                NfMsg::Checkpoint {
                    offset: item.bytes.len() as u32,
                }
                .encode()
            };
            self.next_msg = self.next_msg.wrapping_add(1).max(1);
            match proc_
                .link
                .send_blob(arena, &mut self.cache, self.next_msg, &msg)
            {
                Ok(()) => {
                    item.msg = self.next_msg;
                    proc_.link.wake();
                    // Some of its ring's room went (`room_floor`).
                    self.room_floor.forget();
                }
                Err(NotSent::NoRoom) => {}
                Err(e) => job.errors.push(format!("{}: not sent ({e:?})", item.name)),
            }
        }
        let over = !job.errors.is_empty() || job.items.iter().all(|i| i.done);
        if over || now >= job.deadline {
            if !over {
                for i in job.items.iter().filter(|i| !i.done) {
                    job.errors.push(format!("{}: no answer in time", i.name));
                }
            }
            finish(job);
        } else {
            self.cmd.state_job = Some(job);
        }
    }

    /// Takes NF `nf`'s answer to message `msg`, if it belongs to the job.
    pub(super) fn state_answer(&mut self, nf: u16, ans: &sluice_mem::link_blob::Answer) -> bool {
        let Some(job) = &mut self.cmd.state_job else {
            return false;
        };
        let Some(item) = job
            .items
            .iter_mut()
            .find(|i| i.nf == nf && i.msg == ans.id && i.msg != 0)
        else {
            return false;
        };
        item.msg = 0;
        match (&ans.data, ans.done) {
            (Some(data), _) => match read_chunk(data) {
                Some((total, chunk)) if item.bytes.len() + chunk.len() <= total as usize => {
                    item.bytes.extend_from_slice(chunk);
                    item.done = item.bytes.len() == total as usize;
                    if chunk.is_empty() && !item.done {
                        job.errors.push(format!("{}: empty state chunk", item.name));
                    }
                }
                _ => job
                    .errors
                    .push(format!("{}: malformed state chunk", item.name)),
            },
            (None, true) => {
                item.at += item.sending;
                item.done = ans.text == "restored";
                if !item.done && item.at >= item.bytes.len() {
                    job.errors.push(format!("{}: {}", item.name, ans.text));
                }
            }
            (None, false) => {
                job.errors.push(format!("{}: {}", item.name, ans.text));
                job.refused |= matches!(job.reply, JobReply::Import(_));
            }
        }
        true
    }
}

fn finish(job: StateJob) {
    let result = if job.errors.is_empty() {
        Ok(())
    } else {
        Err(job.errors.join("; "))
    };
    match job.reply {
        JobReply::Import(reply) => {
            let _ = reply.send(result.map_err(|e| {
                if job.refused {
                    RestoreError::Refused(e)
                } else {
                    RestoreError::Failed(e)
                }
            }));
        }
        JobReply::Export(reply) => {
            let parts = job
                .items
                .into_iter()
                .map(|i| StatePart {
                    nf: i.nf,
                    instance: i.name,
                    state: i.bytes,
                })
                .collect();
            let _ = reply.send(result.map(|()| parts));
        }
    }
}
