//! The loop an NF process runs.
//!
//! Hybrid polling (Flurries, seed 004 §2.4; KBNets, seed 000 §4): while
//! packets keep coming the NF polls its ring with no syscall; after a full
//! batch it yields the CPU so NFs sharing a core take turns in batch-sized
//! slices; when its ring stays empty it spins briefly, then sleeps on its
//! wake word until the platform enqueues again. Events (flow ends) travel in
//! ring order with packets and are echoed back so the platform can pass
//! them to the next hop.

use std::sync::atomic::Ordering;

use sluice_mem::{control::state, Arena, HandleBatch, NfEndpoint, NfStats, RxEntry, MAX_BATCH};
use sluice_nf::runtime::{run_batch_with, run_flow_end};
use sluice_nf::NetworkFunction;

/// Upper bound on one sleep, so a missed stop request is noticed.
const SLEEP_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(100);

/// Exit codes of an NF process.
pub mod exit_code {
    /// Stopped on request.
    pub const STOPPED: i32 = 0;
    /// The NF could not be built from its config.
    pub const BUILD_FAILED: i32 = 3;
    /// The platform's side of the rings was inconsistent.
    pub const RING_CORRUPT: i32 = 4;
}

/// How an NF process shares its core.
#[derive(Debug, Clone, Copy)]
pub struct LoopConfig {
    /// Packets per batch.
    pub batch: usize,
    /// Yield the CPU after every full batch. Worth it only when other NFs
    /// share this core (they get their turn after one batch, seed 000 §4);
    /// alone on a core, yielding to an unrelated process would forfeit a
    /// whole scheduler slice.
    pub yield_after_batch: bool,
    /// Empty polls before yielding when idle.
    pub idle_spins: u32,
    /// Yields before sleeping when idle.
    pub idle_yields: u32,
}

impl LoopConfig {
    /// The policy for an NF that shares its core with `sharing - 1` other
    /// NFs. Alone, an NF polls a while before sleeping (cheap wake-ups, low
    /// latency). Shared, an idle NF that keeps polling holds the core for a
    /// scheduler slice while a sibling with packets waits (milliseconds of
    /// latency, seed 004 §2.4), so it yields once and then sleeps.
    pub fn for_sharing(batch: usize, sharing: usize) -> LoopConfig {
        let shared = sharing > 1;
        LoopConfig {
            batch,
            yield_after_batch: shared,
            idle_spins: if shared { 0 } else { 256 },
            idle_yields: if shared { 1 } else { 16 },
        }
    }
}

/// Runs NF slot `slot` until asked to stop; returns the exit code.
pub fn run_nf_loop(
    arena: &Arena,
    slot: u32,
    worker: u32,
    cfg: LoopConfig,
    nf: &mut dyn NetworkFunction,
) -> i32 {
    let batch_size = cfg.batch;
    let ctl = arena.nf_control(slot);
    let mut ep = NfEndpoint::new(arena, slot, worker);
    let batch_size = batch_size.clamp(1, MAX_BATCH);
    let mut raw = [0u32; MAX_BATCH];
    let mut pkts = HandleBatch::new();
    let mut idle = 0u32;
    ctl.state.store(state::RUNNING, Ordering::Release);
    loop {
        let stopping = ctl.stop.load(Ordering::Acquire) != 0;
        let room = match ep.tx_room() {
            Ok(r) => r,
            Err(_) => return exit_code::RING_CORRUPT,
        };
        if room == 0 {
            // The platform has not drained our output yet: make sure it is
            // awake, then give way to it or to NFs sharing this core.
            ep.wake_platform();
            idle += 1;
            if idle > cfg.idle_spins {
                sluice_sys::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        let want = batch_size.min(room);
        let n = match ep.recv_raw(&mut raw[..want]) {
            Ok(n) => n,
            Err(_) => return exit_code::RING_CORRUPT,
        };
        if n == 0 {
            if stopping {
                break;
            }
            idle += 1;
            if idle <= cfg.idle_spins {
                std::hint::spin_loop();
            } else if idle <= cfg.idle_spins + cfg.idle_yields {
                sluice_sys::yield_now();
            } else {
                ctl.wake.prepare_sleep();
                if ep.rx_pending().unwrap_or(0) > 0 || ctl.stop.load(Ordering::Acquire) != 0 {
                    ctl.wake.cancel_sleep();
                } else {
                    NfStats::add(&ctl.stats.sleeps, 1);
                    ctl.wake.sleep(Some(SLEEP_TIMEOUT));
                }
                idle = 0;
            }
            continue;
        }
        idle = 0;
        let now = sluice_sys::monotonic_ns();
        for &r in &raw[..n] {
            match ep.decode(r) {
                Some(RxEntry::Packet(h)) => {
                    if let Err(h) = pkts.push(h) {
                        // Cannot happen (n ≤ MAX_BATCH); keep the buffer owned.
                        flush(nf, arena, &mut ep, &mut pkts, ctl, now);
                        let _ = pkts.push(h);
                    }
                }
                Some(RxEntry::Event(flow)) => {
                    // Keep ring order: packets before the event go first.
                    flush(nf, arena, &mut ep, &mut pkts, ctl, now);
                    run_flow_end(nf, ctl, flow, now);
                    let _ = ep.send_event(flow);
                }
                None => {}
            }
        }
        flush(nf, arena, &mut ep, &mut pkts, ctl, now);
        ep.wake_platform();
        if n == batch_size && cfg.yield_after_batch {
            NfStats::add(&ctl.stats.yields, 1);
            sluice_sys::yield_now();
        }
    }
    ctl.state.store(state::STOPPED, Ordering::Release);
    exit_code::STOPPED
}

fn flush(
    nf: &mut dyn NetworkFunction,
    arena: &Arena,
    ep: &mut NfEndpoint<'_>,
    pkts: &mut HandleBatch,
    ctl: &sluice_mem::NfControl,
    now: u64,
) {
    if pkts.is_empty() {
        return;
    }
    let mut injected = Vec::new();
    let mut raw = |entries: &[u32]| {
        injected.extend_from_slice(entries);
        entries.len()
    };
    run_batch_with(nf, arena, pkts, ctl, now, Some(&mut raw));
    // Room was reserved before dequeuing, so everything fits.
    let _ = ep.send(pkts);
    if !injected.is_empty() {
        let _ = ep.send_raw_for_fault_injection(&injected);
    }
    debug_assert!(pkts.is_empty());
}
