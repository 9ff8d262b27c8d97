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

use sluice_mem::{
    control::state, Arena, BlobReader, HandleBatch, NfControl, NfEndpoint, NfStats, PktHandle,
    RxEntry, MAX_BATCH,
};
use sluice_nf::runtime::{run_batch, run_flow_end, run_stop, run_tick, Services};
use sluice_nf::{NetworkFunction, PacketIo};

use crate::nf_msg::{self, NfMsg, StateAnswer, StateSide};
use crate::nf_turn::Turns;
use crate::polling::LoopConfig;
use crate::stall::StallMeter;

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
    /// The NF process could not set up its sandbox (see its log).
    pub const SANDBOX_FAILED: i32 = 5;
    /// The NF panicked (the code a panicking Rust program exits with).
    pub const PANICKED: i32 = 101;
    /// The host could not create the process (reported by the host, not
    /// by an NF).
    pub const SPAWN_FAILED: i32 = 127;
}

/// Most `stop` calls for one NF at shutdown (each may emit a batch).
pub const STOP_CALLS_MAX: usize = 4096;

/// Polls before yielding while the transmit ring is full (the platform
/// has not drained it yet) on an NF alone on its core.
const BLOCKED_SPINS: u32 = 256;

/// Builds a fresh instance from a config message (the bytes of a recipe
/// the platform sent on the ring); the NF then takes its config with
/// `NetworkFunction::reconfigure`.
pub type Rebuild<'r> = &'r dyn Fn(&[u8]) -> Result<Box<dyn NetworkFunction>, String>;

/// Runs NF slot `slot` until asked to stop; returns the exit code.
pub fn run_nf_loop(
    arena: &Arena,
    slot: u32,
    worker: u32,
    domain: usize,
    started: LoopConfig,
    nf: &mut dyn NetworkFunction,
    rebuild: Rebuild<'_>,
) -> i32 {
    let batch_size = started.batch;
    let ctl = arena.nf_control(slot);
    let mut ep = NfEndpoint::new(arena, slot, worker).in_domain(domain);
    let batch_size = batch_size.clamp(1, MAX_BATCH);
    let mut raw = [0u32; MAX_BATCH];
    let mut pkts = HandleBatch::new();
    let mut io = LoopIo::new(ctl, nf.alloc_reserve());
    let tick_every = nf.tick_interval_ns().map(|t| t.max(1));
    let mut next_tick = tick_every.map_or(u64::MAX, |t| sluice_sys::monotonic_ns() + t);
    // Empty polls in a row, and when the first of them was.
    let mut idle_polls = 0u32;
    let mut idle_since = 0u64;
    let mut blocked = 0u32;
    // Full batches since the NF last yielded after one (`yield_every`).
    let mut full_batches = 0u32;
    let mut stalls = StallMeter::default();
    let mut messages = BlobReader::default();
    let mut states = StateSide::default();
    let mut turns = Turns::new(arena, slot);
    ctl.running_since_ns
        .store(sluice_sys::monotonic_ns(), Ordering::Relaxed);
    ctl.state.store(state::RUNNING, Ordering::Release);
    loop {
        let stopping = ctl.stop.load(Ordering::Acquire) != 0;
        // How it polls when it schedules itself, as the scheduler says now.
        let cfg = started.in_force(&ctl.budget);
        if io.send_emitted(&mut ep).is_err() {
            return exit_code::RING_CORRUPT;
        }
        let now = sluice_sys::monotonic_ns();
        let busy = ctl.stats.busy_ns.load(Ordering::Relaxed);
        if let Some(gap) = stalls.poll(now, busy) {
            NfStats::add(&ctl.stats.stalls, 1);
            NfStats::add(&ctl.stats.stalled_ns, gap);
        }
        if now >= next_tick && io.out.is_empty() {
            // A tick may block (a mirror's write): never while holding the
            // core's turn if another NF could use it.
            if let Some(t) = turns.turn() {
                if turns.holds(t, now) {
                    turns.end(t, now);
                }
            }
            run_tick(nf, io.services(arena, now));
            next_tick = now + tick_every.unwrap_or(u64::MAX / 2);
            continue;
        }
        // Under turns (`crate::sched`) the NF runs only while it holds its
        // core's turn, or for one batch out of turn when its ring is under
        // pressure; a stopping NF drains without one.
        let mut turn = turns.turn();
        let mut out_of_turn = false;
        if let Some(t) = turn {
            if !stopping && !turns.holds(t, now) {
                if turns.pressed() {
                    turn = None;
                    out_of_turn = true;
                } else {
                    idle_polls = 0;
                    turns.wait(t, next_tick, SLEEP_TIMEOUT);
                    stalls.slept();
                    continue;
                }
            }
        }
        let room = match ep.tx_room() {
            Ok(r) => r,
            Err(_) => return exit_code::RING_CORRUPT,
        };
        if room == 0 {
            // The platform has not drained our output yet: make sure it is
            // awake, then give way to it or to NFs sharing this core (under
            // turns, hand the turn to one with work).
            ep.wake_platform();
            if let Some(t) = turn {
                turns.end(t, now);
            }
            blocked += 1;
            if cfg.yield_while_polling || blocked > BLOCKED_SPINS {
                NfStats::add(&ctl.stats.yields, 1);
                sluice_sys::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        blocked = 0;
        // Room for this batch after what the NF has emitted and not yet sent.
        let room = room.saturating_sub(io.out.len());
        if room == 0 {
            ep.wake_platform();
            NfStats::add(&ctl.stats.yields, 1);
            sluice_sys::yield_now();
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
            if out_of_turn {
                continue;
            }
            if let Some(t) = turn {
                ep.wake_platform();
                turns.end(t, sluice_sys::monotonic_ns());
                continue;
            }
            if idle_polls == 0 {
                idle_since = now;
            }
            idle_polls += 1;
            if idle_polls == 1 || now.saturating_sub(idle_since) < cfg.busy_poll_ns {
                if cfg.yield_while_polling {
                    sluice_sys::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            } else {
                ctl.wake.prepare_sleep();
                if ep.rx_pending().unwrap_or(0) > 0 || ctl.stop.load(Ordering::Acquire) != 0 {
                    ctl.wake.cancel_sleep();
                } else {
                    NfStats::add(&ctl.stats.sleeps, 1);
                    let until_tick = next_tick.saturating_sub(sluice_sys::monotonic_ns());
                    let nap = SLEEP_TIMEOUT.min(std::time::Duration::from_nanos(until_tick.max(1)));
                    ctl.wake.sleep(Some(nap));
                    stalls.slept();
                }
                idle_polls = 0;
            }
            continue;
        }
        idle_polls = 0;
        for &r in &raw[..n] {
            match ep.decode(r) {
                Some(RxEntry::Packet(h)) => {
                    if let Err(h) = pkts.push(h) {
                        // Cannot happen (n ≤ MAX_BATCH); keep the buffer owned.
                        flush(nf, arena, &mut ep, &mut pkts, &mut io, now);
                        let _ = pkts.push(h);
                    }
                }
                Some(RxEntry::Event(sluice_mem::link::RESET_EVENT)) => {
                    // Recycled for its next flow: the packets before the
                    // reset were the last flow's.
                    flush(nf, arena, &mut ep, &mut pkts, &mut io, now);
                    sluice_nf::runtime::run_reset(nf, io.services(arena, now));
                }
                Some(RxEntry::Event(flow)) => {
                    // Keep ring order: packets before the event go first.
                    flush(nf, arena, &mut ep, &mut pkts, &mut io, now);
                    run_flow_end(nf, flow, io.services(arena, now));
                    let _ = ep.send_event(flow);
                }
                Some(RxEntry::Spare(h)) => io.stash.push(h),
                Some(RxEntry::Blob(h)) => {
                    // A message: the packets before it are judged (and
                    // their state checkpointed) before it, those after it
                    // after.
                    flush(nf, arena, &mut ep, &mut pkts, &mut io, now);
                    if let Some((_, bytes)) = messages.push(arena, h) {
                        let answer = match nf_msg::decode(&bytes) {
                            Some(NfMsg::Config(recipe)) => {
                                let (done, text) = match rebuild(recipe) {
                                    Ok(fresh) => match nf.reconfigure(fresh) {
                                        Ok(()) => (true, String::from("taken")),
                                        Err(_) => {
                                            (false, String::from("not an instance of its type"))
                                        }
                                    },
                                    Err(e) => (false, e),
                                };
                                StateAnswer::Text(done, text)
                            }
                            Some(NfMsg::Checkpoint { offset }) => {
                                states.checkpoint(nf, offset, messages.data_room())
                            }
                            Some(NfMsg::Restore {
                                offset,
                                total,
                                chunk,
                            }) => states.restore(nf, offset, total, chunk),
                            None => StateAnswer::Text(false, String::from("unknown message")),
                        };
                        let sent = match answer {
                            StateAnswer::Text(done, text) => {
                                messages.answer(arena, &mut ep, done, &text)
                            }
                            StateAnswer::Data(data) => messages.answer_data(arena, &mut ep, &data),
                        };
                        if sent.is_err() {
                            return exit_code::RING_CORRUPT;
                        }
                    }
                }
                None => {}
            }
        }
        flush(nf, arena, &mut ep, &mut pkts, &mut io, now);
        ep.wake_platform();
        if let Some(t) = turn {
            turns.worked();
            let now = sluice_sys::monotonic_ns();
            if turns.should_pass(now) {
                turns.end(t, now);
            }
        } else if out_of_turn {
            // Give the core back to the holder, as hybrid polling would.
            NfStats::add(&ctl.stats.out_of_turn, 1);
            sluice_sys::yield_now();
        } else if n == batch_size && cfg.yield_every > 0 {
            full_batches += 1;
            if full_batches >= cfg.yield_every {
                full_batches = 0;
                NfStats::add(&ctl.stats.yields, 1);
                sluice_sys::yield_now();
            }
        }
    }
    // Let the NF release what it holds, and hand it to the platform while
    // the platform is still draining (it polls until we report STOPPED).
    // `stop` runs again while it fills its output (one call may emit at
    // most a batch).
    let give_up = sluice_sys::monotonic_ns() + 1_000_000_000;
    let mut calls = 0;
    loop {
        run_stop(nf, io.services(arena, sluice_sys::monotonic_ns()));
        calls += 1;
        let more = io.out.len() == MAX_BATCH && calls < STOP_CALLS_MAX;
        while !io.out.is_empty() && sluice_sys::monotonic_ns() < give_up {
            if io.send_emitted(&mut ep).is_err() {
                return exit_code::RING_CORRUPT;
            }
            ep.wake_platform();
            sluice_sys::yield_now();
        }
        if !more || sluice_sys::monotonic_ns() >= give_up {
            break;
        }
    }
    ctl.state.store(state::STOPPED, Ordering::Release);
    exit_code::STOPPED
}

/// A process NF's packet I/O: allocations come from a stash of spare
/// buffers the platform keeps topped up to the NF's `alloc_reserve`;
/// emitted packets queue here and go out on the transmit ring after the
/// batch that produced them.
struct LoopIo<'a> {
    control: &'a NfControl,
    stash: Vec<PktHandle>,
    out: HandleBatch,
}

impl<'a> LoopIo<'a> {
    fn new(control: &'a NfControl, reserve: u32) -> Self {
        let reserve = reserve.min(MAX_BATCH as u32);
        control.spare_target.store(reserve, Ordering::Relaxed);
        LoopIo {
            control,
            stash: Vec::with_capacity(reserve as usize * 2 + MAX_BATCH),
            out: HandleBatch::new(),
        }
    }

    fn services<'s>(&'s mut self, arena: &'s Arena, now_ns: u64) -> Services<'s> {
        Services {
            control: self.control,
            arena,
            now_ns,
            io: Some(self),
            raw: None,
        }
    }

    /// Sends as much of the emitted queue as the transmit ring takes.
    fn send_emitted(&mut self, ep: &mut NfEndpoint<'_>) -> Result<(), sluice_mem::RingCorrupt> {
        if !self.out.is_empty() {
            ep.send(&mut self.out)?;
        }
        Ok(())
    }
}

impl PacketIo for LoopIo<'_> {
    fn alloc(&mut self) -> Option<PktHandle> {
        let h = self.stash.pop()?;
        NfStats::add(&self.control.spares_consumed, 1);
        Some(h)
    }

    fn give_back(&mut self, h: PktHandle) {
        self.stash.push(h);
        let c = &self.control.spares_consumed;
        c.store(
            c.load(Ordering::Relaxed).saturating_sub(1),
            Ordering::Relaxed,
        );
    }

    fn emit(&mut self, h: PktHandle, _fresh: bool) -> Result<(), PktHandle> {
        // The platform tells originated packets from the owner tag of the
        // buffer, which it keeps in private memory; `fresh` is not trusted.
        self.out.push(h)
    }
}

fn flush(
    nf: &mut dyn NetworkFunction,
    arena: &Arena,
    ep: &mut NfEndpoint<'_>,
    pkts: &mut HandleBatch,
    io: &mut LoopIo<'_>,
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
    let mut svc = io.services(arena, now);
    svc.raw = Some(&mut raw);
    run_batch(nf, pkts, svc);
    // Room was reserved before dequeuing, so everything fits; emitted
    // packets follow as far as room allows (the rest go next pass).
    let _ = ep.send(pkts);
    let _ = io.send_emitted(ep);
    if !injected.is_empty() {
        let _ = ep.send_raw_for_fault_injection(&injected);
    }
    debug_assert!(pkts.is_empty());
}
