//! An lcore id for every thread that moves packets through a DPDK port.
//!
//! A DPDK mempool keeps a cache of free mbufs per lcore id, and the driver
//! takes receive mbufs from it and gives transmitted ones back to it. A
//! thread sluice started (a worker) has no lcore id (`LCORE_ID_ANY`), so
//! each of those went to the pool's shared ring instead, with an atomic
//! compare-and-swap per burst each way and the ring's cache lines
//! bouncing. The first burst on a thread registers it
//! (`rte_thread_register`); the id is given back when the thread exits.
//! If DPDK has no id left (`RTE_MAX_LCORE`), the thread works uncached,
//! as before.

use super::ffi;

thread_local! {
    static ID: Lcore = Lcore::register();
}

struct Lcore {
    /// This guard registered the id (an EAL thread has its own).
    registered: bool,
}

impl Lcore {
    fn register() -> Lcore {
        Lcore {
            registered: matches!(ffi::thread_register(), Ok(true)),
        }
    }
}

impl Drop for Lcore {
    fn drop(&mut self) {
        if self.registered {
            ffi::thread_unregister();
        }
    }
}

/// Gives the calling thread an lcore id if it has none (after the first
/// call on a thread, one thread-local read).
#[inline]
pub(super) fn ensure() {
    ID.with(|_| ());
}
