//! NFs taking a new config live, keeping their state (Click's live
//! reconfiguration; `NetworkFunction::reconfigure`).
//!
//! An inline NF takes the fresh instance's config at the commit, between
//! two passes. A process NF gets its new recipe as a message on its
//! receive ring (`sluice_mem::link_blob`), in order with its packets: the
//! packets queued before it are judged by the old config, those after it
//! by the new one. The commit answers once every such NF has said it took
//! the config (or after [`ANSWER_TIMEOUT_NS`]), so `sluice apply` returns
//! when the change is live. The recipe is also what the NF restarts from
//! from then on.

use sluice_mem::NotSent;

use super::mailbox::{Committed, Reconfigure, Reply};
use super::{Worker, MS};
use crate::inline_nf::Fault;
use crate::nf_rt::Exec;

/// How long a commit waits for process NFs to take their new configs.
pub const ANSWER_TIMEOUT_NS: u64 = 2_000 * MS;

/// A process NF's new config, sent or waiting for ring room.
pub(crate) struct Pending {
    nf: u16,
    msg: u32,
    bytes: Vec<u8>,
    sent: bool,
}

/// A commit waiting for process NFs to answer.
pub(crate) struct Awaiting {
    reply: Reply<Committed>,
    committed: Committed,
    pending: Vec<Pending>,
    deadline: u64,
}

impl<'a> Worker<'a> {
    /// Applies a change's live reconfigurations, then answers `reply` now
    /// or once the process NFs have taken theirs.
    pub(super) fn reconfigure(
        &mut self,
        list: Vec<Reconfigure>,
        mut committed: Committed,
        reply: Reply<Committed>,
        now: u64,
    ) {
        let mut pending = Vec::new();
        for r in list {
            match r {
                Reconfigure::Inline(id, fresh) => {
                    let Some(nf) = self.nf_mut(id) else { continue };
                    let name = nf.name.clone();
                    let mut panicked = None;
                    if let Exec::Inline(f) = &mut nf.exec {
                        // A crashed NF takes the fresh instance whole: its
                        // own state is not to be trusted, or called.
                        let outcome = if f.is_crashed() {
                            Err(fresh)
                        } else {
                            match f.call(|code| code.reconfigure(fresh)) {
                                Ok(taken) => taken,
                                // The fresh instance went with the call.
                                Err(Fault::Panicked(p)) => {
                                    panicked = Some(p);
                                    Ok(())
                                }
                                Err(Fault::Down) => Ok(()),
                            }
                        };
                        if let Err(fresh) = outcome {
                            // Not taken live: the fresh instance replaces it
                            // (an inline NF holds no packet between passes).
                            f.replace(fresh);
                            committed
                                .reconfigure_failed
                                .push(format!("{name}: replaced by a fresh instance"));
                        }
                    }
                    if let Some(p) = panicked {
                        // The crash takes its course (`inline_crash.rs`):
                        // a fresh instance from the new recipe.
                        let mut nothing = sluice_mem::HandleBatch::new();
                        self.inline_crashed(id, p, &mut nothing, now);
                    } else {
                        self.logbook.push(
                            &name,
                            self.cfg.index,
                            "platform",
                            "new config taken".into(),
                        );
                    }
                }
                Reconfigure::Process(id, recipe) => {
                    let Some(p) = self.nf_mut(id).and_then(|n| n.process()) else {
                        continue;
                    };
                    let recipe_bytes = postcard::to_stdvec(&*recipe).unwrap_or_default();
                    let bytes = crate::nf_msg::NfMsg::Config(&recipe_bytes).encode();
                    p.spawn.recipe = *recipe;
                    self.next_msg = self.next_msg.wrapping_add(1);
                    pending.push(Pending {
                        nf: id,
                        msg: self.next_msg,
                        bytes,
                        sent: false,
                    });
                }
            }
        }
        if pending.is_empty() {
            let _ = reply.send(committed);
            return;
        }
        self.cmd.awaiting = Some(Awaiting {
            reply,
            committed,
            pending,
            deadline: now + ANSWER_TIMEOUT_NS,
        });
        self.advance_reconfigs(now);
    }

    /// Sends the messages that waited for room, and answers the commit
    /// once all were answered (or the wait timed out).
    pub(super) fn advance_reconfigs(&mut self, now: u64) {
        let Some(mut a) = self.cmd.awaiting.take() else {
            return;
        };
        let arena = self.arena;
        for p in a.pending.iter_mut().filter(|p| !p.sent) {
            let Some(nf) = self.nfs.get_mut(p.nf as usize).and_then(Option::as_mut) else {
                continue;
            };
            let name = nf.name.clone();
            let Some(proc_) = nf.process() else { continue };
            if !proc_.phase.accepts() {
                // Down: it restarts from the new recipe anyway.
                p.sent = true;
                p.msg = 0;
                continue;
            }
            match proc_
                .link
                .send_blob(arena, &mut self.cache, p.msg, &p.bytes)
            {
                Ok(()) => {
                    p.sent = true;
                    proc_.link.wake();
                    // Some of its ring's room went (`room_floor`).
                    self.room_floor.forget();
                }
                Err(NotSent::NoRoom) => {}
                Err(NotSent::TooLarge) | Err(NotSent::Corrupt(_)) => {
                    p.sent = true;
                    p.msg = 0;
                    a.committed.reconfigure_failed.push(format!(
                        "{name}: the config could not be sent; it applies at the next restart"
                    ));
                }
            }
        }
        a.pending.retain(|p| p.msg != 0);
        if a.pending.is_empty() || now >= a.deadline {
            for p in &a.pending {
                let name = self
                    .nf_mut(p.nf)
                    .map(|n| n.name.clone())
                    .unwrap_or_default();
                a.committed.reconfigure_failed.push(format!(
                    "{name}: no answer yet; it takes the config when it gets to it"
                ));
            }
            let _ = a.reply.send(a.committed);
        } else {
            self.cmd.awaiting = Some(a);
        }
    }

    /// Reads the answers NF `i` handed back (its message buffers return to
    /// the pool either way).
    pub(super) fn take_answers(&mut self, i: u16) {
        let arena = self.arena;
        let Some(nf) = self.nfs.get_mut(i as usize).and_then(Option::as_mut) else {
            return;
        };
        // Checked every pass for every process NF: nothing is allocated
        // unless an answer is there (the name is cloned only then).
        if !nf.process_ref().is_some_and(|p| p.link.has_blob_answers()) {
            return;
        }
        let name = nf.name.clone();
        let Some(p) = nf.process() else { return };
        let answers = p.link.take_blob_answers(arena, &mut self.cache);
        for ans in answers {
            if self.state_answer(i, &ans) {
                continue;
            }
            let line = if ans.done {
                "new config taken".to_string()
            } else {
                format!("new config refused: {}", ans.text)
            };
            self.logbook.push(&name, self.cfg.index, "platform", line);
            if let Some(a) = &mut self.cmd.awaiting {
                if !ans.done {
                    a.committed
                        .reconfigure_failed
                        .push(format!("{name}: {}", ans.text));
                }
                a.pending.retain(|p| !(p.nf == i && p.msg == ans.id));
            }
        }
    }
}
