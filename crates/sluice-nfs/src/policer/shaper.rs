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
//! This module holds the shaping logic over any queued item type, so it is
//! tested without buffers; the NF wrapper queues owned packets.

use std::collections::VecDeque;

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
    pub fn release(&mut self, now_ns: u64, mut send: impl FnMut(T) -> Result<(), T>) -> usize {
        let mut sent = 0;
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
        }
        sent
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
