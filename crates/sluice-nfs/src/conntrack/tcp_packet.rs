//! One TCP segment of a tracked connection, as Linux
//! `nf_conntrack_tcp_packet` handles it after `tcp_error`: the state table
//! ([`super::tcp::transition`]), the special cases around it (reopening
//! from TIME_WAIT/CLOSE, ignored SYNs and SYN/ACKs and the re-sync they
//! allow, RFC 5961 challenge ACKs, simultaneous open, the RST sequence
//! rules), window tracking ([`in_window`]) and the timeout the segment
//! leaves the connection with.

use super::tcp::{self, PacketClass, TcpState, Transition};
use super::tcp_window::{
    before, in_window, Seg, TcpTrack, Window, F_CLOSE_INIT, F_MAXACK, F_UNACKED, L_CHALLENGE,
    L_SIMOPEN,
};
use super::Timeouts;

const S: u64 = 1_000_000_000;

/// Connection facts the segment's handling reads besides the TCP state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    /// The TCP state before the segment.
    pub state: TcpState,
    /// A packet was seen in the reply direction (`IPS_SEEN_REPLY`).
    pub seen_reply: bool,
    /// The connection is assured (`IPS_ASSURED`).
    pub assured: bool,
    /// Time left before the connection expires (ns).
    pub remaining_ns: u64,
}

/// What the segment does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Passes: the connection moves to `state`; `timeout` is its new idle
    /// timeout (`None`: the timer is left alone); `kill`: the connection
    /// ends after this packet (a RST with no reply ever seen); `assured`:
    /// it becomes assured.
    Accept {
        /// New state.
        state: TcpState,
        /// New timeout, if refreshed.
        timeout: Option<u64>,
        /// End the connection after passing the packet.
        kill: bool,
        /// Mark the connection assured.
        assured: bool,
    },
    /// Passes without a state change or a timer refresh.
    Ignore,
    /// INVALID; `lower_to`: shorten the connection's timeout to this.
    Invalid {
        /// The connection's new, shorter timeout, if any.
        lower_to: Option<u64>,
        /// Outside the window (else: the state table or a RST rule).
        window: bool,
    },
    /// A SYN reopening a closed or aborted connection: forget it and
    /// treat the packet as NEW.
    Reopen,
}

/// Whether Linux may early-drop a connection in `s` (`tcp_can_early_drop`).
fn closing(s: TcpState) -> bool {
    matches!(
        s,
        TcpState::FinWait
            | TcpState::LastAck
            | TcpState::TimeWait
            | TcpState::Close
            | TcpState::CloseWait
    )
}

/// Handles segment `s` (valid flags, checked by the caller) travelling in
/// direction `dir` (0 original, 1 reply) of connection `c` with tracking
/// state `t`.
pub fn packet(
    t: &mut TcpTrack,
    c: Conn,
    dir: usize,
    s: &Seg,
    liberal: bool,
    timeouts: &Timeouts,
) -> Outcome {
    let dir = dir & 1;
    let index = tcp::packet_class(s.flags);
    let idx = index as u8;
    let (old, mut new) = match tcp::transition(c.state, dir == 1, s.flags) {
        Transition::To(n) => (c.state, n),
        Transition::Ignore => match ignore(t, c, dir, s, index) {
            Some(o) => return o,
            // Re-synced from an ignored SYN: SYN_SENT -> SYN_RECV.
            None => (TcpState::SynSent, TcpState::SynRecv),
        },
        Transition::Invalid => {
            return Outcome::Invalid {
                lower_to: None,
                window: false,
            }
        }
    };
    let last_index = t.last_index;
    let last_dir = usize::from(t.last_dir);
    let skip_window = match new {
        TcpState::SynSent if matches!(old, TcpState::TimeWait | TcpState::Close) => {
            // RFC 1122: a SYN may reopen TIME_WAIT; also an aborted
            // connection (closing seen, or our side's RST).
            let closing_seen = (t.seen[0].flags | t.seen[1].flags) & F_CLOSE_INIT != 0;
            if closing_seen || (last_dir == dir && last_index == PacketClass::Rst as u8) {
                return Outcome::Reopen;
            }
            // Only a SYN/ACK re-syncs, and this is a SYN.
            return ignore(t, c, dir, s, index).unwrap_or(Outcome::Ignore);
        }
        TcpState::TimeWait => {
            // RFC 5961: the challenge ACK to a SYN let through in
            // LAST_ACK does not ack the last FIN.
            if old == TcpState::LastAck
                && index == PacketClass::Ack
                && last_dir != dir
                && last_index == PacketClass::Syn as u8
                && t.last_flags & L_CHALLENGE != 0
            {
                t.last_flags &= !L_CHALLENGE;
                return Outcome::Ignore;
            }
            false
        }
        TcpState::SynSent2 => {
            t.last_flags |= L_SIMOPEN;
            false
        }
        TcpState::SynRecv => {
            if dir == 1 && index == PacketClass::Ack && t.last_flags & L_SIMOPEN != 0 {
                new = TcpState::Established;
            }
            false
        }
        TcpState::Close if index == PacketClass::Rst => {
            match rst_in_close(t, c, dir, s, &mut new) {
                Some(o) => return o,
                None => closing(old) || rst_skips_window(t, c, s),
            }
        }
        _ => false,
    };
    if !skip_window {
        match in_window(t, c.state as u8, dir, idx, s, liberal) {
            Window::Accept => {}
            Window::Ignore => return Outcome::Ignore,
            Window::Invalid => {
                return Outcome::Invalid {
                    lower_to: handle_invalid(t, c, dir, index, timeouts),
                    window: true,
                }
            }
        }
    }
    // In the window from here on.
    t.last_index = idx;
    t.last_dir = dir as u8;
    if old != new && new == TcpState::FinWait {
        t.seen[dir].flags |= F_CLOSE_INIT;
    }
    let base = timeouts.tcp(new);
    let mut timeout = if t.retrans >= 3 && base > timeouts.tcp_retrans {
        timeouts.tcp_retrans
    } else if index == PacketClass::Rst {
        timeouts.tcp(TcpState::Close)
    } else if (t.seen[0].flags | t.seen[1].flags) & F_UNACKED != 0 && base > timeouts.tcp_unack {
        timeouts.tcp_unack
    } else if t.last_win == 0 && base > timeouts.tcp_retrans {
        timeouts.tcp_retrans
    } else {
        base
    };
    let mut assured = false;
    if !c.seen_reply {
        if s.flags & 0x04 != 0 {
            // The only answer a RST: no connection worth keeping.
            return Outcome::Accept {
                state: new,
                timeout: Some(timeout),
                kill: true,
                assured: false,
            };
        }
        if index == PacketClass::Syn && old == TcpState::SynSent {
            // A retransmitted SYN does not renew the timer.
            return Outcome::Accept {
                state: new,
                timeout: None,
                kill: false,
                assured: false,
            };
        }
        if new == TcpState::Established && timeout > timeouts.tcp_unack {
            // Picked up mid-stream, no reply yet.
            timeout = timeouts.tcp_unack;
        }
    } else if !c.assured
        && matches!(old, TcpState::SynRecv | TcpState::Established)
        && new == TcpState::Established
    {
        assured = true;
    }
    Outcome::Accept {
        state: new,
        timeout: Some(timeout),
        kill: false,
        assured,
    }
}

/// The `sIG` (and unreopened SYN) case: annotate the segment so a later
/// SYN/ACK or RST can be matched with it, and let it pass; or, for a
/// SYN/ACK answering a SYN ignored earlier, re-sync from that SYN.
fn ignore(t: &mut TcpTrack, c: Conn, dir: usize, s: &Seg, index: PacketClass) -> Option<Outcome> {
    let last_dir = usize::from(t.last_dir);
    if index == PacketClass::SynAck
        && t.last_index == PacketClass::Syn as u8
        && last_dir != dir
        && s.ack == t.last_end
    {
        // Client and server are in sync and we are not: take the
        // ignored SYN as the connection's start (Linux then handles this
        // SYN/ACK as SYN_SENT -> SYN_RECV).
        let ld = last_dir & 1;
        let o = &mut t.seen[ld];
        o.end = t.last_end;
        o.maxend = t.last_end;
        o.maxwin = u32::from(t.last_win).max(1);
        o.scale = t.last_wscale;
        t.last_flags &= !L_CHALLENGE;
        o.flags = t.last_flags & 0x3f;
        let keep = t.seen[dir].flags & super::tcp_window::F_LIBERAL;
        t.seen[dir] = super::tcp_window::Seen {
            flags: keep,
            ..Default::default()
        };
        // The SYN/ACK then goes through the window and timeouts as a
        // SYN_SENT -> SYN_RECV transition.
        return None;
    }
    t.last_index = index as u8;
    t.last_dir = dir as u8;
    t.last_seq = s.seq;
    t.last_end = s.end;
    t.last_win = s.win;
    if index == PacketClass::Syn && dir == 0 {
        t.last_flags = s.opts;
        t.last_wscale = if s.opts & super::tcp_window::F_WSCALE != 0 {
            s.wscale
        } else {
            0
        };
        if c.state == TcpState::LastAck {
            t.last_flags |= L_CHALLENGE;
        }
    }
    if c.state == TcpState::SynSent && index == PacketClass::Ack && dir == 1 {
        // Possibly a challenge ACK answering the SYN.
        t.last_ack = s.ack;
    }
    Some(Outcome::Ignore)
}

/// The RST checks of Linux's `TCP_CONNTRACK_CLOSE` case that decide
/// before the window: `Some` for an INVALID RST; may set `new` back to
/// the old state (an inexact RST of an established connection, which
/// keeps it for the challenge ACK).
fn rst_in_close(t: &TcpTrack, c: Conn, dir: usize, s: &Seg, new: &mut TcpState) -> Option<Outcome> {
    if closing(c.state) {
        return None;
    }
    let other = &t.seen[dir ^ 1];
    if other.flags & F_MAXACK != 0 && t.last_index != PacketClass::Syn as u8 {
        let established = c.state == TcpState::Established && c.assured;
        if s.seq == 0 && !established {
            return None;
        }
        if before(s.seq, other.maxack) {
            return Some(Outcome::Invalid {
                lower_to: None,
                window: false,
            });
        }
        if !established || s.seq == other.maxack {
            return None;
        }
        // A RST following this side's data ("train").
        if t.last_index == PacketClass::Ack as u8
            && usize::from(t.last_dir) == dir
            && s.seq == t.last_end
        {
            return None;
        }
        *new = c.state;
    }
    None
}

/// The RST checks of the CLOSE case that skip the window: a RST
/// answering a SYN or ACK let through unchecked, or a challenge ACK.
fn rst_skips_window(t: &TcpTrack, c: Conn, s: &Seg) -> bool {
    let li = t.last_index;
    if ((c.seen_reply && li == PacketClass::Syn as u8)
        || (!c.assured && li == PacketClass::Ack as u8))
        && s.ack == t.last_end
    {
        return true;
    }
    c.state == TcpState::SynSent
        && li == PacketClass::Ack as u8
        && t.last_dir == 1
        && s.seq == t.last_ack
}

/// Linux `nf_tcp_handle_invalid`: an out-of-window FIN or RST answering
/// the other side's FIN/RST shortens an assured connection's timeout to
/// the UNACK one (it is probably dead); other INVALID FINs/RSTs are
/// annotated.
fn handle_invalid(
    t: &mut TcpTrack,
    c: Conn,
    dir: usize,
    index: PacketClass,
    timeouts: &Timeouts,
) -> Option<u64> {
    if !c.assured || !matches!(index, PacketClass::Rst | PacketClass::Fin) {
        return None;
    }
    let li = t.last_index;
    if usize::from(t.last_dir) != dir
        && (li == PacketClass::Fin as u8 || li == PacketClass::Rst as u8)
    {
        if c.remaining_ns < 120 * S {
            return None;
        }
        let timeout = timeouts.tcp_unack;
        return (c.remaining_ns > timeout).then_some(timeout);
    }
    t.last_index = index as u8;
    t.last_dir = dir as u8;
    None
}
