//! A batch of packet buffers in a real arena, refilled before each call,
//! so a bench can run an NF's real `process` the way the platform calls
//! it (shared by the firewall, NAT and flowmon benches; callgrind's
//! `--toggle-collect='*Rig*'` counts its refill and the NF call).

use sluice_mem::{Arena, ArenaConfig, BufferPool, HandleBatch, PoolCache};
use sluice_nf::{Batch, Context, NetworkFunction, Packet};

/// `batch` 64-byte buffers of a private arena, handed to the NF as one batch.
pub struct Rig {
    pub arena: Arena,
    pub handles: HandleBatch,
}

impl Rig {
    /// A rig whose batch holds `batch` buffers.
    pub fn new(batch: usize) -> Rig {
        let arena = Arena::create(ArenaConfig {
            buffers: 1024,
            ring_size: 64,
            nf_slots: 1,
            workers: 1,
            hugepages: false,
            large_buffers: 0,
            ..Default::default()
        })
        .unwrap();
        let pool = BufferPool::new(arena.buffers());
        let mut cache = PoolCache::new(&pool, 64);
        let mut handles = HandleBatch::new();
        for _ in 0..batch {
            let mut h = cache.alloc().unwrap();
            arena.pkt(&mut h).reset(64);
            handles.push(h).unwrap();
        }
        Rig { arena, handles }
    }

    /// Rewrites every packet of the batch with `f`, as the platform hands
    /// packets over (just written, so in cache).
    #[inline(never)]
    pub fn fill(&mut self, mut f: impl FnMut(&mut Packet<'_>)) {
        Batch::new(&self.arena, &mut self.handles).for_each(|p| f(p));
    }

    /// Runs `nf`'s `process` on the batch at time `now`.
    #[inline(never)]
    pub fn process<N: NetworkFunction>(&mut self, nf: &mut N, now: u64) {
        let mut batch = Batch::new(&self.arena, &mut self.handles);
        let mut ctx = Context::new(self.arena.nf_control(0), &self.arena, now);
        nf.process(&mut batch, &mut ctx);
    }

    /// NF counter `i`.
    pub fn counter(&self, i: usize) -> u64 {
        self.arena.nf_control(0).counters[i].load(std::sync::atomic::Ordering::Relaxed)
    }
}
