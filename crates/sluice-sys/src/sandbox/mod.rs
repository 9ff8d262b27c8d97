//! Confining an NF process: what an NF may do once its template forked it.
//!
//! An NF process is confined in two steps, because it needs more while it
//! is built than while it runs:
//!
//! 1. **Build** ([`enter_build_phase`], first thing after the fork):
//!    `no_new_privs` and not dumpable. The NF's type builds its state from
//!    its config and opens the files and sockets the config names (a
//!    capture file, an IPFIX collector) with the platform's identity,
//!    because the platform's operator named them. No filter yet: the build
//!    is the NF type's code working on the operator's config, the same
//!    code the platform's compiler already ran in the platform's own
//!    process to check that config; a filter here would contain nothing
//!    the compiler did not already run unconfined, and would cost every
//!    start ~300 µs.
//! 2. **Run** ([`confine`], after the NF is built and has opened its
//!    handles, before its first packet, which is the first input an
//!    attacker controls): new namespaces, no supplementary groups, its own
//!    uid and gid (one per NF slot, so the kernel keeps NFs from signalling
//!    or tracing each other even without the filter), no capabilities
//!    (bounding set emptied too), and an allow-list filter: only what the
//!    NF loop needs ([`RUN_ALLOWED`]). Anything else kills the process with
//!    `SIGSYS`, which the platform reports as a sandbox kill.
//!
//! The filter is installed with `SECCOMP_FILTER_FLAG_SPEC_ALLOW`: the
//! kernel would otherwise turn on the speculative-store-bypass mitigation
//! for the process (a cost on every load on some CPUs), which protects a
//! process from code in its own address space. An NF's address space
//! holds nothing but its own state and the arena it already shares, so
//! the mitigation would buy nothing.
//!
//! Why no PID namespace: the platform addresses NFs by pid (CPU placement,
//! scheduling class, control groups, `schedstat`), and a PID namespace
//! would have to be entered before the fork, by the template, for every
//! NF alike. The per-NF uid and the filter already keep an NF from seeing
//! or touching other processes. Why the network namespace is not in the
//! default: creating one costs ~0.6 ms on this kernel (IPC and UTS cost
//! ~30 µs and ~0), more than the rest of an NF's start; without `socket`
//! in the allow-list an NF cannot reach any network anyway.

mod bpf;
mod syscalls;

use std::io;

pub use syscalls::{RunFilter, RUN_ALLOWED};

/// The first uid (and gid) of confined NFs: NF slot `s` runs as
/// `SANDBOX_ID_BASE + s`. Far above the ranges distributions give to users
/// (1000..60000) and to rootless containers' subordinate ids (100000 and
/// up, 65536 each), so no file on the host belongs to an NF.
pub const SANDBOX_ID_BASE: u32 = 0x5100_0000;

/// The signal a process dies of when it makes a system call its filter
/// forbids (`SECCOMP_RET_KILL_PROCESS`).
pub const KILL_SIGNAL: i32 = libc::SIGSYS;

/// Namespaces an NF enters before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Namespaces {
    /// A network namespace with only a loopback device (~0.6 ms).
    pub net: bool,
    /// An IPC namespace: no System V IPC or POSIX queues of the host.
    pub ipc: bool,
    /// A UTS namespace: its own host name.
    pub uts: bool,
    /// A mount namespace: a private copy of the mount table.
    pub mount: bool,
}

impl Namespaces {
    fn clone_flags(self) -> libc::c_int {
        let mut f = 0;
        for (on, flag) in [
            (self.net, libc::CLONE_NEWNET),
            (self.ipc, libc::CLONE_NEWIPC),
            (self.uts, libc::CLONE_NEWUTS),
            (self.mount, libc::CLONE_NEWNS),
        ] {
            if on {
                f |= flag;
            }
        }
        f
    }
}

/// What [`confine`] does to the calling process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Confinement {
    /// Become this uid and gid (with no supplementary groups); `None`
    /// keeps the process's own.
    pub user: Option<u32>,
    /// Namespaces to enter.
    pub namespaces: Namespaces,
    /// Drop every capability (the bounding set's too when it keeps its
    /// uid; see [`confine`]).
    pub drop_capabilities: bool,
    /// Install the run-phase allow-list.
    pub seccomp: bool,
}

/// Step 1, right after the fork: `no_new_privs` and not dumpable.
pub fn enter_build_phase() -> io::Result<()> {
    no_new_privs()?;
    not_dumpable()
}

/// Step 2, after the NF was built and opened its handles: applies `c` to
/// the calling process, which must be single-threaded (the credential and
/// namespace calls act on the calling thread), with `filter` as its
/// allow-list when `c.seccomp` (an error without one). `parent` is the template: changing the uid
/// clears the parent-death signal, so it is set again. A failure leaves
/// the process partly confined: the caller must exit.
pub fn confine(
    c: &Confinement,
    parent: rustix::process::Pid,
    filter: Option<&RunFilter>,
) -> io::Result<()> {
    let ns = c.namespaces.clone_flags();
    if ns != 0 {
        // SAFETY: unshare takes flags by value and touches no memory of
        // ours; the process is single-threaded, as CLONE_NEWNS requires.
        if unsafe { libc::unshare(ns) } != 0 {
            return Err(context("unshare (new namespaces)"));
        }
    }
    // The bounding set only limits what execve can grant. With
    // no_new_privs (set in the build phase) an exec grants nothing, and the
    // filter forbids exec anyway; emptying it costs 41 prctl calls (~100 µs
    // of every start here), so it is emptied only for an NF that keeps
    // root's uid and would otherwise keep its capabilities through it.
    if c.drop_capabilities && c.user.is_none() {
        drop_bounding_set()?;
    }
    if let Some(id) = c.user {
        set_identity(id)?;
        // A change of uid clears PR_SET_PDEATHSIG (prctl(2)).
        crate::die_with_parent(parent)?;
    }
    if c.drop_capabilities {
        clear_capabilities()?;
    }
    if c.seccomp {
        // no_new_privs, which seccomp requires of an unprivileged caller,
        // was set in the build phase; set again in case that was skipped.
        no_new_privs()?;
        let filter =
            filter.ok_or_else(|| io::Error::other("seccomp asked for without a filter"))?;
        install(&filter.for_process(std::process::id())?)?;
    }
    Ok(())
}

/// Whether this process may change its uid and enter namespaces (it is
/// root, or has `CAP_SETUID` and `CAP_SYS_ADMIN` in some other way; a
/// non-root platform confines with the filters alone).
pub fn can_change_identity() -> bool {
    rustix::process::geteuid().is_root()
}

/// A capability set of process `pid` (`key` is its `/proc/PID/status`
/// line: `CapEff:`, `CapPrm:`, `CapInh:`, `CapBnd:`, `CapAmb:`), as a mask.
pub fn status_caps(pid: u32, key: &str) -> io::Result<u64> {
    u64::from_str_radix(&status_field(pid, key)?, 16)
        .map_err(|_| io::Error::other(format!("unreadable {key} line")))
}

fn status_field(pid: u32, key: &str) -> io::Result<String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_ascii_whitespace().next())
        .map(str::to_string)
        .ok_or_else(|| io::Error::other(format!("no {key} line")))
}

fn context(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn prctl(op: libc::c_int, arg: libc::c_ulong, what: &str) -> io::Result<()> {
    // SAFETY: every prctl used here takes plain integers (no pointers),
    // so the call cannot touch our memory.
    if unsafe {
        libc::prctl(
            op,
            arg,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    } != 0
    {
        return Err(context(what));
    }
    Ok(())
}

fn no_new_privs() -> io::Result<()> {
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, "PR_SET_NO_NEW_PRIVS")
}

/// Not dumpable: no core file, `/proc/PID` owned by root, and no ptrace by
/// processes of the same uid.
fn not_dumpable() -> io::Result<()> {
    prctl(libc::PR_SET_DUMPABLE, 0, "PR_SET_DUMPABLE")
}

fn drop_bounding_set() -> io::Result<()> {
    // CAP_LAST_CAP is 40 on 6.x kernels; higher numbers fail with EINVAL,
    // which ends the walk (a kernel with more capabilities has a later
    // last one, so read it rather than assume).
    let last: libc::c_ulong = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40);
    for cap in 0..=last {
        prctl(libc::PR_CAPBSET_DROP, cap, "PR_CAPBSET_DROP")?;
    }
    Ok(())
}

fn set_identity(id: u32) -> io::Result<()> {
    // SAFETY: setgroups with a zero count reads no memory; setresgid and
    // setresuid take integers. glibc applies them to every thread, and the
    // process has only one.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            return Err(context("setgroups"));
        }
        if libc::setresgid(id, id, id) != 0 {
            return Err(context(&format!("setresgid {id}")));
        }
        if libc::setresuid(id, id, id) != 0 {
            return Err(context(&format!("setresuid {id}")));
        }
    }
    Ok(())
}

/// Empties the permitted, effective and inheritable sets (a uid change
/// from root already clears the first two; this covers a process that
/// keeps its uid) and the ambient set.
fn clear_capabilities() -> io::Result<()> {
    prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
        "PR_CAP_AMBIENT_CLEAR_ALL",
    )?;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two Data words (64 capabilities).
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: `header` and `data` are live, correctly laid out for
    // capset(2) version 3 (a header and two data words), and outlive the
    // call; the kernel reads `data` and may write `header.version`.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    if r != 0 {
        return Err(context("capset"));
    }
    Ok(())
}

/// Installs a compiled filter on the calling thread (single-threaded
/// process: the whole process), with SPEC_ALLOW (see the module comment).
fn install(prog: &[bpf::Insn]) -> io::Result<()> {
    let len = u16::try_from(prog.len()).map_err(|_| io::Error::other("filter too long"))?;
    // struct sock_fprog (linux/filter.h), over `bpf::Insn`, which has
    // the kernel's `sock_filter` layout.
    #[repr(C)]
    struct Fprog {
        len: u16,
        filter: *const bpf::Insn,
    }
    let fprog = Fprog {
        len,
        filter: prog.as_ptr(),
    };
    // SECCOMP_FILTER_FLAG_SPEC_ALLOW (linux/seccomp.h; not in every libc).
    const SPEC_ALLOW: libc::c_ulong = 1 << 2;
    // SAFETY: `fprog` points at `prog`, which lives across the call; the
    // kernel copies the program and keeps no pointer to our memory.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            SPEC_ALLOW,
            &fprog as *const Fprog,
        )
    };
    if r != 0 {
        return Err(context("seccomp"));
    }
    Ok(())
}
