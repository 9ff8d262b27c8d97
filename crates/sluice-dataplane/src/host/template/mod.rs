//! The NF template process ("zygote"), the other end of [`super::ForkHost`].
//!
//! Started as this program with [`TEMPLATE_ARG`], with its control socket
//! on standard input. It receives the arena's memfd and a
//! [`Hello`](super::proto::Hello), maps the arena, and then forks one
//! process per [`SpawnRequest`]: the child isolates its descriptors (its
//! own stdout/stderr pipe, nothing of the template's), pins itself,
//! takes its NF already built from the template's shell for the recipe
//! (`super::shells`; or builds it, for requests without a shell) and runs
//! the NF loop. The
//! template stays single-threaded, so forking it is safe, and sleeps in
//! `epoll` on its socket and a SIGCHLD signalfd: it wakes only for a
//! request or an exit (it shares the data-plane cores, so a timer would
//! preempt whichever NF runs there). Each NF's output pipe goes to the
//! platform as soon as the NF is forked (`super::output`), so the
//! template's descriptor table does not grow with its NFs; it reads the
//! pipes of standbys not yet started, and every pipe when the platform
//! cannot take them.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use rustix::event::epoll;
use sluice_mem::Arena;
use sluice_nf::NfType;
use sluice_sys::sandbox::RunFilter;
use sluice_sys::{ChildExits, LimitGroups, Pid};

use super::channel::Channel;
use super::output::NfOutput;
use super::proto::{FromTemplate, Hello, ToTemplate, WireStatus};
use super::shells::{ShellId, Shells};
use super::standby::Standbys;

/// The argument that makes the program a template.
pub const TEMPLATE_ARG: &str = "__sluice-nf-template";

/// The template's nice value. It shares the NFs' cores and sleeps until
/// asked for something; when asked, it should run at once: a restart waits
/// for it (its wake-up, then the fork) while the chain's other NFs poll on
/// that core. At -10 (when the platform may raise priorities) restarts in
/// the soak's chain took 1.40 and 1.47 ms against 1.55 and 1.70 at 0
/// (2-minute soaks side by side, `docs/benchmarks.md`). Its children start at
/// this priority too, so their start-up is not held off either, and
/// return to 0 before their NF's first packet (`child.rs`); shell builds,
/// long and not urgent, run at 0 (`shells.rs`).
pub(super) const TEMPLATE_NICE: i32 = -10;

/// `slot` of log lines from the template itself.
pub const TEMPLATE_SLOT: u32 = u32::MAX;

/// Queued output above which log lines are dropped (and counted) rather
/// than buffered: the platform reads every millisecond, so this is only
/// reached by an NF that floods its output.
const LOG_BACKLOG_MAX: usize = 8 << 20;

/// Runs the template if this process was started as one; returns its
/// exit code then. Call it first thing in `main`, with the NF types the
/// platform knows.
pub fn template_main_if_invoked(registry: &'static [NfType]) -> Option<ExitCode> {
    let mut args = std::env::args_os();
    args.next();
    if args.next()? != TEMPLATE_ARG {
        return None;
    }
    Some(ExitCode::from(template_main(registry) as u8))
}

mod relay;
mod spare;
mod start;

type Chan = Channel<FromTemplate, ToTemplate>;

/// An NF process the template forked.
struct Child {
    slot: u32,
    generation: u32,
    /// The key of its limit groups, if it has limits (removed when it
    /// is reaped).
    limits: Option<u32>,
    /// A standby or spare not yet handed a start (`super::standby`).
    standby: bool,
    /// The spare (`super::spare`), not yet handed a start.
    spare: bool,
    /// Its output, while the template reads it (not offered to the
    /// platform).
    out: Option<NfOutput>,
    /// The shell it was forked from (released when it is reaped).
    shell: Option<ShellId>,
}

const KEY_CHAN: u64 = u64::MAX;
const KEY_EXITS: u64 = u64::MAX - 1;

struct Template<'a> {
    chan: Chan,
    epoll: OwnedFd,
    exits: ChildExits,
    arena: Arena,
    hello: Hello,
    registry: &'a [NfType],
    children: HashMap<i32, Child>,
    quitting: bool,
    dropped_lines: u64,
    /// Memory and pids groups, made at the first NF that has limits.
    limits: Option<LimitGroups>,
    /// The NFs' seccomp allow-list, compiled at the first NF that has one
    /// (each NF only writes its pid in).
    run_filter: Option<RunFilter>,
    /// NFs built once, forked many times.
    shells: Shells,
    /// Instances made ahead, one per slot that asks.
    standbys: Standbys,
    /// A process forked ahead for the worker's next NF.
    spare: Option<super::spare::Spare>,
    /// The slot and pid of the spare made confined, parked among the
    /// standbys.
    confined_spare: Option<(u32, i32)>,
    /// Limit-group keys of live children.
    limit_keys: HashSet<u32>,
    /// Output pipes offered to the platform, by pid, until it says it
    /// took them (`ToTemplate::OutputTaken`): the descriptor number it
    /// takes must stay this pipe's until then.
    offered: HashMap<i32, OwnedFd>,
}

/// The exit code of a template that could not start; it has said why on
/// its stderr (the platform's, as it has no tracing subscriber).
pub(super) const START_FAILED: i32 = 2;

fn start_failed(why: impl std::fmt::Display) -> i32 {
    eprintln!("sluice-template: {why}");
    START_FAILED
}

fn template_main(registry: &'static [NfType]) -> i32 {
    sluice_sys::ignore_terminal_signals();
    sluice_sys::set_thread_name("sluice-template");
    sluice_sys::raise_nofile_limit();
    let sock = match std::io::stdin().as_fd().try_clone_to_owned() {
        Ok(s) => s,
        Err(e) => return start_failed(format_args!("no control socket on stdin: {e}")),
    };
    let mut chan = match Chan::new(UnixStream::from(sock)) {
        Ok(c) => c,
        Err(e) => return start_failed(format_args!("unusable control socket: {e}")),
    };
    let fds = match chan.recv_fds(10_000) {
        Ok(f) => f,
        Err(e) => return start_failed(format_args!("cannot receive the arena: {e}")),
    };
    let hello = loop {
        let mut msgs = Vec::new();
        let _ = sluice_sys::wait_readable(chan.as_fd(), 1000);
        chan.recv(&mut msgs);
        if let Some(ToTemplate::Hello(h)) = msgs.into_iter().next() {
            break h;
        }
        if chan.is_closed() {
            return start_failed("the platform closed the socket before its hello");
        }
    };
    if let Some(p) = Pid::from_raw(hello.platform_pid) {
        let _ = sluice_sys::die_with_parent(p);
    }
    sluice_sys::set_cycles_calibration(hello.cycles_q32);
    let _ = sluice_sys::set_own_nice(TEMPLATE_NICE);
    let l = hello.arena;
    let arena = match Arena::attach(fds, l.config(), l.len, l.hugepages) {
        Ok(a) => a,
        Err(e) => return start_failed(format_args!("cannot map the arena: {e}")),
    };
    let setup = (|| -> std::io::Result<(OwnedFd, ChildExits)> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let exits = ChildExits::new()?;
        epoll::add(
            &ep,
            &chan,
            epoll::EventData::new_u64(KEY_CHAN),
            epoll::EventFlags::IN,
        )?;
        epoll::add(
            &ep,
            &exits,
            epoll::EventData::new_u64(KEY_EXITS),
            epoll::EventFlags::IN,
        )?;
        Ok((ep, exits))
    })();
    let (epoll, exits) = match setup {
        Ok(s) => s,
        Err(e) => return start_failed(format_args!("cannot watch its socket and children: {e}")),
    };
    let mut t = Template {
        chan,
        epoll,
        exits,
        arena,
        hello,
        registry,
        children: HashMap::new(),
        quitting: false,
        dropped_lines: 0,
        limits: None,
        run_filter: None,
        shells: Shells::raised(),
        standbys: Standbys::default(),
        spare: None,
        confined_spare: None,
        limit_keys: HashSet::new(),
        offered: HashMap::new(),
    };
    let _ = t.chan.send(&FromTemplate::Ready {
        pid: sluice_sys::getpid().as_raw_nonzero().get(),
    });
    t.run()
}

impl Template<'_> {
    fn run(&mut self) -> i32 {
        let mut ready: Vec<epoll::Event> = Vec::with_capacity(256);
        loop {
            let flags = if self.chan.wants_write() {
                epoll::EventFlags::IN | epoll::EventFlags::OUT
            } else {
                epoll::EventFlags::IN
            };
            let _ = epoll::modify(
                &self.epoll,
                &self.chan,
                epoll::EventData::new_u64(KEY_CHAN),
                flags,
            );
            // Quitting: poll every millisecond until every NF is reaped;
            // otherwise sleep until asked, or until standbys are due.
            let wait_ns = if self.quitting {
                Some(1_000_000)
            } else {
                (self.standbys.due_at())
                    .map(|at| at.saturating_sub(sluice_sys::monotonic_ns()).max(1))
            };
            let tick = wait_ns.map(|ns| rustix::time::Timespec {
                tv_sec: (ns / 1_000_000_000) as i64,
                tv_nsec: (ns % 1_000_000_000) as i64,
            });
            let timeout = tick.as_ref();
            ready.clear();
            let _ = epoll::wait(
                &self.epoll,
                rustix::buffer::spare_capacity(&mut ready),
                timeout,
            );
            let mut readable_pids = Vec::new();
            let mut exited = false;
            for ev in &ready {
                let data = ev.data;
                match data.u64() {
                    KEY_CHAN => {}
                    KEY_EXITS => exited = true,
                    pid => readable_pids.push(pid as i32),
                }
            }
            for pid in readable_pids {
                self.read_output(pid, false);
            }
            self.chan.flush();
            if !self.quitting {
                let mut msgs = Vec::new();
                self.chan.recv(&mut msgs);
                for m in msgs {
                    match m {
                        ToTemplate::Spawn(req) => self.spawn(req),
                        ToTemplate::Release { slot } => {
                            self.standbys.release(slot);
                        }
                        ToTemplate::Spare(like) => self.keep_spare(like),
                        ToTemplate::OutputTaken { pid } => {
                            self.offered.remove(&pid);
                        }
                        ToTemplate::Quit => self.quitting = true,
                        ToTemplate::Hello(_) => {}
                    }
                }
                if self.chan.is_closed() {
                    self.quitting = true;
                }
                if self.quitting {
                    for &pid in self.children.keys() {
                        if let Some(p) = Pid::from_raw(pid) {
                            let _ = sluice_sys::kill(p);
                        }
                    }
                }
            }
            // Reaped only when a child exited (the signalfd is readable
            // while a SIGCHLD is pending, so an exit after this drain wakes
            // the next wait): each `waitpid` looks at every child, and a
            // template of a thousand NFs spent that on every request.
            if exited || self.quitting {
                self.exits.drain();
                self.reap();
            }
            if !self.quitting {
                self.make_standbys();
            }
            if self.quitting && self.children.is_empty() {
                self.chan.flush();
                return 0;
            }
        }
    }

    fn reap(&mut self) {
        while let Ok(Some((pid, status))) = sluice_sys::reap_any() {
            let raw = pid.as_raw_nonzero().get();
            self.read_output(raw, true);
            if let Some(c) = self.children.remove(&raw) {
                if let Some(out) = &c.out {
                    let _ = epoll::delete(&self.epoll, out.fd());
                }
                if let Some(id) = c.shell {
                    self.shells.release(id);
                }
                let status = match (c.limits, &self.limits) {
                    (Some(key), Some(g)) => {
                        self.limit_keys.remove(&key);
                        super::sandbox::release_limits(g, key, status)
                    }
                    _ => status,
                };
                if c.standby {
                    // It never served: the platform does not know it. A
                    // spare that was replaced was killed on purpose.
                    self.standbys.lost(c.slot, raw);
                    let kept = self.spare.take_if(|s| s.pid == raw).is_some()
                        || (self.confined_spare)
                            .take_if(|(_, pid)| *pid == raw)
                            .is_some();
                    if !self.quitting && (kept || !c.spare) {
                        let what = if c.spare { "the spare" } else { "a standby" };
                        let line = format!("{what} for slot {} ended ({status})", c.slot);
                        self.send_log(TEMPLATE_SLOT, 0, line);
                    }
                    continue;
                }
                let _ = self.chan.send(&FromTemplate::Exited {
                    slot: c.slot,
                    generation: c.generation,
                    pid: raw,
                    status: WireStatus::from(&status),
                });
            }
        }
    }
}
