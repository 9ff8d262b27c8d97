//! The system call allow-list of an NF's sandbox, each entry with why, and
//! its compilation into a seccomp program ([`super::bpf`]).
//!
//! The list is what the NF loop and an NF's `process`, `tick`
//! and `stop` need: memory for the allocator, the futex and yield of the
//! wake-word protocol, clocks, writing logs and to handles opened before
//! the sandbox closed, and ending. Kept short on purpose: each entry is
//! kernel attack surface an NF can reach.

use std::io;

use super::bpf::{self, Allowed, Cond};

/// `prctl(PR_GET_AUXV)` (Linux 6.4; not in every libc).
const PR_GET_AUXV: u64 = 0x4155_5856;

/// A compiled seccomp program.
pub(super) type Program = Vec<bpf::Insn>;

/// A system call and why it is on its list.
pub struct Entry {
    /// `libc`'s constant for it (`SYS_write`).
    constant: &'static str,
    /// Its number on this architecture.
    pub nr: libc::c_long,
    /// Why.
    pub why: &'static str,
}

impl Entry {
    /// Its name, as in `man 2` (`write`).
    pub fn name(&self) -> &'static str {
        self.constant.trim_start_matches("SYS_")
    }
}

/// `entries! { SYS_write => "why", ... }`: the number comes from `libc`,
/// the name from the constant, so the two cannot disagree.
macro_rules! entries {
    ($( $sys:ident => $why:literal, )*) => {
        &[$( Entry { constant: stringify!($sys), nr: libc::$sys, why: $why }, )*]
    };
}

/// What an NF may do once it runs. Anything else kills it (`SIGSYS`).
/// `mmap` and `mprotect` are allowed without `PROT_EXEC` only, `tgkill`
/// and `tkill` only at the NF itself, `prctl` only to read the auxiliary
/// vector or rename itself, `fcntl` only to read flags (see [`run_filter`]).
pub const RUN_ALLOWED: &[Entry] = entries! {
    SYS_write => "log lines (its stderr is a pipe to the template) and records to handles opened before the sandbox closed",
    SYS_writev => "vectored writes of the same",
    SYS_read => "reading what it was handed; no handle to read is opened after the sandbox closes",
    SYS_close => "dropping a handle it holds",
    SYS_fcntl => "F_GETFD and F_GETFL only: std checks a descriptor is open before it closes it (debug builds)",
    SYS_fstat => "the size of a handle it holds",
    SYS_lseek => "positioning in a file it holds",
    SYS_fsync => "flushing a capture or alert file at stop",
    SYS_fdatasync => "same",
    SYS_sendto => "IPFIX export on the socket opened at build",
    SYS_sendmsg => "same",
    SYS_mmap => "the allocator (never executable)",
    SYS_mprotect => "the allocator's arenas (never executable)",
    SYS_munmap => "the allocator",
    SYS_mremap => "the allocator (growing vectors)",
    SYS_madvise => "the allocator returning memory",
    SYS_brk => "the allocator's main heap",
    SYS_futex => "the wake-word protocol: sleeping on its slot and waking its worker",
    SYS_sched_yield => "giving its core to the next NF after a batch",
    SYS_sched_getaffinity => "std's view of the CPUs it may run on",
    SYS_clock_gettime => "CLOCK_THREAD_CPUTIME_ID for its own CPU time (the monotonic clock is in the vDSO)",
    SYS_clock_getres => "same",
    SYS_clock_nanosleep => "sleeping until a tick",
    SYS_nanosleep => "same",
    SYS_gettimeofday => "the vDSO's fallback",
    SYS_getrandom => "hash-table seeds",
    SYS_getpid => "its own pid",
    SYS_gettid => "its own thread id",
    SYS_rt_sigreturn => "returning from a signal handler",
    SYS_rt_sigprocmask => "abort() and panics mask signals",
    SYS_rt_sigaction => "abort() resets SIGABRT's handler",
    SYS_sigaltstack => "the guard stack std sets up",
    SYS_restart_syscall => "a sleep interrupted by a stop/continue",
    SYS_tgkill => "abort() signals itself",
    SYS_tkill => "same, older libcs",
    SYS_prctl => "PR_GET_AUXV: std's CPU feature detection reads the auxiliary vector on first use; PR_SET_NAME: a standby takes its NF's name when handed its start (it renames only itself)",
    SYS_exit => "ending",
    SYS_exit_group => "ending",
};

/// This CPU's audit architecture value (`AUDIT_ARCH_*`, linux/audit.h):
/// the filter kills calls made through any other ABI (x86_64's 32-bit
/// one, say), whose numbers mean other calls.
fn arch() -> io::Result<u32> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(0xc000_003e),
        "aarch64" => Ok(0xc000_00b7),
        "riscv64" => Ok(0xc000_00f3),
        other => Err(io::Error::other(format!(
            "no seccomp filter for {other} CPUs"
        ))),
    }
}

/// Stands for the NF's pid in the compiled program until
/// [`RunFilter::for_process`] writes the real one in: above any pid the
/// kernel hands out (`pid_max` is at most 2^22).
const PID_PLACEHOLDER: u32 = 0x7fff_fff0;

/// The run-phase program, compiled once (in the template, before any
/// fork): allow [`RUN_ALLOWED`] with the argument rules below, kill on
/// anything else. Compiled once, so each NF only patches in its pid.
#[derive(Debug, Clone)]
pub struct RunFilter {
    prog: Program,
}

impl RunFilter {
    /// Compiles the program.
    pub fn compile() -> io::Result<RunFilter> {
        let mut allowed: Vec<Allowed> = Vec::new();
        for e in RUN_ALLOWED {
            let nr = u32::try_from(e.nr).map_err(|_| io::Error::other("negative call number"))?;
            let rules = match e.nr {
                libc::SYS_mmap | libc::SYS_mprotect => {
                    vec![vec![Cond::MaskedEq(2, libc::PROT_EXEC as u64, 0)]]
                }
                libc::SYS_tgkill | libc::SYS_tkill => {
                    vec![vec![Cond::Eq(0, u64::from(PID_PLACEHOLDER))]]
                }
                libc::SYS_prctl => vec![
                    vec![Cond::Eq(0, PR_GET_AUXV)],
                    vec![Cond::Eq(0, libc::PR_SET_NAME as u64)],
                ],
                libc::SYS_fcntl => vec![
                    vec![Cond::Eq(1, libc::F_GETFD as u64)],
                    vec![Cond::Eq(1, libc::F_GETFL as u64)],
                ],
                _ => Vec::new(),
            };
            allowed.push((nr, rules));
        }
        Ok(RunFilter {
            prog: bpf::compile(arch()?, &allowed)?,
        })
    }

    /// The program for process `pid`: the placeholder replaced in the two
    /// comparisons that use it (`tgkill` and `tkill`'s first argument).
    pub(super) fn for_process(&self, pid: u32) -> io::Result<Program> {
        let mut prog = self.prog.clone();
        let mut patched = 0;
        for ins in &mut prog {
            if ins.k == PID_PLACEHOLDER {
                ins.k = pid;
                patched += 1;
            }
        }
        if patched != 2 {
            return Err(io::Error::other(format!(
                "seccomp filter: {patched} pid comparisons where 2 were expected"
            )));
        }
        Ok(prog)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_has_no_repeats_and_compiles_with_two_pid_slots() {
        let mut nrs: Vec<_> = RUN_ALLOWED.iter().map(|e| e.nr).collect();
        nrs.sort_unstable();
        nrs.dedup();
        assert_eq!(nrs.len(), RUN_ALLOWED.len(), "a call is listed twice");
        assert!(RUN_ALLOWED
            .iter()
            .all(|e| !e.why.is_empty() && !e.name().starts_with("SYS_")));
        let f = RunFilter::compile().unwrap();
        let p = f.for_process(4321).unwrap();
        assert_eq!(p.len(), f.prog.len());
        // seccompiler's linear chain for the same list was 230
        // instructions; the search tree is what makes installs cheaper.
        assert!(p.len() < 150, "{} instructions", p.len());
        eprintln!("run filter: {} instructions", p.len());
        assert_eq!(p.iter().filter(|i| i.k == 4321).count(), 2);
        assert!(p.iter().all(|i| i.k != PID_PLACEHOLDER));
    }
}
