//! `hostile`: an NF that forwards packets and, at its first batch, tries
//! one thing an NF must not be able to do. Its `escaped` counter says the
//! attempt succeeded; under the sandbox the attempt kills it instead.
//!
//! | `attack` | what it tries (`target` is what it aims at) |
//! |---|---|
//! | `open_file` | creates the file `target` and writes to it |
//! | `socket` | sends a UDP datagram to `127.0.0.1:target` |
//! | `exec` | runs `/bin/sh -c 'echo pwned > target'` |
//! | `fork` | forks 64 processes that each exit at once |
//! | `signal` | probes its template with `kill(pid, 0)` |
//! | `ptrace` | attaches to its template with `ptrace` |
//! | `exec_memory` | maps memory it could write code into and run |
//! | `setuid` | becomes root again with `setuid(0)` |
//! | `syscall` | calls system call number `target` with zero arguments |
//! | `alloc` | allocates and touches memory, 1 MiB at a time, up to 1 GiB |
//! | `peek` | reads the packet arena around its own packet, from the arena's first byte to its last, for the IPv4 address `target` (another chain's traffic) |
//! | `scribble` | writes `0xff` over the first page after the arena's first region (the platform words): the start of the platform domain's NF slots, its turn words |
//!
//! `peek` learns where the arena lies from `/proc/self/maps` while it may
//! still open files (`open_handles`), then reads every byte from its own
//! packet down to the arena's start and up to its end, as an NF with a
//! pointer into shared memory can. In one trust domain it finds the other
//! chain's packets; in another, the first byte of memory it does not map
//! kills it (SIGSEGV). `scribble` finds the platform words the same way:
//! in the platform's domain it can write the page after them; in another
//! domain that page is withdrawn and the write kills it.
//!
//! Attacks run inside `process`, so an NF that survives one forwards
//! packets as `forwarder` does, and tries again at its next instance.
#![allow(unsafe_code)]

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Attack {
    OpenFile,
    Socket,
    Exec,
    Fork,
    Signal,
    Ptrace,
    ExecMemory,
    Setuid,
    Syscall,
    Alloc,
    Peek,
    Scribble,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    attack: Attack,
    #[serde(default)]
    target: String,
}

struct Hostile {
    attack: Attack,
    target: String,
    /// Attempts made; every attack tries once, except `peek`, which
    /// tries at each batch until it finds what it looks for (the other
    /// chain's packets may not have come yet), at most [`PEEKS`] times.
    tried: u32,
    /// `peek`: the arena's first and last address, from `/proc/self/maps`.
    arena: Option<(usize, usize)>,
    /// `scribble`: where the arena's first region (the platform words)
    /// ends.
    words_end: Option<usize>,
}

/// Batches at which `peek` looks.
const PEEKS: u32 = 50;

/// Counter 0: attacks that succeeded.
const ESCAPED: usize = 0;

impl Hostile {
    /// Whether the attack worked (it returns only if the kernel let it
    /// through or refused it with an error); `own` is the address of the
    /// first packet it was given.
    fn attempt(&self, own: usize) -> bool {
        match self.attack {
            Attack::Peek => {
                let (Some((lo, hi)), Ok(ip)) =
                    (self.arena, self.target.parse::<std::net::Ipv4Addr>())
                else {
                    return false;
                };
                let ip = ip.octets();
                let found = |from: usize, to: usize| {
                    (from..to.saturating_sub(4)).any(|a| {
                        // SAFETY: deliberately none: this reads memory the
                        // NF was never handed, to show whether it is there.
                        (0..4).all(
                            |k| unsafe { std::ptr::read_volatile((a + k) as *const u8) } == ip[k],
                        )
                    })
                };
                // Downwards first: the platform's own buffers lie below
                // any named domain's.
                (lo..own)
                    .rev()
                    .step_by(4096)
                    .any(|page| found(page, page + 4096 + 3))
                    || found(own, hi)
            }
            Attack::Scribble => {
                let Some(at) = self.words_end else {
                    return false;
                };
                for a in at..at + 4096 {
                    // SAFETY: deliberately none: this writes memory the
                    // NF was never handed, to show whether it can.
                    unsafe { std::ptr::write_volatile(a as *mut u8, 0xff) };
                }
                true
            }
            Attack::OpenFile => std::fs::write(&self.target, b"pwned\n").is_ok(),
            Attack::Socket => std::net::UdpSocket::bind("127.0.0.1:0")
                .and_then(|s| s.send_to(b"pwned", format!("127.0.0.1:{}", self.target)))
                .is_ok(),
            Attack::Exec => std::process::Command::new("/bin/sh")
                .args(["-c", &format!("echo pwned > '{}'", self.target)])
                .status()
                .is_ok_and(|s| s.success()),
            Attack::Fork => (0..64).all(|_| {
                // SAFETY: the child only calls _exit, which is
                // async-signal-safe; the parent reaps it.
                match unsafe { libc::fork() } {
                    // SAFETY: ends the child at once.
                    0 => unsafe { libc::_exit(0) },
                    -1 => false,
                    pid => {
                        // SAFETY: waits for our own child; no memory of
                        // ours is written (null status pointer).
                        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
                        true
                    }
                }
            }),
            // SAFETY: integers only; signal 0 probes without delivering.
            Attack::Signal => unsafe { libc::kill(libc::getppid(), 0) == 0 },
            Attack::Ptrace => {
                // SAFETY: integers and null pointers only.
                let r = unsafe {
                    libc::ptrace(
                        libc::PTRACE_ATTACH,
                        libc::getppid(),
                        std::ptr::null_mut::<libc::c_void>(),
                        std::ptr::null_mut::<libc::c_void>(),
                    )
                };
                r == 0
            }
            Attack::ExecMemory => {
                // SAFETY: a fresh anonymous mapping, never dereferenced.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::null_mut(),
                        4096,
                        libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                p != libc::MAP_FAILED
            }
            // SAFETY: integers only.
            Attack::Setuid => unsafe { libc::setuid(0) == 0 },
            Attack::Alloc => {
                let mut held: Vec<Vec<u8>> = Vec::new();
                while held.len() < 1024 {
                    // Non-zero bytes: every page is written, so charged.
                    held.push(vec![0xa5; 1 << 20]);
                }
                std::hint::black_box(&held);
                true
            }
            Attack::Syscall => {
                let nr: libc::c_long = self.target.parse().unwrap_or(-1);
                // SAFETY: zero arguments: no pointer the kernel could
                // follow into our memory. (Numbers that need pointers fail
                // with EFAULT, if the sandbox lets them through at all.)
                unsafe { libc::syscall(nr, 0, 0, 0, 0, 0, 0) >= 0 }
            }
        }
    }
}

/// The lowest start and highest end of the arena's mappings.
fn arena_extent() -> Option<(usize, usize)> {
    arena_mappings().reduce(|(a, b), (c, d)| (a.min(c), b.max(d)))
}

/// Each of the arena's mappings, (start, end).
fn arena_mappings() -> impl Iterator<Item = (usize, usize)> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let ranges: Vec<(usize, usize)> = maps
        .lines()
        .filter(|l| l.contains("sluice-arena"))
        .filter_map(|l| {
            let (a, b) = l.split(' ').next()?.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect();
    ranges.into_iter()
}

impl NetworkFunction for Hostile {
    fn open_handles(&mut self) {
        match self.attack {
            Attack::Peek => self.arena = arena_extent(),
            Attack::Scribble => {
                self.words_end = arena_mappings().min().map(|(_, end)| end);
            }
            _ => {}
        }
    }

    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let Some(own) = batch.get(0).map(|p| p.data().as_ptr() as usize) else {
            return;
        };
        let tries = if self.attack == Attack::Peek {
            PEEKS
        } else {
            1
        };
        if self.tried < tries {
            self.tried += 1;
            if self.attempt(own) {
                self.tried = tries;
                ctx.count(ESCAPED, 1);
                eprintln!("hostile: {:?} succeeded", self.attack);
            }
        }
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    Ok(Box::new(Hostile {
        attack: cfg.attack,
        target: cfg.target,
        tried: 0,
        arena: None,
        words_end: None,
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "hostile",
    summary: "test-only: tries one forbidden thing at its first batch",
    drop_reasons: &[],
    counters: &["escaped"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
