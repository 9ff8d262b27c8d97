//! Applying a packet to its connection: [`advance`], shared by the full
//! path and the established fast path so both update a connection
//! identically, and in front of it the ACK step for the packet nearly
//! every hit is: an ACK-class TCP segment (ACK set; SYN, FIN, RST clear)
//! of an ESTABLISHED connection.
//!
//! For such a segment Linux's `nf_conntrack_tcp_packet` takes the `ack`
//! row of the state table to ESTABLISHED again in either direction, none
//! of its special cases apply (they are for SYN, SYN/ACK, RST, the
//! TIME_WAIT challenge ACK and simultaneous open), and `tcp_in_window`
//! has no SYN, no missing ACK, no RST to adjust for. What is left is the
//! four window checks, the in-window update ([`record`], the same
//! function `in_window` ends with), and the timeout choice of an
//! ESTABLISHED connection, with the expiries precomputed once per batch
//! in the [`Clock`]. The ACK step does exactly that, or hands the segment
//! to [`tcp_packet::packet`] untouched: a direction never seen (the
//! mid-connection initialisation), a SEQ beyond the window (the
//! "overrun" rule updates the state even when liberal), and a failed
//! check of a connection that is not liberal (INVALID or ignored). A test
//! compares it with `tcp_packet::packet` on random connection states and
//! segments (`ack_step_is_tcp_packet_s`).

use super::table::{Entry, ASSURED, SEEN_REPLY};
use super::tcp::{PacketClass, TcpState};
use super::tcp_packet;
use super::tcp_window::{
    after, before, record, Seg, TcpTrack, F_LIBERAL, F_SACK_PERM, F_UNACKED, MAX_ACK_WIN,
};
use super::{Classified, Invalid, Timeouts, L4};

/// UDP counts as a stream after being replied for this long (Linux).
const UDP_STREAM_AFTER_NS: u64 = 2_000_000_000;

/// FIN, SYN, RST and ACK: only ACK set makes a segment of the ACK class.
const FSRA: u8 = 0x17;
const ACK: u8 = 0x10;

/// A batch's time and the expiries the ACK step gives a connection at
/// that time, computed once for a batch ([`super::Conntrack::clock`]):
/// every packet of a batch has the batch's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Clock {
    now_ns: u64,
    /// `now_ns` + the ESTABLISHED timeout (all additions saturate).
    established: u64,
    /// `now_ns` + `tcp_retrans`, used when that is shorter than
    /// ESTABLISHED's (`retrans_shorter`).
    retrans: u64,
    /// `now_ns` + `tcp_unack`, used when shorter (`unack_shorter`), and
    /// the bound of a connection without a reply.
    unack: u64,
    retrans_shorter: bool,
    unack_shorter: bool,
}

impl Clock {
    /// The clock at `now_ns` under `timeouts`.
    #[inline(always)]
    pub(super) fn new(now_ns: u64, timeouts: &Timeouts) -> Clock {
        let base = timeouts.tcp_established();
        Clock {
            now_ns,
            established: now_ns.saturating_add(base),
            retrans: now_ns.saturating_add(timeouts.tcp_retrans),
            unack: now_ns.saturating_add(timeouts.tcp_unack),
            retrans_shorter: base > timeouts.tcp_retrans,
            unack_shorter: base > timeouts.tcp_unack,
        }
    }

    /// The time.
    #[inline(always)]
    pub(crate) fn now_ns(&self) -> u64 {
        self.now_ns
    }
}

/// Applies a packet of class `l4` travelling in the `reply` direction at
/// `clock` to live entry `e` (index `i`) and, for TCP, its window state
/// `t`: the TCP state machine and window tracking (the ACK step, else
/// [`tcp_packet::packet`]), the timeout it leaves, `SEEN_REPLY`,
/// `ASSURED`. `None` if the packet reopens a closed TCP connection (the
/// entry is left untouched).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn advance(
    e: &mut Entry,
    t: &mut TcpTrack,
    timeouts: &Timeouts,
    liberal: bool,
    i: u32,
    reply: bool,
    l4: L4,
    clock: &Clock,
) -> Option<Classified> {
    if let L4::Tcp { seg, .. } = l4 {
        if seg.flags & FSRA == ACK
            && e.proto_state == TcpState::Established as u8
            && ack_step(e, t, reply, &seg, liberal, clock)
        {
            return Some(Classified::Tracked { entry: i, reply });
        }
    }
    advance_general(e, t, timeouts, liberal, i, reply, l4, clock.now_ns)
}

/// The ACK step (module docs) for ACK-class segment `s` of ESTABLISHED
/// connection `e`: `true` when it has applied it (the packet passes),
/// `false`, with nothing changed, for `tcp_packet::packet` to decide.
#[inline(always)]
pub(super) fn ack_step(
    e: &mut Entry,
    t: &mut TcpTrack,
    reply: bool,
    s: &Seg,
    liberal: bool,
    clock: &Clock,
) -> bool {
    let d = usize::from(reply);
    let (snd, rcv) = (t.seen[d], t.seen[d ^ 1]);
    // I: SEQ not beyond what the receiver allowed.
    if snd.maxwin == 0 || !before(s.seq, snd.maxend.wrapping_add(1)) {
        return false;
    }
    let sack = if rcv.flags & F_SACK_PERM != 0 {
        s.sack
    } else {
        s.ack
    };
    // III: acks nothing unsent; II: not data already acked; IV: not an
    // overly delayed ACK.
    let in_window = before(sack, rcv.end.wrapping_add(1))
        && (rcv.maxwin == 0 || after(s.end, snd.end.wrapping_sub(rcv.maxwin).wrapping_sub(1)))
        && after(
            sack,
            rcv.end
                .wrapping_sub(snd.maxwin.max(MAX_ACK_WIN))
                .wrapping_sub(1),
        );
    if in_window {
        record(t, d, true, s.seq, s.end, s.ack, sack, s.win, false, true);
    } else if !liberal && snd.flags & F_LIBERAL == 0 {
        return false;
    }
    // Passed (a liberal connection's failed check passes without an
    // update, as Linux's `nf_tcp_log_invalid` returns ACCEPT).
    t.last_index = PacketClass::Ack as u8;
    t.last_dir = d as u8;
    let unacked = (t.seen[0].flags | t.seen[1].flags) & F_UNACKED != 0;
    let mut until = if t.retrans >= 3 && clock.retrans_shorter {
        clock.retrans
    } else if unacked && clock.unack_shorter {
        clock.unack
    } else if t.last_win == 0 && clock.retrans_shorter {
        clock.retrans
    } else {
        clock.established
    };
    if e.flags & SEEN_REPLY == 0 {
        // Picked up mid-stream, no reply yet: no longer than UNACK.
        until = until.min(clock.unack);
    } else {
        // A valid segment in ESTABLISHED with a reply seen.
        e.flags |= ASSURED;
    }
    if reply {
        e.flags |= SEEN_REPLY;
    }
    e.expires_ns = until;
    true
}

/// [`advance`] without the ACK step: every TCP segment through
/// [`tcp_packet::packet`] (the reference the ACK step must match).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn advance_general(
    e: &mut Entry,
    t: &mut TcpTrack,
    timeouts: &Timeouts,
    liberal: bool,
    i: u32,
    reply: bool,
    l4: L4,
    now_ns: u64,
) -> Option<Classified> {
    let timeout = match l4 {
        L4::Tcp { seg, .. } => return advance_tcp(e, t, timeouts, liberal, i, reply, &seg, now_ns),
        L4::Udp => {
            if reply || e.flags & SEEN_REPLY != 0 {
                if now_ns.saturating_sub(e.created_ns) >= UDP_STREAM_AFTER_NS {
                    timeouts.udp_stream
                } else {
                    timeouts.udp
                }
            } else {
                timeouts.udp
            }
        }
        L4::IcmpEcho { .. } => timeouts.icmp,
        _ => timeouts.generic,
    };
    if reply {
        e.flags |= SEEN_REPLY;
    }
    e.expires_ns = now_ns.saturating_add(timeout);
    Some(Classified::Tracked { entry: i, reply })
}

/// The TCP part of [`advance_general`]: [`tcp_packet::packet`] and what
/// its outcome does to the entry. Out of line: the ACK step takes nearly
/// every hit, and inlined this made the fast path's loop keep its values
/// on the stack (≈ 30 instructions per packet more; bench:
/// firewall/process_100k).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn advance_tcp(
    e: &mut Entry,
    t: &mut TcpTrack,
    timeouts: &Timeouts,
    liberal: bool,
    i: u32,
    reply: bool,
    seg: &Seg,
    now_ns: u64,
) -> Option<Classified> {
    let c = tcp_packet::Conn {
        state: TcpState::from_u8(e.proto_state),
        seen_reply: e.flags & SEEN_REPLY != 0,
        assured: e.flags & ASSURED != 0,
        remaining_ns: e.expires_ns.saturating_sub(now_ns),
    };
    match tcp_packet::packet(t, c, usize::from(reply), seg, liberal, timeouts) {
        tcp_packet::Outcome::Accept {
            state,
            timeout,
            kill,
            assured,
        } => {
            e.proto_state = state as u8;
            if assured {
                e.flags |= ASSURED;
            }
            if kill {
                // Ends with this packet: expired from now, so the next
                // lookup or sweep removes it.
                e.expires_ns = now_ns;
                return Some(Classified::Tracked { entry: i, reply });
            }
            if reply {
                e.flags |= SEEN_REPLY;
            }
            if let Some(t) = timeout {
                e.expires_ns = now_ns.saturating_add(t);
            }
            Some(Classified::Tracked { entry: i, reply })
        }
        // Linux accepts the packet without refreshing the timer.
        tcp_packet::Outcome::Ignore => {
            if reply {
                e.flags |= SEEN_REPLY;
            }
            Some(Classified::Tracked { entry: i, reply })
        }
        tcp_packet::Outcome::Invalid { lower_to, window } => {
            if let Some(t) = lower_to {
                e.expires_ns = now_ns.saturating_add(t);
            }
            Some(Classified::Invalid(if window {
                Invalid::TcpWindow
            } else {
                Invalid::TcpState
            }))
        }
        tcp_packet::Outcome::Reopen => None,
    }
}

#[cfg(test)]
#[path = "update_tests.rs"]
mod tests;
