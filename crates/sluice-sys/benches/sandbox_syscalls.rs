//! What the NF sandbox adds to the system calls an NF makes on its packet
//! path (`sched_yield` after a batch, a futex wake of its worker, its CPU
//! clock): each measured in a forked child, unconfined and confined, in
//! alternating rounds. Not criterion: a confined process may not write
//! criterion's files, so each child times itself and reports through a
//! pipe. `cargo bench -p sluice-sys --bench sandbox_syscalls`.
#![allow(unsafe_code)]
#![allow(missing_docs)]

use std::time::Instant;

use sluice_sys::sandbox::{self, Confinement};
use sluice_sys::Forked;

const CALLS: u32 = 200_000;
const ROUNDS: usize = 7;

type Call = fn();

fn yield_now() {
    sluice_sys::yield_now();
}

fn futex_wake() {
    let word = std::sync::atomic::AtomicU32::new(0);
    // SAFETY: FUTEX_WAKE on a live, aligned word wakes nobody and reads
    // nothing else.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        )
    };
}

fn thread_clock() {
    std::hint::black_box(sluice_sys::thread_cpu_ns());
}

/// ns per call of `call` in a fresh child, confined or not.
fn measure(call: Call, confined: bool) -> f64 {
    let filter = sandbox::RunFilter::compile().expect("compile");
    let (r, w) = sluice_sys::output_pipe().expect("pipe");
    match sluice_sys::fork_single_threaded().expect("fork") {
        Forked::Child => {
            if confined {
                let c = Confinement {
                    seccomp: true,
                    ..Confinement::default()
                };
                sandbox::confine(&c, sluice_sys::getpid(), Some(&filter)).expect("confine");
            }
            let t = Instant::now();
            for _ in 0..CALLS {
                call();
            }
            let ns = t.elapsed().as_nanos() as f64 / f64::from(CALLS);
            let _ = rustix::io::write(&w, &ns.to_le_bytes());
            // SAFETY: ends the child without unwinding into the parent's
            // frames.
            unsafe { libc::_exit(0) }
        }
        Forked::Parent(pid) => {
            drop(w);
            let _ = sluice_sys::wait_for(pid);
            let mut b = [0u8; 8];
            rustix::io::read(&r, &mut b).expect("child's figure");
            f64::from_le_bytes(b)
        }
    }
}

/// µs the two confinement steps take in a fresh child (as root: its own
/// uid, IPC and UTS namespaces, no capabilities, both filters).
fn steps() -> (f64, f64) {
    // Compiled once by the template in the platform; not part of a start.
    let filter = sandbox::RunFilter::compile().expect("compile");
    let (r, w) = sluice_sys::output_pipe().expect("pipe");
    match sluice_sys::fork_single_threaded().expect("fork") {
        Forked::Child => {
            let t = Instant::now();
            sandbox::enter_build_phase().expect("build phase");
            let build = t.elapsed().as_secs_f64() * 1e6;
            let root = sandbox::can_change_identity();
            let c = Confinement {
                user: root.then_some(sandbox::SANDBOX_ID_BASE + 4000),
                namespaces: sandbox::Namespaces {
                    ipc: root,
                    uts: root,
                    ..Default::default()
                },
                drop_capabilities: true,
                seccomp: true,
            };
            let t = Instant::now();
            sandbox::confine(
                &c,
                rustix::process::getppid().expect("parent"),
                Some(&filter),
            )
            .expect("confine");
            let run = t.elapsed().as_secs_f64() * 1e6;
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&build.to_le_bytes());
            b[8..].copy_from_slice(&run.to_le_bytes());
            let _ = rustix::io::write(&w, &b);
            // SAFETY: ends the child without unwinding into the parent's
            // frames.
            unsafe { libc::_exit(0) }
        }
        Forked::Parent(pid) => {
            drop(w);
            let _ = sluice_sys::wait_for(pid);
            let mut b = [0u8; 16];
            rustix::io::read(&r, &mut b).expect("child's figures");
            let f = |x: &[u8]| f64::from_le_bytes(x.try_into().expect("8 bytes"));
            (f(&b[..8]), f(&b[8..]))
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; `cargo test` runs benches too, briefly.
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    println!("call            unconfined ns  confined ns  added ns  ({ROUNDS} rounds, medians)");
    for (name, call) in [
        ("sched_yield", yield_now as Call),
        ("futex_wake", futex_wake),
        ("thread_clock", thread_clock),
    ] {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            off.push(measure(call, false));
            on.push(measure(call, true));
        }
        let (a, b) = (median(off), median(on));
        println!("{name:<15} {a:>13.1} {b:>12.1} {:>9.1}", b - a);
    }
    let (mut build, mut run) = (Vec::new(), Vec::new());
    for _ in 0..(ROUNDS * 3) {
        let (b, r) = steps();
        build.push(b);
        run.push(r);
    }
    println!(
        "confinement per NF start: build phase {:.1} µs, run phase {:.1} µs (medians of {})",
        median(build),
        median(run),
        ROUNDS * 3
    );
}
