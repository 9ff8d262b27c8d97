//! What NF processes write on stdout and stderr, cut into log lines.
//!
//! Each NF writes into a pipe of its own. The template makes the pipe
//! when it forks the NF and, where it can, hands the read end to the
//! platform at once ([`super::proto::FromTemplate::Spawned`]'s `output`,
//! taken with `pidfd_getfd`), so the template holds no descriptor per NF.
//! A template that held the read end of every NF's pipe made each fork
//! copy a descriptor table of every NF, and each new NF close all of them
//! before it ran: a fifth of the template's time at 1,000 NFs, a cost
//! per create that grew with the NFs (`docs/benchmarks.md`, "NF
//! instantiation").
//!
//! The platform's side, [`Outputs`], is read by the worker's host poll
//! (each maintenance pass): one `epoll_wait` that returns at once, then
//! the pipes that have bytes, within a budget per pass so an NF that
//! floods its output cannot hold the worker; the flooding NF then waits
//! on its own full pipe, as a process writing to a slow reader does. When
//! an NF exits, its pipe is read to the end before its exit is reported,
//! so its last lines come first.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};

use rustix::event::epoll;

use super::HostEvent;

/// Longest line relayed (longer ones are cut).
pub(super) const LINE_MAX: usize = 4096;

/// Bytes read from one NF per look (a chatty NF cannot starve the others).
pub(super) const READ_BUDGET: usize = 64 * 1024;

/// Bytes the platform reads from all NFs per pass.
const PASS_BUDGET: usize = 64 * 1024;

/// Pipes the platform looks at per pass.
const READY_MAX: usize = 64;

/// One NF's output pipe and the start of a line not yet ended.
#[derive(Debug)]
pub(super) struct NfOutput {
    fd: OwnedFd,
    partial: Vec<u8>,
}

impl NfOutput {
    /// The read end `fd` (non-blocking).
    pub(super) fn new(fd: OwnedFd) -> NfOutput {
        NfOutput {
            fd,
            partial: Vec::new(),
        }
    }

    /// The pipe.
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Reads until the pipe is empty, then ends the last line: for an NF
    /// that exited (its pipe ends), or whose pipe changes hands. Only the
    /// last read ends a line without a newline (one cut by a read's
    /// budget goes on in the next).
    pub(super) fn drain(&mut self, lines: &mut Vec<String>) {
        while self.read_lines(READ_BUDGET, false, lines) > 0 {}
        self.read_lines(0, true, lines);
    }

    /// The pipe, without what was read of it.
    pub(super) fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// Reads up to `budget` bytes and appends the complete lines; with
    /// `ended` (the NF exited), also the last partial one. Returns the
    /// bytes read.
    pub(super) fn read_lines(
        &mut self,
        budget: usize,
        ended: bool,
        lines: &mut Vec<String>,
    ) -> usize {
        let mut buf = [0u8; 8192];
        let mut read = 0;
        while read < budget {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    self.partial.extend_from_slice(&buf[..n]);
                    read += n;
                }
            }
        }
        let mut at = 0;
        while let Some(i) = self.partial[at..].iter().position(|&b| b == b'\n') {
            let line = &self.partial[at..at + i];
            lines.push(String::from_utf8_lossy(&line[..line.len().min(LINE_MAX)]).into_owned());
            at += i + 1;
        }
        self.partial.drain(..at);
        if self.partial.len() >= LINE_MAX || (ended && !self.partial.is_empty()) {
            let rest = &self.partial[..self.partial.len().min(LINE_MAX)];
            lines.push(String::from_utf8_lossy(rest).into_owned());
            self.partial.clear();
        }
        read
    }
}

/// An NF's output as the platform reads it.
struct Watched {
    slot: u32,
    generation: u32,
    out: NfOutput,
}

/// The output pipes of a worker's NF processes, by pid (the platform's
/// side; see the module docs).
pub(super) struct Outputs {
    epoll: OwnedFd,
    by_pid: HashMap<i32, Watched>,
    /// Lines of one read.
    lines: Vec<String>,
}

impl Outputs {
    /// An empty set.
    pub(super) fn new() -> std::io::Result<Outputs> {
        Ok(Outputs {
            epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            by_pid: HashMap::new(),
            lines: Vec::new(),
        })
    }

    /// Watches `fd`, the output of process `pid` (slot `slot`, start
    /// `generation`).
    pub(super) fn watch(
        &mut self,
        pid: i32,
        slot: u32,
        generation: u32,
        fd: OwnedFd,
    ) -> std::io::Result<()> {
        rustix::io::ioctl_fionbio(&fd, true)?;
        epoll::add(
            &self.epoll,
            fd.as_fd(),
            epoll::EventData::new_u64(pid as u64),
            epoll::EventFlags::IN,
        )?;
        let out = NfOutput::new(fd);
        self.by_pid.insert(
            pid,
            Watched {
                slot,
                generation,
                out,
            },
        );
        Ok(())
    }

    /// Pipes watched.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_pid.len()
    }

    /// Reads the pipes that have bytes, within the pass's budget (up to
    /// [`READY_MAX`] pipes a pass; `epoll` lists a pipe still readable
    /// after its read at the end, so a flood does not keep others
    /// waiting).
    pub(super) fn read_ready(&mut self, events: &mut Vec<HostEvent>) {
        if self.by_pid.is_empty() {
            return;
        }
        let mut space = [MaybeUninit::<epoll::Event>::uninit(); READY_MAX];
        let none = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let Ok((ready, _)) = epoll::wait(&self.epoll, &mut space[..], Some(&none)) else {
            return;
        };
        let mut budget = PASS_BUDGET;
        for ev in ready.iter() {
            if budget == 0 {
                break;
            }
            let pid = ev.data.u64() as i32;
            budget = budget.saturating_sub(self.read(pid, budget.min(READ_BUDGET), events));
        }
    }

    /// Process `pid` exited: reads its pipe to the end (its last lines,
    /// before its exit is reported) and stops watching it.
    pub(super) fn ended(&mut self, pid: i32, events: &mut Vec<HostEvent>) {
        // Its write ends are closed: the reads end at the pipe's end.
        let Some(mut w) = self.by_pid.remove(&pid) else {
            return;
        };
        let _ = epoll::delete(&self.epoll, w.out.fd());
        w.out.drain(&mut self.lines);
        for line in self.lines.drain(..) {
            events.push(HostEvent::Log {
                slot: w.slot,
                generation: w.generation,
                line,
            });
        }
    }

    /// Every process is gone (the template died): reads what each left.
    pub(super) fn end_all(&mut self, events: &mut Vec<HostEvent>) {
        let mut pids: Vec<i32> = self.by_pid.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            self.ended(pid, events);
        }
    }

    /// Reads up to `budget` bytes of `pid`'s pipe: their complete lines.
    fn read(&mut self, pid: i32, budget: usize, events: &mut Vec<HostEvent>) -> usize {
        let Some(w) = self.by_pid.get_mut(&pid) else {
            return 0;
        };
        let n = w.out.read_lines(budget, false, &mut self.lines);
        for line in self.lines.drain(..) {
            events.push(HostEvent::Log {
                slot: w.slot,
                generation: w.generation,
                line,
            });
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe() -> (OwnedFd, OwnedFd) {
        sluice_sys::output_pipe().unwrap()
    }

    fn lines_of(events: &[HostEvent]) -> Vec<(u32, String)> {
        events
            .iter()
            .filter_map(|e| match e {
                HostEvent::Log { slot, line, .. } => Some((*slot, line.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn lines_are_cut_at_newlines_long_ones_at_the_limit_and_the_last_one_at_the_end() {
        let (r, w) = pipe();
        let mut out = NfOutput::new(r);
        let mut lines = Vec::new();
        rustix::io::write(&w, b"one\ntwo\nthr").unwrap();
        out.read_lines(READ_BUDGET, false, &mut lines);
        assert_eq!(lines, ["one", "two"], "a partial line waits");
        rustix::io::write(&w, b"ee\n").unwrap();
        let long = vec![b'x'; LINE_MAX + 10];
        rustix::io::write(&w, &long).unwrap();
        lines.clear();
        out.read_lines(READ_BUDGET, false, &mut lines);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], "three");
        assert_eq!(lines[1].len(), LINE_MAX, "cut at the limit");
        rustix::io::write(&w, b"\xffend").unwrap();
        drop(w);
        lines.clear();
        out.read_lines(READ_BUDGET, true, &mut lines);
        assert_eq!(
            lines,
            ["\u{fffd}end"],
            "the rest at the end, bytes made text"
        );
    }

    #[test]
    fn an_ended_nf_is_read_to_the_end_and_forgotten() {
        let mut o = Outputs::new().unwrap();
        let (r1, w1) = pipe();
        let (r2, w2) = pipe();
        o.watch(100, 1, 0, r1).unwrap();
        o.watch(200, 2, 0, r2).unwrap();
        rustix::io::write(&w1, b"a\n").unwrap();
        let mut ev = Vec::new();
        o.read_ready(&mut ev);
        assert_eq!(lines_of(&ev), [(1, "a".to_string())]);
        // More than one read's worth, then the exit: all of it, in order.
        let many: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("{i}\n").into_bytes())
            .collect();
        let writer = std::thread::spawn(move || {
            let mut at = 0;
            while at < many.len() {
                at += rustix::io::write(&w2, &many[at..]).unwrap();
            }
            rustix::io::write(&w2, b"last").unwrap();
        });
        let mut got = Vec::new();
        while !writer.is_finished() {
            let mut ev = Vec::new();
            o.read_ready(&mut ev);
            got.extend(lines_of(&ev));
        }
        writer.join().unwrap();
        let mut ev = Vec::new();
        o.ended(200, &mut ev);
        got.extend(lines_of(&ev));
        assert_eq!(got.len(), 20_001);
        assert!(got
            .iter()
            .take(20_000)
            .enumerate()
            .all(|(i, (s, l))| *s == 2 && *l == i.to_string()));
        assert_eq!(got[20_000].1, "last");
        assert_eq!(o.len(), 1);
        drop(w1);
    }

    #[test]
    fn an_exit_with_more_than_a_read_waiting_keeps_every_line_whole() {
        let mut o = Outputs::new().unwrap();
        let (r, w) = pipe();
        rustix::pipe::fcntl_setpipe_size(&w, 4 * READ_BUDGET).unwrap();
        o.watch(9, 9, 0, r).unwrap();
        // Lines of 7 bytes: a read of 64 KiB ends inside one.
        let text: Vec<u8> = (0..30_000)
            .flat_map(|i| format!("{:06}\n", i % 1_000_000).into_bytes())
            .collect();
        let mut at = 0;
        while at < text.len() {
            at += rustix::io::write(&w, &text[at..]).unwrap();
        }
        rustix::io::write(&w, b"tail").unwrap();
        drop(w);
        let mut ev = Vec::new();
        o.ended(9, &mut ev);
        let got = lines_of(&ev);
        assert_eq!(got.len(), 30_001);
        assert!(got
            .iter()
            .take(30_000)
            .enumerate()
            .all(|(i, (_, l))| *l == format!("{i:06}")));
        assert_eq!(got[30_000].1, "tail");
    }

    #[test]
    fn a_pass_reads_at_most_its_budget() {
        let mut o = Outputs::new().unwrap();
        let (r, w) = pipe();
        o.watch(7, 7, 0, r).unwrap();
        let line = [b'y'; 99].iter().chain(b"\n").copied().collect::<Vec<u8>>();
        // Four passes' worth waiting in the pipe.
        rustix::pipe::fcntl_setpipe_size(&w, 4 * PASS_BUDGET).unwrap();
        let mut written = 0;
        rustix::io::ioctl_fionbio(&w, true).unwrap();
        while let Ok(n) = rustix::io::write(&w, &line) {
            written += n;
        }
        assert!(written > 2 * PASS_BUDGET);
        let mut ev = Vec::new();
        o.read_ready(&mut ev);
        assert!(ev.len() * 100 <= PASS_BUDGET + 8192, "{} lines", ev.len());
        let mut total = ev.len();
        loop {
            let mut ev = Vec::new();
            o.read_ready(&mut ev);
            if ev.is_empty() {
                break;
            }
            total += ev.len();
        }
        assert_eq!(total * 100, written, "every line, over several passes");
    }
}
