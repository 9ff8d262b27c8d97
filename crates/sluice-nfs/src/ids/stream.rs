//! Per-flow state: who the client is, whether the connection is
//! established (for `flow:`), and for TCP, per direction, the tail of the
//! last in-order segment and the next expected sequence number, so that a
//! content split across two consecutive segments still matches.
//!
//! Everything is indexed by the platform's flow id and allocated at build
//! time: `flow_capacity × 2 × tail_cap` bytes of tails (tail_cap = longest
//! content − 1, at most [`MAX_TAIL`]).

/// Most bytes of a segment kept for the next one (a content longer than
/// `MAX_TAIL + 1` bytes is only found across a boundary if its straddling
/// part fits).
pub const MAX_TAIL: usize = 255;

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_ACK: u8 = 0x10;

#[derive(Debug, Clone, Copy, Default)]
struct DirState {
    next_seq: u32,
    tail_len: u16,
    in_sync: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Directions seen (bit 0: canonical direction, bit 1: reverse).
    seen: u8,
    /// 0 unknown, 1 + direction index of the client.
    client: u8,
    syn_ack_seen: bool,
    established: bool,
    dirs: [DirState; 2],
}

/// What the flow table says about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowFacts {
    /// Sent by the connection's initiator (`None`: no flow state).
    pub to_server: Option<bool>,
    /// The connection is established.
    pub established: bool,
}

/// The TCP fields stream tracking needs.
#[derive(Debug, Clone, Copy)]
pub struct TcpSeg {
    /// Sequence number.
    pub seq: u32,
    /// Flags byte (FIN 0x01, SYN 0x02, ACK 0x10…).
    pub flags: u8,
}

/// Result of [`StreamTable::begin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamStart {
    /// Bytes of the previous segment to prepend (0: none).
    pub carry_len: usize,
    /// The segment is out of order (a gap, a retransmission or reordering):
    /// the carry-over was dropped.
    pub gap: bool,
}

/// Per-flow state for every flow id below the capacity.
#[derive(Debug)]
pub struct StreamTable {
    slots: Vec<Slot>,
    tails: Vec<u8>,
    tail_cap: usize,
}

impl StreamTable {
    /// A table for flow ids below `flows`, keeping `tail_cap` bytes per
    /// direction (capped at [`MAX_TAIL`]; 0 disables carry-over).
    pub fn new(flows: u32, tail_cap: usize) -> StreamTable {
        let tail_cap = tail_cap.min(MAX_TAIL);
        StreamTable {
            slots: vec![Slot::default(); flows as usize],
            tails: vec![0; flows as usize * 2 * tail_cap],
            tail_cap,
        }
    }

    /// Bytes kept per direction.
    pub fn tail_cap(&self) -> usize {
        self.tail_cap
    }

    /// Records a packet of `flow` in direction `dir` (0 canonical, 1
    /// reverse) and says who sent it and whether the connection is
    /// established. `tcp` is `None` for other protocols.
    pub fn observe(&mut self, flow: u32, dir: usize, tcp: Option<TcpSeg>) -> FlowFacts {
        let Some(s) = self.slots.get_mut(flow as usize) else {
            return FlowFacts {
                to_server: None,
                established: false,
            };
        };
        let d = dir & 1;
        let flags = tcp.map_or(0, |t| t.flags);
        let syn = flags & TCP_SYN != 0;
        let ack = flags & TCP_ACK != 0;
        if syn && !ack {
            // A (new) connection attempt: its sender is the client.
            s.client = 1 + d as u8;
            s.syn_ack_seen = false;
            s.established = false;
        } else if s.client == 0 {
            // First packet seen mid-connection: a SYN-ACK comes from the
            // server, anything else from the client.
            s.client = 1 + if syn && ack { 1 - d as u8 } else { d as u8 };
        }
        if !s.established {
            if s.syn_ack_seen && !syn {
                s.established = true;
            } else if syn && ack {
                s.syn_ack_seen = true;
            } else if !syn && s.seen | (1 << d) == 3 {
                // Both directions without a handshake seen (mid-stream
                // pickup, or UDP): treat as established.
                s.established = true;
            }
        }
        s.seen |= 1 << d;
        FlowFacts {
            to_server: Some(s.client == 1 + d as u8),
            established: s.established,
        }
    }

    /// Starts a TCP segment with `payload_len` bytes: whether the previous
    /// segment's tail continues into it.
    pub fn begin(&mut self, flow: u32, dir: usize, seg: TcpSeg, payload_len: usize) -> StreamStart {
        let none = StreamStart {
            carry_len: 0,
            gap: false,
        };
        let Some(s) = self.slots.get_mut(flow as usize) else {
            return none;
        };
        let st = &mut s.dirs[dir & 1];
        if seg.flags & TCP_SYN != 0 || !st.in_sync || payload_len == 0 {
            return none;
        }
        if seg.seq != st.next_seq {
            st.tail_len = 0;
            return StreamStart {
                carry_len: 0,
                gap: true,
            };
        }
        StreamStart {
            carry_len: usize::from(st.tail_len),
            gap: false,
        }
    }

    /// The tail of `flow`'s direction `dir` (valid after [`Self::begin`]
    /// returned `carry_len` > 0).
    pub fn tail(&self, flow: u32, dir: usize, len: usize) -> &[u8] {
        let base = (flow as usize * 2 + (dir & 1)) * self.tail_cap;
        self.tails
            .get(base..base + len.min(self.tail_cap))
            .unwrap_or(&[])
    }

    /// Finishes a TCP segment: remembers its tail (continuing the
    /// `carry_len` bytes kept by [`Self::begin`]) and the next sequence
    /// number.
    pub fn finish(&mut self, flow: u32, dir: usize, seg: TcpSeg, carry_len: usize, payload: &[u8]) {
        let Some(s) = self.slots.get_mut(flow as usize) else {
            return;
        };
        let st = &mut s.dirs[dir & 1];
        let syn = seg.flags & TCP_SYN != 0;
        let fin = seg.flags & TCP_FIN != 0;
        let consumed = payload.len() as u32 + u32::from(syn) + u32::from(fin);
        if syn {
            st.tail_len = 0;
        }
        // A pure ACK whose sequence number is not the expected one (e.g. a
        // keep-alive) changes nothing.
        if st.in_sync && !syn && payload.is_empty() && seg.seq != st.next_seq {
            return;
        }
        st.next_seq = seg.seq.wrapping_add(consumed);
        st.in_sync = true;
        let cap = self.tail_cap;
        if cap == 0 || payload.is_empty() {
            return;
        }
        let base = (flow as usize * 2 + (dir & 1)) * cap;
        let tail = &mut self.tails[base..base + cap];
        if payload.len() >= cap {
            tail.copy_from_slice(&payload[payload.len() - cap..]);
            st.tail_len = cap as u16;
        } else {
            let keep = carry_len
                .min(usize::from(st.tail_len))
                .min(cap - payload.len());
            let old = usize::from(st.tail_len);
            tail.copy_within(old - keep..old, 0);
            tail[keep..keep + payload.len()].copy_from_slice(payload);
            st.tail_len = (keep + payload.len()) as u16;
        }
    }

    /// Forgets `flow` (its id may be reused by a new connection).
    pub fn end(&mut self, flow: u32) {
        if let Some(s) = self.slots.get_mut(flow as usize) {
            *s = Slot::default();
        }
    }

    /// Forgets every flow.
    pub fn clear(&mut self) {
        self.slots.fill(Slot::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(seq: u32, flags: u8) -> TcpSeg {
        TcpSeg { seq, flags }
    }

    #[test]
    fn tails_continue_in_order_and_reset_on_gaps() {
        let mut t = StreamTable::new(4, 4);
        assert_eq!(
            t.observe(1, 0, Some(seg(100, TCP_SYN))).to_server,
            Some(true)
        );
        assert_eq!(t.begin(1, 0, seg(100, TCP_SYN), 0).carry_len, 0);
        t.finish(1, 0, seg(100, TCP_SYN), 0, b"");
        // 101: first data, nothing carried yet.
        let s = t.begin(1, 0, seg(101, TCP_ACK), 6);
        assert_eq!(
            s,
            StreamStart {
                carry_len: 0,
                gap: false
            }
        );
        t.finish(1, 0, seg(101, TCP_ACK), 0, b"abcdef");
        assert_eq!(t.tail(1, 0, 4), b"cdef");
        // In order: carry 4 bytes; a short segment keeps part of the old tail.
        let s = t.begin(1, 0, seg(107, TCP_ACK), 2);
        assert_eq!(s.carry_len, 4);
        t.finish(1, 0, seg(107, TCP_ACK), s.carry_len, b"gh");
        assert_eq!(t.tail(1, 0, 4), b"efgh");
        // A gap: no carry, counted.
        let s = t.begin(1, 0, seg(200, TCP_ACK), 3);
        assert_eq!(
            s,
            StreamStart {
                carry_len: 0,
                gap: true
            }
        );
        t.finish(1, 0, seg(200, TCP_ACK), 0, b"xyz");
        assert_eq!(t.tail(1, 0, 3), b"xyz");
        assert_eq!(t.begin(1, 0, seg(203, TCP_ACK), 1).carry_len, 3);
        // The other direction is independent.
        assert_eq!(t.begin(1, 1, seg(5, TCP_ACK), 1).carry_len, 0);
        // Flow end forgets it.
        t.end(1);
        assert_eq!(t.begin(1, 0, seg(203, TCP_ACK), 1).carry_len, 0);
    }

    #[test]
    fn client_and_established() {
        let mut t = StreamTable::new(2, 0);
        let f = t.observe(0, 1, Some(seg(1, TCP_SYN)));
        assert_eq!(
            f,
            FlowFacts {
                to_server: Some(true),
                established: false
            }
        );
        let f = t.observe(0, 0, Some(seg(9, TCP_SYN | TCP_ACK)));
        assert_eq!(
            f,
            FlowFacts {
                to_server: Some(false),
                established: false
            }
        );
        let f = t.observe(0, 1, Some(seg(2, TCP_ACK)));
        assert_eq!(
            f,
            FlowFacts {
                to_server: Some(true),
                established: true
            }
        );
        // Mid-stream pickup: established once both sides spoke.
        let f = t.observe(1, 0, Some(seg(1, TCP_ACK)));
        assert_eq!(
            f,
            FlowFacts {
                to_server: Some(true),
                established: false
            }
        );
        let f = t.observe(1, 1, Some(seg(1, TCP_ACK)));
        assert_eq!(
            f,
            FlowFacts {
                to_server: Some(false),
                established: true
            }
        );
        // Out of range: unknown.
        assert_eq!(t.observe(7, 0, None).to_server, None);
    }
}
