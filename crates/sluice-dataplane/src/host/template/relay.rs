//! What the template relays to the platform of its NFs' output: the lines
//! of the pipes it reads itself (standbys and spares before their start,
//! every NF when the platform cannot take pipes), and the pipes it hands
//! over (`super::super::output`).

use rustix::event::epoll;

use super::super::output::READ_BUDGET;
use super::super::proto::FromTemplate;
use super::{Template, LOG_BACKLOG_MAX, TEMPLATE_SLOT};

impl Template<'_> {
    /// Relays the complete lines an NF wrote, if the template reads its
    /// output; with `flush` (it exited), also a last partial one.
    pub(super) fn read_output(&mut self, pid: i32, flush: bool) {
        let Some(c) = self.children.get_mut(&pid) else {
            return;
        };
        let Some(out) = &mut c.out else { return };
        let mut lines = Vec::new();
        if flush {
            out.drain(&mut lines);
        } else {
            out.read_lines(READ_BUDGET, false, &mut lines);
        }
        let (slot, generation) = (c.slot, c.generation);
        for line in lines {
            self.send_log(slot, generation, line);
        }
    }

    /// Offers the output pipe of child `pid` to the platform, if the
    /// platform takes them: the descriptor to name in `Spawned`. A
    /// standby's pipe was the template's to read until now: what it
    /// holds is relayed first.
    pub(super) fn offer_output(&mut self, pid: i32, standby: bool) -> Option<i32> {
        if !self.hello.output_to_platform {
            return None;
        }
        if standby {
            self.read_output(pid, true);
        }
        let out = self.children.get_mut(&pid)?.out.take()?;
        if standby {
            let _ = epoll::delete(&self.epoll, out.fd());
        }
        let fd = out.into_fd();
        let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
        self.offered.insert(pid, fd);
        Some(raw)
    }

    pub(super) fn send_log(&mut self, slot: u32, generation: u32, line: String) {
        if self.chan.queued() > LOG_BACKLOG_MAX {
            self.dropped_lines += 1;
            return;
        }
        if self.dropped_lines > 0 {
            let n = std::mem::take(&mut self.dropped_lines);
            let _ = self.chan.send(&FromTemplate::Log {
                slot: TEMPLATE_SLOT,
                generation: 0,
                line: format!("{n} NF output lines dropped (output flood)"),
            });
        }
        let _ = self.chan.send(&FromTemplate::Log {
            slot,
            generation,
            line,
        });
    }
}
