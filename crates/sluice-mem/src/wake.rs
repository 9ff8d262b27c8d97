//! Wake words: how a consumer that found nothing to do sleeps, and how a
//! producer wakes it only when it is actually asleep.
//!
//! The protocol is the classic Dekker pair, and it is what keeps hundreds of
//! idle NFs off the CPU (seed 004 §2.4):
//!
//! * consumer: `prepare_sleep()` (store SLEEPING, full fence), re-check its
//!   rings, then either `cancel_sleep()` or `sleep()` (futex wait while the word
//!   is still SLEEPING);
//! * producer: publish to the ring, then `wake()` (full fence, load the word;
//!   only if it reads SLEEPING swap it to RUNNING and issue the futex wake).
//!
//! Either the consumer's re-check sees the new entries or the producer's load
//! sees SLEEPING, so a wake-up is never lost; a busy consumer costs the
//! producer one fence and one load per batch, no syscall. The futex is
//! process-shared (no `FUTEX_PRIVATE_FLAG`) because the word lives in the
//! arena shared with NF processes.

use crate::sync::{fence, AtomicU32, Ordering};

const RUNNING: u32 = 0;
const SLEEPING: u32 = 1;

/// A 32-bit futex word with the sleep/wake protocol described above.
#[derive(Debug, Default)]
#[repr(C)]
pub struct WakeWord {
    state: AtomicU32,
}

impl WakeWord {
    /// Announces that the owner is about to sleep. The owner must re-check
    /// for work after this and then call [`sleep`](Self::sleep) or
    /// [`cancel_sleep`](Self::cancel_sleep).
    pub fn prepare_sleep(&self) {
        self.state.store(SLEEPING, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Withdraws a [`prepare_sleep`](Self::prepare_sleep) because work arrived.
    pub fn cancel_sleep(&self) {
        self.state.store(RUNNING, Ordering::Relaxed);
    }

    /// Whether the owner has announced sleep and not been woken yet.
    pub fn is_sleeping(&self) -> bool {
        self.state.load(Ordering::Relaxed) == SLEEPING
    }

    /// Like [`wake`](Self::wake)'s check, without waking: after publishing
    /// work (full fence), whether the owner sleeps and would need a wake-up
    /// to see it. A producer that defers the wake-up (adaptive batching)
    /// must then wake the owner later itself; `false` means the owner is
    /// running and will find the work.
    pub fn sleeps_after_publish(&self) -> bool {
        fence(Ordering::SeqCst);
        self.state.load(Ordering::Relaxed) == SLEEPING
    }

    /// Blocks until woken or `timeout` passes (spurious returns are allowed),
    /// then marks the owner running.
    #[cfg(not(loom))]
    pub fn sleep(&self, timeout: Option<std::time::Duration>) {
        use rustix::thread::futex;
        let ts = timeout.map(|t| rustix::time::Timespec {
            tv_sec: t.as_secs() as i64,
            tv_nsec: t.subsec_nanos() as _,
        });
        // EAGAIN (already woken), EINTR and ETIMEDOUT all mean "go look again".
        let _ = futex::wait(&self.state, futex::Flags::empty(), SLEEPING, ts.as_ref());
        self.state.store(RUNNING, Ordering::Relaxed);
    }

    /// Wakes the owner if it is sleeping; returns whether a wake-up (a
    /// syscall) was issued. Call after publishing work.
    #[inline]
    pub fn wake(&self) -> bool {
        fence(Ordering::SeqCst);
        if self.state.load(Ordering::Relaxed) != SLEEPING {
            return false;
        }
        if self.state.swap(RUNNING, Ordering::AcqRel) != SLEEPING {
            return false;
        }
        #[cfg(not(loom))]
        {
            let _ =
                rustix::thread::futex::wake(&self.state, rustix::thread::futex::Flags::empty(), 1);
        }
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    #[test]
    fn wake_without_sleeper_issues_no_syscall() {
        let w = WakeWord::default();
        assert!(!w.wake());
        w.prepare_sleep();
        assert!(w.sleeps_after_publish());
        assert!(w.wake());
        assert!(!w.is_sleeping());
        assert!(!w.sleeps_after_publish());
    }

    #[test]
    fn sleeper_is_woken_by_producer() {
        // A lost wake-up would leave the sleeper in its 60 s futex wait; the
        // 10 s bound below is a liveness check, not a performance assertion.
        let w = WakeWord::default();
        let work = AtomicBool::new(false);
        let slept = std::thread::scope(|s| {
            let sleeper = s.spawn(|| {
                let start = std::time::Instant::now();
                loop {
                    w.prepare_sleep();
                    if work.load(Ordering::SeqCst) {
                        w.cancel_sleep();
                        break;
                    }
                    w.sleep(Some(Duration::from_secs(60)));
                }
                start.elapsed()
            });
            std::thread::sleep(Duration::from_millis(20));
            work.store(true, Ordering::SeqCst);
            w.wake();
            sleeper.join().unwrap()
        });
        assert!(
            slept < Duration::from_secs(10),
            "wake-up lost: slept {slept:?}"
        );
    }
}
