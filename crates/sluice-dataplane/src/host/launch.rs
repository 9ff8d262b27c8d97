//! Starting an NF template process: exec this program as one, hand it
//! the arena and its hello, and wait until it says it is ready (or say
//! why it did not start). [`super::ForkHost`] starts one at its start and
//! another whenever its template dies.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::channel::Channel;
use super::proto::{FromTemplate, Hello, ToTemplate};
use super::TEMPLATE_ARG;

/// Where the template comes from.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Program to exec as the template; it must call
    /// [`super::template_main_if_invoked`] at the start of `main`.
    /// Default: the running executable.
    pub program: PathBuf,
    /// The worker this host serves.
    pub worker: u32,
    /// The CPU the template runs on (`Placement::template_cpu`); `None`:
    /// wherever the starting thread may run.
    pub cpu: Option<usize>,
}

impl HostConfig {
    /// The running executable as the template, for worker `worker`.
    pub fn current_exe(worker: u32) -> io::Result<HostConfig> {
        Ok(HostConfig {
            program: std::env::current_exe()?,
            worker,
            cpu: None,
        })
    }
}

/// How long a template may take to start and map the arena.
const START_TIMEOUT_MS: u64 = 10_000;

pub(super) type Chan = Channel<ToTemplate, FromTemplate>;

/// A template that said it is ready.
pub(super) struct Running {
    pub(super) child: Child,
    pub(super) chan: Chan,
    /// The template's pidfd when this process may take its descriptors:
    /// it then hands over its NFs' output pipes.
    pub(super) pidfd: Option<OwnedFd>,
}

/// Starts a template for `cfg` and waits until it mapped the arena
/// (`arena_fds`) and said it is ready. With `take_output` (the host can
/// read NF output), it is asked to hand over its NFs' output pipes if this
/// process may take its descriptors (tried on its standard input).
pub(super) fn launch(
    cfg: &HostConfig,
    hello: &Hello,
    arena_fds: &[OwnedFd],
    take_output: bool,
) -> io::Result<Running> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut child = Command::new(&cfg.program)
        .arg(TEMPLATE_ARG)
        .stdin(Stdio::from(OwnedFd::from(theirs)))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot start {}: {e}", cfg.program.display()),
            )
        })?;
    if let Some(cpu) = cfg.cpu {
        // It inherited the starting thread's pin (a worker's core).
        let pid = sluice_sys::Pid::from_raw(child.id() as i32);
        if let Some(Err(e)) = pid.map(|p| sluice_sys::pin_process_to_cpu(p, cpu)) {
            tracing::warn!("cannot pin the NF template to CPU {cpu}: {e}");
        }
    }
    let mut chan = Chan::new(ours)?;
    // It hands over its NFs' output pipes if this process may take
    // its descriptors: tried on its standard input.
    let pidfd = take_output.then_some(()).and_then(|()| {
        let pid = sluice_sys::Pid::from_raw(child.id() as i32)?;
        let pidfd = sluice_sys::pidfd_open(pid).ok()?;
        sluice_sys::take_fd(pidfd.as_fd(), 0).ok()?;
        Some(pidfd)
    });
    let hello = Hello {
        output_to_platform: pidfd.is_some(),
        ..hello.clone()
    };
    // A program that is not a template may exit before it reads
    // anything, so a failed send (EPIPE) means the same as a closed
    // socket: say what the program did, not what the socket said.
    let setup = chan
        .send_fds(&arena_fds.iter().map(AsFd::as_fd).collect::<Vec<_>>())
        .and_then(|()| chan.send(&ToTemplate::Hello(hello)));
    let deadline = sluice_sys::monotonic_ns() + START_TIMEOUT_MS * 1_000_000;
    let mut msgs = Vec::new();
    let program = cfg.program.display();
    let stopped = |child: &mut std::process::Child| {
        let status = child.wait();
        let why = match &status {
            Ok(s) => format!("it exited ({s})"),
            Err(e) => e.to_string(),
        };
        // A template that failed said why on stderr (the platform's);
        // any other exit is a program that did not act as a template.
        let hint = match status.ok().and_then(|s| s.code()) {
            Some(super::template::START_FAILED) => "its reason is on standard error above",
            _ => "was it built with `template_main_if_invoked` in main?",
        };
        io::Error::other(format!(
            "the NF template ({program}) stopped before it was ready: {why}; {hint}"
        ))
    };
    let ready = match setup {
        Err(_) => Err(stopped(&mut child)),
        Ok(()) => loop {
            chan.flush();
            let _ = sluice_sys::wait_readable(chan.as_fd(), 20);
            chan.recv(&mut msgs);
            if msgs.iter().any(|m| matches!(m, FromTemplate::Ready { .. })) {
                break Ok(());
            }
            if chan.is_closed() {
                break Err(stopped(&mut child));
            }
            if sluice_sys::monotonic_ns() > deadline {
                break Err(io::Error::other(format!(
                    "the NF template did not start within {START_TIMEOUT_MS} ms"
                )));
            }
        },
    };
    if let Err(e) = ready {
        let _ = child.kill();
        let _ = child.wait();
        return Err(e);
    }
    Ok(Running { child, chan, pidfd })
}
