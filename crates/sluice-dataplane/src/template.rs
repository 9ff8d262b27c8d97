//! The NF template process ("zygote").
//!
//! Forked from the platform once, right after the arena is mapped and
//! before any thread exists, the template holds the compiled plan and the
//! arena mapping. Every process NF is a fork of it, so NF processes inherit
//! the arena at the same address and start without exec, dynamic loading or
//! re-parsing anything (LightVM's split toolstack, seed 000 §2: the slow,
//! shared work is done once; the per-instance path is one fork).
//!
//! The platform talks to the template over a socket pair with a tiny line
//! protocol:
//!
//! ```text
//! platform → template:  spawn <slot> <generation>      quit
//! template → platform:  spawned <slot> <generation> <pid>
//!                       exited <slot> <generation> <pid> code <n> | signal <n>
//! ```
//!
//! `<slot>` is the NF's index in the plan. With several workers each worker
//! has a template of its own, forked before any worker thread starts; its
//! NFs use that worker's arena slots and wake word, and share its core.
//!
//! The template dies with the platform (PR_SET_PDEATHSIG) and NF processes
//! die with the template, so no NF outlives a crashed platform.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;

use sluice_mem::Arena;
use sluice_spec::Spec;
use sluice_sys::{ExitStatus, Forked, Pid};

use crate::nf_process::{exit_code, run_nf_loop, LoopConfig};
use crate::plan::Plan;

/// A message from the template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateEvent {
    /// NF process created.
    Spawned {
        /// NF index in the plan.
        slot: u32,
        /// Generation requested.
        generation: u32,
        /// Its pid.
        pid: i32,
    },
    /// NF process ended.
    Exited {
        /// NF index in the plan.
        slot: u32,
        /// Generation it was started as.
        generation: u32,
        /// Its pid.
        pid: i32,
        /// How it ended.
        status: ExitStatus,
    },
}

/// A non-blocking, line-oriented socket.
struct LineChannel {
    sock: UnixStream,
    inbuf: Vec<u8>,
    closed: bool,
}

impl LineChannel {
    fn new(sock: UnixStream) -> io::Result<Self> {
        sock.set_nonblocking(true)?;
        Ok(LineChannel {
            sock,
            inbuf: Vec::new(),
            closed: false,
        })
    }

    fn send(&mut self, line: &str) -> io::Result<()> {
        let mut msg = line.as_bytes().to_vec();
        msg.push(b'\n');
        let mut off = 0;
        while off < msg.len() {
            match self.sock.write(&msg[off..]) {
                Ok(n) => off += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_micros(50))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads what is available and returns complete lines.
    fn recv_lines(&mut self) -> Vec<String> {
        let mut buf = [0u8; 4096];
        loop {
            match self.sock.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    break;
                }
                Ok(n) => self.inbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.closed = true;
                    break;
                }
            }
        }
        let mut lines = Vec::new();
        while let Some(i) = self.inbuf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.inbuf.drain(..=i).collect();
            lines.push(String::from_utf8_lossy(&line[..i]).into_owned());
        }
        lines
    }
}

/// The platform's handle on its template.
pub struct Template {
    pid: Pid,
    chan: LineChannel,
}

/// What the template needs to build NFs.
pub struct TemplateInputs<'a> {
    /// The shared arena.
    pub arena: &'a Arena,
    /// The compiled plan.
    pub plan: &'a Plan,
    /// The spec (NF configs).
    pub spec: &'a Spec,
    /// Batch size for NF loops.
    pub batch: usize,
    /// The worker this template serves: its NFs use arena slots
    /// `worker * nfs ..` and wake that worker's wake word.
    pub worker: u32,
    /// How many workers run (more than one: each NF shares its worker's
    /// core, see [`crate::shard`]).
    pub workers: u32,
}

impl Template {
    /// Forks the template. Must be called while the process is still
    /// single-threaded (it fails otherwise).
    pub fn start(inputs: TemplateInputs<'_>) -> io::Result<Template> {
        let (ours, theirs) = UnixStream::pair()?;
        let platform = sluice_sys::getpid();
        match sluice_sys::fork_single_threaded()? {
            Forked::Child => {
                drop(ours);
                let code = template_main(theirs, platform, &inputs);
                std::process::exit(code);
            }
            Forked::Parent(pid) => {
                drop(theirs);
                Ok(Template {
                    pid,
                    chan: LineChannel::new(ours)?,
                })
            }
        }
    }

    /// Asks for NF slot `slot` to be (re)started as `generation`.
    pub fn spawn(&mut self, slot: u32, generation: u32) -> io::Result<()> {
        self.chan.send(&format!("spawn {slot} {generation}"))
    }

    /// Collects the template's messages received so far (non-blocking).
    pub fn poll(&mut self) -> Vec<TemplateEvent> {
        self.chan
            .recv_lines()
            .iter()
            .filter_map(|l| parse_event(l))
            .collect()
    }

    /// Waits up to `ms` for a message.
    pub fn wait(&mut self, ms: i32) -> Vec<TemplateEvent> {
        let _ = sluice_sys::wait_readable(self.chan.sock.as_fd(), ms);
        self.poll()
    }

    /// Whether the template's socket closed (the template died).
    pub fn is_gone(&self) -> bool {
        self.chan.closed
    }

    /// Stops the template: it SIGKILLs any NF process still alive, reaps
    /// them, reports their exits and exits itself. Returns the final events.
    pub fn shutdown(mut self) -> Vec<TemplateEvent> {
        let _ = self.chan.send("quit");
        let mut events = Vec::new();
        let deadline = sluice_sys::monotonic_ns() + 3_000_000_000;
        while !self.chan.closed && sluice_sys::monotonic_ns() < deadline {
            events.extend(self.wait(50));
        }
        if !self.chan.closed {
            let _ = sluice_sys::kill(self.pid);
        }
        let _ = sluice_sys::wait_for(self.pid);
        events
    }
}

fn parse_event(line: &str) -> Option<TemplateEvent> {
    let w: Vec<&str> = line.split_whitespace().collect();
    match w.as_slice() {
        ["spawned", slot, generation, pid] => Some(TemplateEvent::Spawned {
            slot: slot.parse().ok()?,
            generation: generation.parse().ok()?,
            pid: pid.parse().ok()?,
        }),
        ["exited", slot, generation, pid, kind, n] => Some(TemplateEvent::Exited {
            slot: slot.parse().ok()?,
            generation: generation.parse().ok()?,
            pid: pid.parse().ok()?,
            status: match *kind {
                "code" => ExitStatus::Code(n.parse().ok()?),
                _ => ExitStatus::Signal(n.parse().ok()?),
            },
        }),
        _ => None,
    }
}

fn status_words(s: &ExitStatus) -> String {
    match s {
        ExitStatus::Code(c) => format!("code {c}"),
        ExitStatus::Signal(n) => format!("signal {n}"),
    }
}

/// What the template loop decided to do next.
enum Next {
    /// This process is a new NF child: run it. `generation` counts its
    /// starts in this run (1 for the first, then one more per restart).
    BecomeNf { index: u32, generation: u32 },
    /// Exit the template with this code.
    Exit(i32),
}

fn template_main(sock: UnixStream, platform: Pid, inputs: &TemplateInputs<'_>) -> i32 {
    let _ = sluice_sys::die_with_parent(platform);
    sluice_sys::ignore_terminal_signals();
    sluice_sys::set_thread_name("sluice-template");
    let Ok(mut chan) = LineChannel::new(sock) else {
        return 1;
    };
    match template_loop(&mut chan, inputs) {
        Next::Exit(code) => code,
        Next::BecomeNf { index, generation } => {
            // Close the channel so only the template holds the platform's peer.
            drop(chan);
            nf_main(index, generation, inputs)
        }
    }
}

/// An NF process the template forked.
struct Child {
    slot: u32,
    generation: u32,
    /// Readable once it exits; `None` where pidfds are unsupported.
    exit_fd: Option<OwnedFd>,
}

/// Longest the template sleeps when every child has an exit descriptor
/// (a safety net only: requests and exits wake it).
const IDLE_WAIT_MS: i32 = 1000;

/// How often it checks for exits when some child has no exit descriptor.
const EXIT_POLL_MS: i32 = 5;

fn template_loop(chan: &mut LineChannel, inputs: &TemplateInputs<'_>) -> Next {
    let me = sluice_sys::getpid();
    let mut children: HashMap<i32, Child> = HashMap::new();
    let mut quitting = false;
    loop {
        if !quitting {
            // Sleep until the platform writes or a child exits: the
            // template shares the data-plane cores, and waking it on a
            // timer (200 times a second) preempts whichever NF or worker
            // runs there.
            let mut fds = vec![chan.sock.as_fd()];
            fds.extend(
                children
                    .values()
                    .filter_map(|c| c.exit_fd.as_ref())
                    .map(|f| f.as_fd()),
            );
            let timeout = if fds.len() == children.len() + 1 {
                IDLE_WAIT_MS
            } else {
                EXIT_POLL_MS
            };
            let _ = sluice_sys::wait_any_readable(&fds, timeout);
            for line in chan.recv_lines() {
                let w: Vec<&str> = line.split_whitespace().collect();
                match w.as_slice() {
                    ["spawn", slot, generation] => {
                        let (Ok(slot), Ok(generation)) =
                            (slot.parse::<u32>(), generation.parse::<u32>())
                        else {
                            continue;
                        };
                        if slot as usize >= inputs.plan.nfs.len() {
                            continue;
                        }
                        match sluice_sys::fork_single_threaded() {
                            Ok(Forked::Child) => {
                                let _ = sluice_sys::die_with_parent(me);
                                return Next::BecomeNf {
                                    index: slot,
                                    generation,
                                };
                            }
                            Ok(Forked::Parent(pid)) => {
                                let child = Child {
                                    slot,
                                    generation,
                                    exit_fd: sluice_sys::pidfd_open(pid).ok(),
                                };
                                children.insert(pid.as_raw_nonzero().get(), child);
                                let _ = chan.send(&format!(
                                    "spawned {slot} {generation} {}",
                                    pid.as_raw_nonzero()
                                ));
                            }
                            Err(e) => {
                                eprintln!("sluice: template cannot fork NF slot {slot}: {e}");
                                let _ =
                                    chan.send(&format!("exited {slot} {generation} 0 code 127"));
                            }
                        }
                    }
                    ["quit"] => quitting = true,
                    _ => {}
                }
            }
            if chan.closed {
                quitting = true;
            }
            if quitting {
                for &pid in children.keys() {
                    if let Some(p) = Pid::from_raw(pid) {
                        let _ = sluice_sys::kill(p);
                    }
                }
            }
        }
        while let Ok(Some((pid, status))) = sluice_sys::reap_any() {
            let raw = pid.as_raw_nonzero().get();
            if let Some(Child {
                slot, generation, ..
            }) = children.remove(&raw)
            {
                let _ = chan.send(&format!(
                    "exited {slot} {generation} {raw} {}",
                    status_words(&status)
                ));
            }
        }
        if quitting && children.is_empty() {
            return Next::Exit(0);
        }
        if quitting {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Runs the worker's NF number `index` (its arena slot follows from the
/// worker) as this process, started for the `generation`-th time in this
/// run (1 = first start).
fn nf_main(index: u32, generation: u32, inputs: &TemplateInputs<'_>) -> i32 {
    let plan = inputs.plan;
    let nf_plan = &plan.nfs[index as usize];
    let slot = inputs.worker * plan.nfs.len() as u32 + index;
    sluice_sys::set_thread_name(&format!("nf:{}", nf_plan.name));
    let placement = sluice_sys::Placement::current();
    let is_process = |i: usize| plan.nfs[i].isolation == sluice_spec::Isolation::Process;
    // One worker: NFs take the other cores. Several: each worker's NFs
    // share its core (every core already runs a worker), which also keeps
    // the packets they touch in that core's caches.
    let busy_poll_us = inputs.spec.settings.wakeup.busy_poll_us;
    let (my_cpu, cfg) = if inputs.workers > 1 {
        let cpu = placement.shard_cpu(inputs.worker as usize);
        (cpu, LoopConfig::beside_worker(inputs.batch, busy_poll_us))
    } else {
        let cpu = placement.nf_cpu(index as usize);
        let sharing = (0..plan.nfs.len())
            .filter(|&i| is_process(i) && placement.nf_cpu(i) == cpu)
            .count();
        (
            cpu,
            LoopConfig::for_sharing(inputs.batch, sharing, busy_poll_us),
        )
    };
    if let Err(e) = sluice_sys::pin_to_cpu(my_cpu) {
        eprintln!("sluice: NF {} cannot be pinned: {e}", nf_plan.name);
    }
    let ctl = inputs.arena.nf_control(slot);
    ctl.pid.store(
        sluice_sys::getpid().as_raw_nonzero().get() as u32,
        Ordering::Relaxed,
    );
    let restarts = generation.saturating_sub(1);
    let mut nf = match plan.build_nf(inputs.spec, index as usize, restarts) {
        Ok(nf) => nf,
        Err(e) => {
            eprintln!("sluice: NF {} failed to build: {e}", nf_plan.name);
            ctl.state
                .store(sluice_mem::control::state::FAILED, Ordering::Release);
            return exit_code::BUILD_FAILED;
        }
    };
    run_nf_loop(inputs.arena, slot, inputs.worker, cfg, nf.as_mut())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_lines_parse() {
        assert_eq!(
            parse_event("spawned 2 7 1234"),
            Some(TemplateEvent::Spawned {
                slot: 2,
                generation: 7,
                pid: 1234
            })
        );
        assert_eq!(
            parse_event("exited 1 3 99 signal 9"),
            Some(TemplateEvent::Exited {
                slot: 1,
                generation: 3,
                pid: 99,
                status: ExitStatus::Signal(9)
            })
        );
        assert_eq!(parse_event("exited 1 3 99 code x"), None);
        assert_eq!(parse_event("garbage"), None);
    }
}
