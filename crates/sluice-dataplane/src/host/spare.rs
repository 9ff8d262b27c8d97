//! The spare: a process each template forks ahead for the slot its
//! worker's next NF will most likely take, so that creating an NF is a
//! hand-over, not a fork (LightVM's pool of pre-created shells, seed 000
//! §2; the lifecycle issue's warm pool, for NFs created through the API).
//!
//! The fork is most of a start that the start itself does not need to
//! pay: on this project's 2-vCPU VM the template spent about 500 µs of CPU
//! in `fork` per NF (copying its page tables into pages the hypervisor
//! faults in), against an NF's whole start of 0.5–0.8 ms
//! (`docs/benchmarks.md`, "Spares"). A spare has paid it while the
//! platform was doing something else.
//!
//! Unlike a standby (`super::standby`), which is made from one NF's
//! request and serves only that NF's restarts, a spare is made before
//! anyone knows which NF it will be: it is forked bare, with its output
//! pipe and its parent-death signal, and waits, blocked in `read` on its
//! standard input (a pipe from the template), costing no CPU. The
//! protocol:
//!
//! - **Asked for** by the platform (`ToTemplate::Spare { slot }`) after
//!   each change that started process NFs on the worker, for the slot
//!   its runtime will hand out next. The slot must be known at the fork:
//!   the NF's unprivileged uid and limit groups are the slot's.
//! - **Taken** by the next start of that slot: the template writes the
//!   whole [`SpareStart`] (the request, the shell to take from the spare's
//!   own copy of the template's memory, the limit groups to join) down
//!   the pipe, and the spare goes on exactly as a freshly forked instance
//!   does: limit groups, trust domain, sandbox, its NF (from the shell
//!   when the template had built it before the spare's fork, else built
//!   there), its handles, the NF loop.
//! - **Replaced** when the platform asks for another slot (killed, a new
//!   one forked), and gone with the template (its parent-death signal).
//!   A start that cannot use it (another slot, a seccomp filter the
//!   spare's copy lacks, a message that does not fit the pipe) forks as
//!   without one.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::proto::SpawnRequest;
use super::shells::ShellId;

/// The longest [`SpareStart`] a spare reads: Linux's default pipe
/// buffer. The template hands over only what its pipe holds whole
/// ([`Spare::capacity`]: a pipe made past the user's pipe-page quota may
/// hold one page), so the write never blocks the template and the spare
/// reads it whole.
pub const START_MAX: usize = 64 * 1024 - LEN_BYTES;

/// Bytes of the length before the message.
const LEN_BYTES: usize = 4;

/// What the template hands a spare: everything a fork of the template
/// for this request would have had.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpareStart {
    /// The start.
    pub req: SpawnRequest,
    /// The shell to take the NF from (it was in the template before the
    /// spare's fork, so the spare's copy has it); `None`: build it.
    pub shell: Option<ShellId>,
    /// The `cgroup.procs` files of its limit groups, to join first.
    pub join: Vec<PathBuf>,
}

impl SpareStart {
    /// Its bytes on the pipe (length first); `None` when it is longer
    /// than [`START_MAX`].
    pub fn encode(&self) -> Option<Vec<u8>> {
        let body = postcard::to_allocvec(self).ok()?;
        if body.len() > START_MAX {
            return None;
        }
        let mut b = Vec::with_capacity(LEN_BYTES + body.len());
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&body);
        Some(b)
    }
}

/// In a spare: blocks until the template hands over a start on `input`;
/// `None` when the template let it go (end of file), the pipe broke or
/// the message is not a start.
pub fn wait_for_start(input: impl std::os::fd::AsFd) -> Option<SpareStart> {
    let mut len = [0u8; LEN_BYTES];
    read_exact(&input, &mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > START_MAX {
        return None;
    }
    let mut body = vec![0u8; len];
    read_exact(&input, &mut body)?;
    postcard::from_bytes(&body).ok()
}

/// Reads exactly `buf.len()` bytes; `None` at the end of `input` first.
pub(super) fn read_exact(input: &impl std::os::fd::AsFd, buf: &mut [u8]) -> Option<()> {
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::read(input, &mut buf[got..]) {
            Ok(0) => return None,
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return None,
        }
    }
    Some(())
}

/// The template's spare, as it knows it.
#[derive(Debug)]
pub struct Spare {
    /// The slot it was made for.
    pub slot: u32,
    /// Its pid.
    pub pid: i32,
    /// The write end of its standard input.
    pub handover: std::os::fd::OwnedFd,
    /// Shells with an id below this were in the template when it was
    /// forked, so its copy of the template's memory holds them.
    pub shells_before: ShellId,
    /// Its copy has the compiled seccomp allow-list.
    pub has_filter: bool,
    /// Bytes its empty pipe holds (`F_GETPIPE_SZ`).
    pub capacity: usize,
}

impl Spare {
    /// Whether it can run `req` taking `shell`: the request's slot, and
    /// the allow-list if the request needs it. (The shell is a matter of
    /// speed, not of fitness: without it the spare builds the NF.)
    pub fn fits(&self, req: &SpawnRequest) -> bool {
        self.slot == req.slot && (self.has_filter || !req.sandbox.seccomp)
    }

    /// `shell`, if the spare's copy of the template holds it.
    pub fn shell(&self, shell: Option<ShellId>) -> Option<ShellId> {
        shell.filter(|&id| id < self.shells_before)
    }

    /// Hands it `start`: true if the whole message went down the pipe.
    pub fn hand_over(&self, start: &SpareStart) -> bool {
        let Some(bytes) = start.encode().filter(|b| b.len() <= self.capacity) else {
            return false;
        };
        // The pipe is empty (one start per spare) and holds it: the one
        // write goes whole or fails.
        rustix::io::write(&self.handover, &bytes) == Ok(bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(slot: u32) -> SpareStart {
        SpareStart {
            req: SpawnRequest::test_request(slot),
            shell: Some(3),
            join: vec!["/sys/fs/cgroup/x/cgroup.procs".into()],
        }
    }

    fn spare(slot: u32, w: std::os::fd::OwnedFd) -> Spare {
        Spare {
            slot,
            // Above any pid the kernel hands out.
            pid: 0x3fff_fff0,
            handover: w,
            shells_before: 4,
            has_filter: false,
            capacity: 64 * 1024,
        }
    }

    #[test]
    fn a_start_goes_down_the_pipe_whole_and_comes_back_the_same() {
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        let s = spare(7, w);
        let mut st = start(7);
        st.req.name = "n58".into();
        assert!(s.hand_over(&st));
        let got = wait_for_start(&r).expect("a start");
        assert_eq!(got.req.name, "n58");
        assert_eq!(got.req.slot, 7);
        assert_eq!(got.shell, Some(3));
        assert_eq!(got.join, st.join);
    }

    #[test]
    fn the_end_of_the_pipe_or_a_torn_or_garbled_start_is_no_start() {
        // The template let it go.
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        drop(w);
        assert!(wait_for_start(&r).is_none());
        // Torn: a length, then less than it promised.
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        let bytes = start(1).encode().expect("fits");
        rustix::io::write(&w, &bytes[..bytes.len() - 1]).expect("write");
        drop(w);
        assert!(wait_for_start(&r).is_none());
        // A length beyond what a start may be.
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        rustix::io::write(&w, &u32::MAX.to_le_bytes()).expect("write");
        drop(w);
        assert!(wait_for_start(&r).is_none());
        // Bytes that are not a start.
        let (r, w) = rustix::pipe::pipe().expect("pipe");
        rustix::io::write(&w, &[3, 0, 0, 0, 0xff, 0xff, 0xff]).expect("write");
        drop(w);
        assert!(wait_for_start(&r).is_none());
    }

    #[test]
    fn a_start_too_long_for_the_pipe_is_not_handed_over() {
        let (_r, w) = rustix::pipe::pipe().expect("pipe");
        let s = spare(1, w);
        let mut st = start(1);
        st.req.name = "x".repeat(START_MAX);
        assert!(st.encode().is_none());
        assert!(!s.hand_over(&st));
        // One that fits a start but not this spare's pipe.
        let (_r, w) = rustix::pipe::pipe().expect("pipe");
        let mut small = spare(1, w);
        small.capacity = 4096;
        st.req.name = "x".repeat(5000);
        assert!(st.encode().is_some());
        assert!(!small.hand_over(&st));
    }

    #[test]
    fn a_spare_fits_its_own_slot_and_has_only_the_shells_made_before_it() {
        let (_r, w) = rustix::pipe::pipe().expect("pipe");
        let s = spare(5, w);
        let mut req = SpawnRequest::test_request(5);
        req.sandbox.seccomp = false;
        assert!(s.fits(&req));
        req.slot = 6;
        assert!(!s.fits(&req));
        // Made before the allow-list was compiled: not for an NF that
        // needs it.
        req.slot = 5;
        req.sandbox.seccomp = true;
        assert!(!s.fits(&req));
        assert_eq!(s.shell(Some(3)), Some(3));
        assert_eq!(s.shell(Some(4)), None);
        assert_eq!(s.shell(None), None);
    }
}
