//! Runs an NF on frames without a platform: for NF unit and golden tests.
//!
//! The harness owns a small private arena and pool, assigns flow ids the way
//! the platform does (one id per connection, both directions alike), and
//! returns each packet's verdict and final bytes.

use std::collections::HashMap;

use sluice_mem::{Arena, ArenaConfig, BufferPool, HandleBatch, PktHandle, PoolCache, MAX_BATCH};
use sluice_packet::flow::flow_key;
use sluice_packet::gso::Offload;

use crate::batch::Batch;
use crate::context::Context;
use crate::nf::NetworkFunction;
use crate::owned::PacketIo;
use crate::verdict::Verdict;

/// The harness clock at the start: one second, so that an NF subtracting
/// a timeout from "now" does not go below zero.
const START_NS: u64 = 1_000_000_000;

/// What happened to one input frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The NF's verdict.
    pub verdict: Verdict,
    /// The frame after the NF (rewrites applied).
    pub frame: Vec<u8>,
}

/// A single-NF test bench.
pub struct Harness {
    arena: Arena,
    pool: BufferPool,
    flows: HashMap<sluice_packet::flow::FlowKey, u32>,
    now_ns: u64,
    emitted: Vec<Outcome>,
}

/// The harness's packet I/O: allocations come from its pool, emitted
/// packets are recorded (bytes and verdict) and freed, with the platform's
/// per-call emit limit.
struct HarnessIo<'h> {
    arena: &'h Arena,
    cache: PoolCache<'h>,
    emitted: &'h mut Vec<Outcome>,
    this_call: usize,
}

impl PacketIo for HarnessIo<'_> {
    fn alloc(&mut self) -> Option<PktHandle> {
        self.cache.alloc()
    }

    fn give_back(&mut self, h: PktHandle) {
        self.cache.free(h);
    }

    fn emit(&mut self, mut h: PktHandle, _fresh: bool) -> Result<(), PktHandle> {
        if self.this_call >= MAX_BATCH {
            return Err(h);
        }
        self.this_call += 1;
        let p = self.arena.pkt(&mut h);
        self.emitted.push(Outcome {
            verdict: Verdict::decode(p.verdict_raw()).unwrap_or(Verdict::Next),
            frame: p.data().to_vec(),
        });
        self.cache.free(h);
        Ok(())
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A harness with 1024 buffers.
    pub fn new() -> Self {
        let arena = Arena::create(ArenaConfig {
            buffers: 1024,
            ring_size: 64,
            nf_slots: 1,
            workers: 1,
            hugepages: false,
            large_buffers: 0,
            ..Default::default()
        })
        .expect("a 2 MiB arena can be created");
        let pool = BufferPool::new(arena.buffers());
        Harness {
            arena,
            pool,
            flows: HashMap::new(),
            now_ns: START_NS,
            emitted: Vec::new(),
        }
    }

    /// Makes the harness as new for the next NF: every buffer back in the
    /// pool, no flows, nothing emitted, the clock and the NF's published
    /// counters at their start. Far cheaper than [`Harness::new`] (whose
    /// arena is mapped and touched afresh), for running many fresh NFs one
    /// after another, as a fuzzer does. Handles from before are invalid:
    /// the NF that held them must be gone.
    pub fn reset(&mut self) {
        self.pool = BufferPool::new(self.arena.buffers());
        self.flows.clear();
        self.emitted.clear();
        self.now_ns = START_NS;
        let c = self.arena.nf_control(0);
        for x in c.counters.iter().chain(c.ext.0.iter()) {
            x.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Sets the clock the NF sees.
    pub fn set_now_ns(&mut self, now: u64) {
        self.now_ns = now;
    }

    /// NF-specific counter `i` as published by the NF.
    pub fn counter(&self, i: usize) -> u64 {
        self.arena.nf_control(0).counters[i].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The flow id the harness assigned to `frame`'s connection (if it parses).
    pub fn flow_id_of(&mut self, frame: &[u8]) -> Option<u32> {
        let key = flow_key(frame).ok()?.canonical();
        let next = self.flows.len() as u32;
        Some(*self.flows.entry(key).or_insert(next))
    }

    /// Packets the NF emitted with `Context::emit` since the last call, in
    /// order.
    pub fn take_emitted(&mut self) -> Vec<Outcome> {
        std::mem::take(&mut self.emitted)
    }

    fn with_context(&mut self, f: impl FnOnce(&mut Context<'_>)) {
        let mut io = HarnessIo {
            arena: &self.arena,
            cache: PoolCache::new(&self.pool, 64),
            emitted: &mut self.emitted,
            this_call: 0,
        };
        let mut ctx =
            Context::new(self.arena.nf_control(0), &self.arena, self.now_ns).with_io(&mut io);
        f(&mut ctx);
    }

    /// Runs the NF's timer hook at the harness clock.
    pub fn tick(&mut self, nf: &mut dyn NetworkFunction) {
        self.with_context(|ctx| nf.tick(ctx));
    }

    /// Runs the NF's stop hook at the harness clock.
    pub fn stop(&mut self, nf: &mut dyn NetworkFunction) {
        self.with_context(|ctx| nf.stop(ctx));
    }

    /// Extended counter `i` as published by the NF.
    pub fn ext_counter(&self, i: usize) -> u64 {
        self.arena.nf_control(0).ext.0[i].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends `frames` through `nf` in batches of up to [`MAX_BATCH`] and
    /// returns the outcome of every packet left in the batch (packets the
    /// NF took out with `Batch::take_if` come back through
    /// [`Self::take_emitted`] once it emits them).
    pub fn run(&mut self, nf: &mut dyn NetworkFunction, frames: &[Vec<u8>]) -> Vec<Outcome> {
        self.run_offloaded(nf, frames, &Offload::NONE)
    }

    /// [`Self::run`] with every packet carrying `offload` (as ports with
    /// `offload: true` deliver them: partial checksums, super-packets).
    pub fn run_offloaded(
        &mut self,
        nf: &mut dyn NetworkFunction,
        frames: &[Vec<u8>],
        offload: &Offload,
    ) -> Vec<Outcome> {
        let mut out = Vec::with_capacity(frames.len());
        for chunk in frames.chunks(MAX_BATCH) {
            let ids: Vec<u32> = chunk
                .iter()
                .map(|f| self.flow_id_of(f).unwrap_or(u32::MAX))
                .collect();
            let mut cache = PoolCache::new(&self.pool, 64);
            let mut handles = HandleBatch::new();
            for (frame, id) in chunk.iter().zip(ids) {
                let mut h = cache.alloc().expect("harness pool holds a full batch");
                let mut p = self.arena.pkt(&mut h);
                p.reset(frame.len());
                let len = p.set_len(frame.len());
                p.data_mut().copy_from_slice(&frame[..len]);
                p.set_flow_id(id);
                p.set_timestamp_ns(self.now_ns);
                p.set_offload(offload);
                handles.push(h).expect("chunk ≤ MAX_BATCH");
            }
            let mut batch = Batch::new(&self.arena, &mut handles);
            batch.reset_verdicts();
            let mut io = HarnessIo {
                arena: &self.arena,
                cache: PoolCache::new(&self.pool, 64),
                emitted: &mut self.emitted,
                this_call: 0,
            };
            let mut ctx =
                Context::new(self.arena.nf_control(0), &self.arena, self.now_ns).with_io(&mut io);
            nf.process(&mut batch, &mut ctx);
            drop(io);
            batch.for_each(|p| {
                out.push(Outcome {
                    verdict: p.verdict(),
                    frame: p.data().to_vec(),
                })
            });
            handles.drain(|h| cache.free(h));
        }
        out
    }

    /// Delivers a flow-end event for `flow_id`.
    pub fn end_flow(&mut self, nf: &mut dyn NetworkFunction, flow_id: u32) {
        self.with_context(|ctx| nf.flow_end(flow_id, ctx));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owned::OwnedPacket;

    /// Takes every packet out of its batch and never gives it back (an NF
    /// that queues), counting them in counter 0.
    struct Hoarder(Vec<OwnedPacket>);

    impl NetworkFunction for Hoarder {
        fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
            let before = self.0.len();
            batch.take_if(|_| true, |p| self.0.push(p));
            ctx.count(0, (self.0.len() - before) as u64);
        }
    }

    /// After `reset` the harness has all its buffers back, no flows, its
    /// start clock and zero counters, whatever the NF before it hoarded.
    #[test]
    fn reset_takes_back_every_buffer() {
        let mut h = Harness::new();
        let all = h.pool.global_free();
        let frames: Vec<Vec<u8>> = (0..MAX_BATCH).map(|i| vec![i as u8; 60]).collect();
        let batches = all / MAX_BATCH - 1;
        let mut nf = Hoarder(Vec::new());
        for _ in 0..batches {
            assert!(h.run(&mut nf, &frames).is_empty());
        }
        let held = batches * MAX_BATCH;
        assert_eq!(h.counter(0), held as u64);
        assert_eq!(h.pool.global_free(), all - held);
        h.set_now_ns(5);
        // The hoarder goes without giving anything back.
        drop(nf);
        h.reset();
        assert_eq!(h.pool.global_free(), all);
        assert_eq!(h.counter(0), 0);
        assert_eq!(h.now_ns, START_NS);
        assert!(h.flows.is_empty() && h.emitted.is_empty());
        let mut nf = Hoarder(Vec::new());
        for _ in 0..batches {
            h.run(&mut nf, &frames);
        }
        assert_eq!(h.counter(0), held as u64);
        drop(nf);
    }
}

/// A [`crate::Resolver`] that knows no names: builds an NF whose config
/// refers to no other NF or port (tests, benchmarks, fuzzers).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoNames;

impl crate::Resolver for NoNames {
    fn nf(&self, _: &str) -> Option<crate::NfId> {
        None
    }
    fn port(&self, _: &str) -> Option<crate::PortId> {
        None
    }
    fn input_port(&self, _: &str) -> Option<crate::PortId> {
        None
    }
}
