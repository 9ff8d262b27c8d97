//! `shaper`: a token-bucket shaper (`rate`, `burst`) with a bounded FIFO.
//!
//! A packet passes at once while the queue is empty and the bucket holds
//! its length in tokens; otherwise it joins the queue (taken out of the
//! batch) and is released, in arrival order, as tokens accumulate —
//! on every batch and on every tick. A packet larger than `burst` could
//! never get enough tokens and is dropped as `too_big` (as tc-tbf does);
//! a packet arriving at a full queue is dropped as `queue_full`. `stop`
//! releases everything still queued.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `rate` | rate | required | token rate (bytes/s, or tc units: `10mbit`) |
//! | `burst` | size | required | bucket size (bytes, or `16kb`) |
//! | `queue` | 1–65536 | 1024 | queue limit, packets |
//! | `tick_us` | 10–1000000 | 100 | release timer when no batch arrives |
//!
//! Counters: `passed`, `queued`, `released`, `backlog` (gauge),
//! `passed_bytes`, `released_bytes`. Drop reasons: `queue_full`, `too_big`.
//!
//! ```yaml
//! - name: shape
//!   type: shaper
//!   config: { rate: 10mbit, burst: 16kb, queue: 512 }
//! ```
//!
//! [`Shaper`] holds the shaping logic over any queued item type, so it is
//! tested without buffers; [`ShaperNf`] queues owned packets.

use std::collections::VecDeque;

use serde::Deserialize;
use sluice_nf::{
    Batch, BuildContext, Context, DropReason, NetworkFunction, NfType, OwnedPacket, Verdict,
    MAX_BATCH,
};
use sluice_spec::SpecError;

use super::rate::Quantity;

const SCALE: u64 = 1_000_000_000;

/// A token bucket of `burst` bytes filled at `rate` bytes/s.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: u64,
    cap: u64,
    tokens: u64,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket at `now_ns`.
    pub fn new(rate: u64, burst: u64, now_ns: u64) -> TokenBucket {
        TokenBucket {
            rate,
            cap: burst.saturating_mul(SCALE),
            tokens: burst.saturating_mul(SCALE),
            last_ns: now_ns,
        }
    }

    /// The burst size in bytes.
    pub fn burst(&self) -> u64 {
        self.cap / SCALE
    }

    #[inline]
    fn refill(&mut self, now_ns: u64) {
        let dt = u128::from(now_ns.saturating_sub(self.last_ns));
        self.last_ns = self.last_ns.max(now_ns);
        let add = (dt * u128::from(self.rate)).min(u128::from(u64::MAX)) as u64;
        self.tokens = self.tokens.saturating_add(add).min(self.cap);
    }

    /// Takes `bytes` tokens if the bucket holds them at `now_ns`.
    #[inline]
    pub fn try_take(&mut self, bytes: u64, now_ns: u64) -> bool {
        self.refill(now_ns);
        let n = bytes.saturating_mul(SCALE);
        if self.tokens >= n {
            self.tokens -= n;
            true
        } else {
            false
        }
    }

    /// Gives back tokens taken for a packet that could not be sent.
    pub fn refund(&mut self, bytes: u64) {
        self.tokens = self
            .tokens
            .saturating_add(bytes.saturating_mul(SCALE))
            .min(self.cap);
    }
}

/// What to do with an arriving packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Send it now (tokens taken).
    Pass,
    /// Queue it.
    Queue,
    /// Drop it: the queue is full.
    QueueFull,
    /// Drop it: larger than the burst, it could never be sent.
    TooBig,
}

/// The shaper: a bucket and a FIFO of at most `limit` items, each with its
/// length.
#[derive(Debug)]
pub struct Shaper<T> {
    bucket: TokenBucket,
    queue: VecDeque<(T, u32)>,
    limit: usize,
}

impl<T> Shaper<T> {
    /// A shaper with a full bucket; the queue's memory is reserved now, so
    /// queueing never allocates.
    pub fn new(rate: u64, burst: u64, limit: usize, now_ns: u64) -> Shaper<T> {
        Shaper {
            bucket: TokenBucket::new(rate, burst, now_ns),
            queue: VecDeque::with_capacity(limit),
            limit,
        }
    }

    /// Packets queued.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Decides for an arriving packet of `len` bytes when `pending` more
    /// packets were already admitted to the queue but not yet pushed.
    #[inline]
    pub fn admit(&mut self, len: u32, pending: usize, now_ns: u64) -> Admit {
        if u64::from(len) > self.bucket.burst() {
            Admit::TooBig
        } else if self.queue.is_empty() && pending == 0 && self.bucket.try_take(len.into(), now_ns)
        {
            Admit::Pass
        } else if self.queue.len() + pending >= self.limit {
            Admit::QueueFull
        } else {
            Admit::Queue
        }
    }

    /// Appends an admitted item (never beyond the reserved capacity: if the
    /// caller queues more than `admit` allowed, the item is handed back).
    pub fn push(&mut self, item: T, len: u32) -> Result<(), T> {
        if self.queue.len() >= self.limit {
            return Err(item);
        }
        self.queue.push_back((item, len));
        Ok(())
    }

    /// Releases queued items in order while tokens allow; `send` may refuse
    /// an item (it is put back at the head, its tokens refunded, and
    /// release stops). Returns how many were sent.
    pub fn release(&mut self, now_ns: u64, send: impl FnMut(T) -> Result<(), T>) -> usize {
        self.release_bytes(now_ns, send).0
    }

    /// [`Self::release`], also returning the bytes sent.
    pub fn release_bytes(
        &mut self,
        now_ns: u64,
        mut send: impl FnMut(T) -> Result<(), T>,
    ) -> (usize, u64) {
        let (mut sent, mut bytes) = (0, 0);
        while let Some((_, len)) = self.queue.front() {
            let len = u64::from(*len);
            if !self.bucket.try_take(len, now_ns) {
                break;
            }
            let Some((item, l)) = self.queue.pop_front() else {
                break;
            };
            if let Err(item) = send(item) {
                self.bucket.refund(len);
                self.queue.push_front((item, l));
                break;
            }
            sent += 1;
            bytes += len;
        }
        (sent, bytes)
    }

    /// Takes the head item regardless of tokens (shutdown).
    pub fn pop(&mut self) -> Option<(T, u32)> {
        self.queue.pop_front()
    }

    /// Removes every queued item regardless of tokens, in order.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.queue.drain(..).map(|(t, _)| t)
    }

    /// Puts an item back at the head (one `drain`ed but not sendable).
    pub fn requeue_front(&mut self, item: T, len: u32) {
        self.queue.push_front((item, len));
    }
}

const QUEUE_FULL: DropReason = DropReason::nf_local(0);
const TOO_BIG: DropReason = DropReason::nf_local(1);

const C_PASSED: usize = 0;
const C_QUEUED: usize = 1;
const C_RELEASED: usize = 2;
const C_BACKLOG: usize = 3;
const C_PASSED_BYTES: usize = 4;
const C_RELEASED_BYTES: usize = 5;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    rate: Quantity,
    burst: Quantity,
    #[serde(default = "default_queue")]
    queue: usize,
    #[serde(default = "default_tick")]
    tick_us: u64,
}

fn default_queue() -> usize {
    1024
}
fn default_tick() -> u64 {
    100
}

/// The shaper NF.
pub struct ShaperNf {
    core: Shaper<OwnedPacket>,
    tick_ns: u64,
    /// This batch's newly queued packets and their lengths, staged because
    /// `take_if`'s decision and its hand-over are two closures. Both
    /// hold at most one batch and are reserved at build.
    staged: Vec<OwnedPacket>,
    lens: Vec<u32>,
}

impl ShaperNf {
    fn release(&mut self, now: u64, ctx: &mut Context<'_>) {
        let (n, bytes) = self.core.release_bytes(now, |p| ctx.emit(p, Verdict::Next));
        ctx.count(C_RELEASED, n as u64);
        ctx.count(C_RELEASED_BYTES, bytes);
        ctx.set_gauge(C_BACKLOG, self.core.queued() as u64);
    }
}

impl NetworkFunction for ShaperNf {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        // Queued packets go first, so arrivals cannot overtake them.
        self.release(now, ctx);
        let (core, staged, lens) = (&mut self.core, &mut self.staged, &mut self.lens);
        let (mut passed, mut passed_bytes) = (0u64, 0u64);
        batch.take_if(
            |p| {
                let len = p.data().len() as u32;
                match core.admit(len, lens.len(), now) {
                    Admit::Pass => {
                        passed += 1;
                        passed_bytes += u64::from(len);
                        false
                    }
                    Admit::Queue => {
                        lens.push(len);
                        true
                    }
                    Admit::QueueFull => {
                        p.drop_with(QUEUE_FULL);
                        false
                    }
                    Admit::TooBig => {
                        p.drop_with(TOO_BIG);
                        false
                    }
                }
            },
            |p| staged.push(p),
        );
        let queued = staged.len() as u64;
        for (p, len) in staged.drain(..).zip(lens.drain(..)) {
            // `admit` left room for every staged packet, so this cannot
            // fail; if it did, the loss is still counted.
            if let Err(p) = core.push(p, len) {
                if let Err(p) = ctx.emit(p, Verdict::Drop(QUEUE_FULL)) {
                    ctx.discard(p);
                }
            }
        }
        ctx.count(C_PASSED, passed);
        ctx.count(C_PASSED_BYTES, passed_bytes);
        ctx.count(C_QUEUED, queued);
        ctx.set_gauge(C_BACKLOG, self.core.queued() as u64);
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some(self.tick_ns)
    }

    fn tick(&mut self, ctx: &mut Context<'_>) {
        self.release(ctx.now_ns(), ctx);
    }

    fn stop(&mut self, ctx: &mut Context<'_>) {
        let (mut n, mut bytes) = (0u64, 0u64);
        while let Some((p, len)) = self.core.pop() {
            if let Err(p) = ctx.emit(p, Verdict::Next) {
                // This call's emit budget is spent: the platform reclaims
                // the rest as `shutdown` drops.
                self.core.requeue_front(p, len);
                break;
            }
            n += 1;
            bytes += u64::from(len);
        }
        ctx.count(C_RELEASED, n);
        ctx.count(C_RELEASED_BYTES, bytes);
        ctx.set_gauge(C_BACKLOG, self.core.queued() as u64);
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    if ctx.config.is_null() {
        return Err(ctx
            .config
            .error("shaper needs a config with `rate` and `burst`"));
    }
    let cfg: Config = ctx.config.deserialize()?;
    let rate = cfg
        .rate
        .rate()
        .map_err(|m| ctx.config.error_at_path("rate", m))?;
    let burst = cfg
        .burst
        .size()
        .map_err(|m| ctx.config.error_at_path("burst", m))?;
    if burst < 64 {
        return Err(ctx.config.error_at_path(
            "burst",
            format!("{burst} bytes is smaller than any Ethernet frame"),
        ));
    }
    if cfg.queue == 0 || cfg.queue > 65_536 {
        return Err(ctx
            .config
            .error_at_path("queue", "must be between 1 and 65536 packets"));
    }
    if !(10..=1_000_000).contains(&cfg.tick_us) {
        return Err(ctx
            .config
            .error_at_path("tick_us", "must be between 10 and 1000000"));
    }
    Ok(Box::new(ShaperNf {
        core: Shaper::new(rate, burst, cfg.queue, 0),
        tick_ns: cfg.tick_us * 1_000,
        staged: Vec::with_capacity(MAX_BATCH),
        lens: Vec::with_capacity(MAX_BATCH),
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "shaper",
    summary: "token-bucket shaper with a bounded FIFO queue: delays traffic above the rate",
    drop_reasons: &["queue_full", "too_big"],
    counters: &[
        "passed",
        "queued",
        "released",
        "backlog",
        "passed_bytes",
        "released_bytes",
    ],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn output_rate_follows_the_bucket() {
        // 1000 B/s, 100 B burst, 100-byte packets: 1 at t=0 (burst), then
        // one per 100 ms.
        let mut s: Shaper<u32> = Shaper::new(1000, 100, 8, S);
        assert_eq!(s.admit(100, 0, S), Admit::Pass);
        for i in 0..5 {
            assert_eq!(s.admit(100, 0, S), Admit::Queue);
            s.push(i, 100).unwrap();
        }
        let mut out = Vec::new();
        let mut send = |x| {
            out.push(x);
            Ok(())
        };
        assert_eq!(s.release(S + 99_999_999, &mut send), 0);
        assert_eq!(s.release(S + 100_000_000, &mut send), 1);
        // The bucket holds at most `burst` (100 B): idle time does not
        // bank more than one packet.
        assert_eq!(s.release(S + 350_000_000, &mut send), 1);
        assert_eq!(s.release(S + 10 * S, &mut send), 1);
        assert_eq!(s.release(S + 10 * S + 99_000_000, &mut send), 0);
        assert_eq!(s.release(S + 10 * S + 200_000_000, &mut send), 1);
        assert_eq!(s.release(S + 10 * S + 300_000_000, &mut send), 1);
        assert_eq!(out, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn queue_is_bounded_and_fifo_is_kept() {
        let mut s: Shaper<u32> = Shaper::new(1000, 100, 2, S);
        assert_eq!(s.admit(60, 0, S), Admit::Pass);
        // 40 tokens left, but an 80-byte packet queues…
        assert_eq!(s.admit(80, 0, S), Admit::Queue);
        s.push(1, 80).unwrap();
        // …and then even a small one must wait behind it (FIFO).
        assert_eq!(s.admit(10, 0, S), Admit::Queue);
        assert_eq!(s.admit(10, 1, S), Admit::QueueFull);
        s.push(2, 10).unwrap();
        assert_eq!(s.push(3, 10), Err(3));
        assert_eq!(s.admit(101, 0, S), Admit::TooBig);
    }

    #[test]
    fn refused_send_keeps_order_and_tokens() {
        let mut s: Shaper<u32> = Shaper::new(1000, 100, 4, S);
        assert_eq!(s.admit(100, 0, S), Admit::Pass);
        s.push(7, 50).unwrap();
        s.push(8, 50).unwrap();
        assert_eq!(s.release(S + 100_000_000, Err), 0);
        let mut out = Vec::new();
        assert_eq!(
            s.release(S + 100_000_000, |x| {
                out.push(x);
                Ok(())
            }),
            2
        );
        assert_eq!(out, [7, 8]);
    }
}
