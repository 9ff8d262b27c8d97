//! What a process that forks NF children needs beyond `fork` itself:
//! learning that children exited without a descriptor per child, giving a
//! child its own stdout/stderr pipe and nothing else of the parent's
//! descriptors, raising the descriptor limit, and telling whether a
//! process that is not our child has gone.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::process::Pid;

/// A descriptor that becomes readable when any child exits: a `signalfd`
/// for SIGCHLD, which is blocked in the calling thread so it is never
/// delivered as a signal. One descriptor for any number of children, where
/// a pidfd per child would cost one each (10,000 NFs would need 10,000).
pub struct ChildExits {
    fd: OwnedFd,
}

impl ChildExits {
    /// Blocks SIGCHLD in the calling thread and opens the signalfd.
    pub fn new() -> io::Result<ChildExits> {
        // SAFETY: `set` is a local sigset_t initialised by sigemptyset
        // before use; sigprocmask and signalfd only read it, and a null
        // old-mask pointer is allowed. The returned descriptor is new and
        // owned by nobody else, so wrapping it in OwnedFd is sound.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(ChildExits {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    /// Reads every pending notification (the caller then reaps with
    /// `waitpid(-1, WNOHANG)` until none is left: signals coalesce).
    pub fn drain(&self) {
        let mut buf = [0u8; 128 * 8];
        while let Ok(n) = rustix::io::read(&self.fd, &mut buf) {
            if n == 0 {
                break;
            }
        }
    }

    /// Unblocks SIGCHLD again (in a forked child that must not inherit the
    /// parent's mask).
    pub fn unblock_in_child() {
        // SAFETY: as in `new`: a local, initialised sigset_t, read only.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGCHLD);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
    }
}

impl AsFd for ChildExits {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// In a freshly forked child: makes `out` its stdout and stderr, `input`
/// its stdin (`None`: `/dev/null`) and closes every other descriptor it
/// inherited (the parent's control socket, other children's pipes, epoll
/// and signal descriptors), so the child holds only what it was given.
pub fn isolate_child_stdio(out: OwnedFd, input: Option<OwnedFd>) -> io::Result<()> {
    rustix::stdio::dup2_stdout(&out)?;
    rustix::stdio::dup2_stderr(&out)?;
    let input = match input {
        Some(fd) => fd,
        None => rustix::fs::open(
            "/dev/null",
            rustix::fs::OFlags::RDONLY,
            rustix::fs::Mode::empty(),
        )?,
    };
    rustix::stdio::dup2_stdin(&input)?;
    drop(input);
    drop(out);
    close_fds_from(3);
    Ok(())
}

/// Closes every descriptor numbered `first` or above.
pub fn close_fds_from(first: u32) {
    // SAFETY: close_range only closes descriptors; the caller owns every
    // descriptor from `first` up (a freshly forked child that is about to
    // run NF code and uses none of them). Rust objects that still wrap
    // such descriptors must not be used afterwards; the callers drop or
    // forget them (the child never returns to the parent's code paths).
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    if r != 0 {
        // Kernels before 5.9: close one by one up to the limit.
        let max = rustix::process::getrlimit(rustix::process::Resource::Nofile)
            .current
            .unwrap_or(1024)
            .min(1 << 20);
        for fd in first as u64..max {
            // SAFETY: as above; EBADF for unused numbers is harmless.
            unsafe {
                libc::close(fd as i32);
            }
        }
    }
}

/// Raises this process's soft limit on open descriptors to its hard limit
/// (each NF child holds one pipe descriptor in its template); returns the
/// new soft limit.
pub fn raise_nofile_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let cur = getrlimit(Resource::Nofile);
    if let Some(max) = cur.maximum {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(max),
                maximum: Some(max),
            },
        );
    }
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}

/// Whether process `pid` no longer runs: it does not exist, or it is a
/// zombie (dead, waiting for its parent to reap it). Used for processes
/// that are not our children (NFs whose template died), which `waitpid`
/// cannot wait for.
pub fn process_gone(pid: Pid) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.as_raw_nonzero())) {
        // The state follows the parenthesised command name, which may
        // itself contain spaces and parentheses: take the last ')'.
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|s| s == "Z" || s == "X"),
        Err(_) => true,
    }
}

/// A pipe whose read end is non-blocking (the parent polls it) and whose
/// both ends close on exec.
pub fn output_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    rustix::io::ioctl_fionbio(&r, true)?;
    Ok((r, w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_is_not_gone_and_a_free_pid_is() {
        assert!(!process_gone(crate::getpid()));
        // pid_max is at most 2^22; this number is never a live process.
        assert!(process_gone(Pid::from_raw(i32::MAX - 1).unwrap()));
    }

    #[test]
    fn the_descriptor_limit_can_be_raised_to_its_maximum() {
        let soft = raise_nofile_limit();
        let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
        assert_eq!(Some(soft), hard.or(Some(u64::MAX)));
    }
}
