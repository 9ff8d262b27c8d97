//! TCP sequence-window tracking as Linux `nf_conntrack_proto_tcp`
//! (`tcp_in_window`, `tcp_options`, `tcp_sack`, `tcp_new`), after Guido
//! van Rooij's "Real Stateful TCP Packet Filtering in IP Filter".
//!
//! Per direction ([`Seen`]): `end` = highest `seq + len` sent, `maxend` =
//! highest `ack + window` the other side granted (the right edge the
//! sender may reach), `maxwin` = largest window the sender offered. A
//! segment is in the window when
//!
//! - I. `seq <= sender.maxend` (not beyond what the receiver allowed),
//! - II. `end >= sender.end - receiver.maxwin` (not already acked data),
//! - III. `sack <= receiver.end` (acks nothing the receiver has not sent),
//! - IV. `sack >= receiver.end - max(66000, sender.maxwin)`,
//!
//! with `sack` the highest SACK right edge (or the ACK) when the receiver
//! offered SACK. Failing I or III is INVALID; failing II or IV, or I
//! alone by at most a window's worth (a sender overrunning the window),
//! is "ignored": the packet passes without updating the state, as in
//! Linux. Window scaling counts only when both SYNs carried the option.
//! Connections picked up mid-stream, and every connection with the
//! `liberal` setting (`nf_conntrack_tcp_be_liberal`), pass what fails.

/// [`Seen::flags`]: the SYN offered window scaling.
pub const F_WSCALE: u8 = 0x01;
/// The SYN offered SACK.
pub const F_SACK_PERM: u8 = 0x02;
/// This side sent the first FIN.
pub const F_CLOSE_INIT: u8 = 0x04;
/// Window failures of this side pass (`IP_CT_TCP_FLAG_BE_LIBERAL`).
pub const F_LIBERAL: u8 = 0x08;
/// This side sent data not yet acknowledged.
pub const F_UNACKED: u8 = 0x10;
/// `maxack` holds an ACK this side sent.
pub const F_MAXACK: u8 = 0x20;

/// [`TcpTrack::last_flags`]: a challenge ACK may answer the SYN let
/// through in LAST_ACK (`IP_CT_EXP_CHALLENGE_ACK`).
pub const L_CHALLENGE: u8 = 0x40;
/// Simultaneous open seen (`IP_CT_TCP_SIMULTANEOUS_OPEN`).
pub const L_SIMOPEN: u8 = 0x80;

/// Linux `MAXACKWINCONST`: the smallest ACK window of check IV.
pub(super) const MAX_ACK_WIN: u32 = 66_000;
/// RFC 7323's largest window shift (`TCP_MAX_WSCALE`).
const MAX_WSCALE: u8 = 14;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

/// `a` is after `b` in sequence space (Linux `after`).
#[inline(always)]
pub fn after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

/// `a` is before `b` in sequence space (Linux `before`).
#[inline(always)]
pub fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// What window tracking needs of one segment, read once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seg {
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// The highest SACK block right edge after `ack` (else `ack`).
    pub sack: u32,
    /// `seq` + data length + 1 for SYN + 1 for FIN.
    pub end: u32,
    /// Window field, unscaled.
    pub win: u16,
    /// TCP flags.
    pub flags: u8,
    /// [`F_WSCALE`] / [`F_SACK_PERM`] from a SYN's options (0 otherwise).
    pub opts: u8,
    /// The window-scale option's shift (SYN only), at most 14.
    pub wscale: u8,
}

impl Seg {
    /// Reads a TCP header `t` (data offset within it checked by the
    /// caller's parse) carrying `data_len` bytes of payload. Inline, and
    /// reads no option bytes for a plain header or the usual block of an
    /// established connection (NOP, NOP, timestamps: no SACK), every fast
    /// path packet's case; any other options are walked out of line (out
    /// of line, the whole read cost ≈ 50 instructions per packet with its
    /// result passed through memory; bench: firewall/process_100k).
    #[inline(always)]
    pub fn read(t: &[u8], data_len: usize) -> Option<Seg> {
        let h: &[u8; 20] = t.first_chunk()?;
        let seq = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
        let ack = u32::from_be_bytes([h[8], h[9], h[10], h[11]]);
        let flags = h[13];
        let doff = usize::from(h[12] >> 4) * 4;
        let extra = u32::from(flags & SYN != 0) + u32::from(flags & FIN != 0);
        let s = Seg {
            seq,
            ack,
            sack: ack,
            end: seq.wrapping_add(data_len as u32).wrapping_add(extra),
            win: u16::from_be_bytes([h[14], h[15]]),
            flags,
            opts: 0,
            wscale: 0,
        };
        if doff > 20 {
            let opts = t.get(20..doff)?;
            if opts.len() != 12 || flags & SYN != 0 || !opts.starts_with(&[1, 1, 8, 10]) {
                return Some(s.with_options(opts));
            }
        }
        Some(s)
    }

    /// [`Seg::read`]'s option walk: a SYN's window scale and SACK
    /// permitted, any segment's SACK blocks.
    #[inline(never)]
    fn with_options(mut self, opts: &[u8]) -> Seg {
        if self.flags & SYN != 0 {
            self.read_syn_options(opts);
        }
        self.sack = sack_edge(opts, self.ack);
        self
    }

    /// Linux `tcp_options`: window scale and SACK permitted.
    fn read_syn_options(&mut self, opts: &[u8]) {
        let mut i = 0;
        while let Some(&kind) = opts.get(i) {
            match kind {
                0 => return,
                1 => i += 1,
                _ => {
                    let Some(&size) = opts.get(i + 1) else { return };
                    let size = usize::from(size);
                    if size < 2 || i + size > opts.len() {
                        return;
                    }
                    if kind == 4 && size == 2 {
                        self.opts |= F_SACK_PERM;
                    } else if kind == 3 && size == 3 {
                        self.wscale = opts.get(i + 2).copied().unwrap_or(0).min(MAX_WSCALE);
                        self.opts |= F_WSCALE;
                    }
                    i += size;
                }
            }
        }
    }
}

/// Linux `tcp_sack`: the highest right edge of the first SACK option in
/// `opts`, if after `ack`; `ack` otherwise. A timestamp-only option block
/// (NOP NOP TS, the usual one) is answered without a walk.
fn sack_edge(opts: &[u8], ack: u32) -> u32 {
    if opts.len() == 12 && opts.starts_with(&[1, 1, 8, 10]) {
        return ack;
    }
    let mut sack = ack;
    let mut i = 0;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => i += 1,
            _ => {
                let Some(&size) = opts.get(i + 1) else { break };
                let size = usize::from(size);
                if size < 2 || i + size > opts.len() {
                    break;
                }
                if kind == 5 && size >= 10 && (size - 2) % 8 == 0 {
                    for b in opts[i + 2..i + size].chunks_exact(8) {
                        let right = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                        if after(right, sack) {
                            sack = right;
                        }
                    }
                    break;
                }
                i += size;
            }
        }
    }
    sack
}

/// One direction's window state (Linux `ip_ct_tcp_state`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, zerocopy::FromZeros)]
pub struct Seen {
    /// Highest `seq + len` sent.
    pub end: u32,
    /// Highest right edge the other side's ACKs allowed.
    pub maxend: u32,
    /// Largest window offered (scaled).
    pub maxwin: u32,
    /// Highest ACK sent (with [`F_MAXACK`]).
    pub maxack: u32,
    /// Window shift.
    pub scale: u8,
    /// `F_*` flags.
    pub flags: u8,
}

/// A connection's TCP tracking state (Linux `ip_ct_tcp` without the
/// state byte, which lives in the entry): one cache line, in a table
/// beside the entries with the same index.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, zerocopy::FromZeros)]
#[repr(align(64))]
pub struct TcpTrack {
    /// Per direction, 0 original, 1 reply.
    pub seen: [Seen; 2],
    /// Last annotated segment's sequence number.
    pub last_seq: u32,
    /// … its ACK.
    pub last_ack: u32,
    /// … its end.
    pub last_end: u32,
    /// … its raw window.
    pub last_win: u16,
    /// … its direction.
    pub last_dir: u8,
    /// … its packet class ([`super::tcp::PacketClass`] as u8).
    pub last_index: u8,
    /// Retransmissions of the same ACK segment in a row.
    pub retrans: u8,
    /// Window scale of an ignored SYN.
    pub last_wscale: u8,
    /// `F_WSCALE`/`F_SACK_PERM` of an ignored SYN, [`L_CHALLENGE`],
    /// [`L_SIMOPEN`].
    pub last_flags: u8,
}

const _: () = assert!(std::mem::size_of::<TcpTrack>() == 64);

/// What [`in_window`] makes of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// In the window; the state was updated.
    Accept,
    /// Passes without updating the state (Linux `NFCT_TCP_IGNORE`).
    Ignore,
    /// INVALID.
    Invalid,
}

impl TcpTrack {
    /// Linux `tcp_new`: the state a first segment `s` opens, SYN or (for
    /// a connection picked up mid-stream) not. A picked-up connection has
    /// lost its history: both directions get SACK and are liberal.
    pub fn new(s: &Seg) -> TcpTrack {
        let mut t = TcpTrack::default();
        let o = &mut t.seen[0];
        o.end = s.end;
        o.maxwin = u32::from(s.win).max(1);
        if s.flags & SYN != 0 {
            o.maxend = s.end;
            o.flags = s.opts;
            o.scale = s.wscale;
        } else {
            o.maxend = s.end.wrapping_add(o.maxwin);
            t.seen[0].flags = F_SACK_PERM | F_LIBERAL;
            t.seen[1].flags = F_SACK_PERM | F_LIBERAL;
        }
        t.last_index = super::tcp::PacketClass::None as u8;
        t
    }

    /// Linux `tcp_init_sender`: a SYN/ACK (or a reply-direction SYN)
    /// starts direction `dir`; scaling counts only if both sides offered
    /// it.
    fn init_sender(&mut self, dir: usize, s: &Seg) {
        let sender = &mut self.seen[dir & 1];
        sender.end = s.end;
        sender.maxend = s.end;
        sender.maxwin = u32::from(s.win).max(1);
        sender.scale = s.wscale;
        sender.flags = (sender.flags & F_LIBERAL) | s.opts;
        let both = self.seen[0].flags & self.seen[1].flags & F_WSCALE != 0;
        if dir == 1 && !both {
            self.seen[0].scale = 0;
            self.seen[1].scale = 0;
        }
    }
}

/// Linux `tcp_in_window` for segment `s` travelling in direction `dir`
/// (0 original, 1 reply) of a connection in state `state` (a
/// [`super::TcpState`] discriminant), packet class `index`; `liberal`:
/// the NF-wide `nf_conntrack_tcp_be_liberal`.
pub fn in_window(
    t: &mut TcpTrack,
    state: u8,
    dir: usize,
    index: u8,
    s: &Seg,
    liberal: bool,
) -> Window {
    use super::tcp::{PacketClass, TcpState};
    let dir = dir & 1;
    let (d, r) = (dir, dir ^ 1);
    let mut seq = s.seq;
    let mut end = s.end;
    let mut ack = s.ack;
    let mut sack = if t.seen[r].flags & F_SACK_PERM != 0 {
        s.sack
    } else {
        s.ack
    };
    let win = u32::from(s.win);
    let syn = s.flags & SYN != 0;
    let in_syn = state == TcpState::SynSent as u8 || state == TcpState::SynRecv as u8;
    if t.seen[d].maxwin == 0 {
        if syn {
            t.init_sender(d, s);
            if s.flags & ACK == 0 {
                // Simultaneous open.
                return Window::Accept;
            }
        } else {
            // Mid-connection: use what the segment tells.
            let sender = &mut t.seen[d];
            sender.end = end;
            let swin = win << sender.scale;
            sender.maxwin = swin.max(1);
            sender.maxend = end.wrapping_add(sender.maxwin);
            let receiver = &mut t.seen[r];
            if receiver.maxwin == 0 {
                // Nothing seen the other way yet: make III and IV pass.
                receiver.end = sack;
                receiver.maxend = sack;
            } else if sack == receiver.end.wrapping_add(1) {
                // Likely the answer to a keepalive.
                receiver.end = receiver.end.wrapping_add(1);
            }
        }
    } else if syn && after(end, t.seen[d].end) && in_syn {
        // A reinitialised SYN (RFC 793): start this direction again.
        t.init_sender(d, s);
        if dir == 1 && s.flags & ACK == 0 {
            return Window::Accept;
        }
    }
    if s.flags & ACK == 0 || (s.flags & (ACK | RST) == ACK | RST && ack == 0) {
        // No ACK (or a broken stack's RST|ACK with ack 0): pretend it
        // acks what the receiver sent.
        ack = t.seen[r].end;
        sack = ack;
    }
    if s.flags & RST != 0 && seq == 0 && state == TcpState::SynSent as u8 {
        // A RST answering a SYN.
        seq = t.seen[d].end;
        end = seq;
    }
    let (sender, receiver) = (t.seen[d], t.seen[r]);
    let fail = |t: &TcpTrack, w: Window| -> Window {
        if liberal || t.seen[d].flags & F_LIBERAL != 0 {
            Window::Accept
        } else {
            w
        }
    };
    let max_ack_win = sender.maxwin.max(MAX_ACK_WIN);
    let ack_low_ok = after(sack, receiver.end.wrapping_sub(max_ack_win).wrapping_sub(1));
    let ack_high_ok = before(sack, receiver.end.wrapping_add(1));
    if !before(seq, sender.maxend.wrapping_add(1)) {
        let overshot = end.wrapping_sub(sender.maxend).wrapping_add(1);
        let in_recv = receiver.maxwin != 0
            && after(
                end,
                sender.end.wrapping_sub(receiver.maxwin).wrapping_sub(1),
            );
        if in_recv && ack_low_ok && overshot <= receiver.maxwin && ack_high_ok {
            // A sender overrunning the window: remember the data so its
            // ACK is not "over the upper bound" later.
            t.seen[d].end = end;
            t.seen[d].flags |= F_UNACKED;
            return fail(t, Window::Ignore);
        }
        return fail(t, Window::Invalid);
    }
    if !ack_high_ok {
        return fail(t, Window::Invalid);
    }
    let in_recv = receiver.maxwin == 0
        || after(
            end,
            sender.end.wrapping_sub(receiver.maxwin).wrapping_sub(1),
        );
    if !in_recv || !ack_low_ok {
        return fail(t, Window::Ignore);
    }
    record(
        t,
        dir,
        index == PacketClass::Ack as u8,
        seq,
        end,
        ack,
        sack,
        s.win,
        syn,
        s.flags & ACK != 0,
    );
    Window::Accept
}

/// The in-window part of Linux `tcp_in_window`: a segment
/// (`seq`..`end`, `ack`, `sack`, raw window `win_raw`, `syn`: SYN set,
/// `has_ack`: ACK set, `ack_class`: packet class ACK) travelling in
/// direction `dir` passed every check; update both directions' state and
/// the retransmission count. Shared with the ACK step
/// (`conntrack::update`), so both update a connection identically.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn record(
    t: &mut TcpTrack,
    dir: usize,
    ack_class: bool,
    seq: u32,
    end: u32,
    ack: u32,
    sack: u32,
    win_raw: u16,
    syn: bool,
    has_ack: bool,
) {
    let (d, r) = (dir & 1, (dir & 1) ^ 1);
    let mut win = u32::from(win_raw);
    // Window scaling (RFC 7323): not on a SYN.
    if !syn {
        win <<= t.seen[d].scale;
    }
    let sender = &mut t.seen[d];
    let swin = win.wrapping_add(sack.wrapping_sub(ack));
    if sender.maxwin < swin {
        sender.maxwin = swin;
    }
    if after(end, sender.end) {
        sender.end = end;
        sender.flags |= F_UNACKED;
    }
    if has_ack && (sender.flags & F_MAXACK == 0 || after(ack, sender.maxack)) {
        sender.maxack = ack;
        sender.flags |= F_MAXACK;
    }
    let sender_maxend = sender.maxend;
    let receiver = &mut t.seen[r];
    if receiver.maxwin != 0 && after(end, sender_maxend) {
        receiver.maxwin = receiver
            .maxwin
            .wrapping_add(end.wrapping_sub(sender_maxend));
    }
    if after(sack.wrapping_add(win), receiver.maxend.wrapping_sub(1)) {
        receiver.maxend = sack.wrapping_add(win).wrapping_add(u32::from(win == 0));
    }
    if ack == receiver.end {
        receiver.flags &= !F_UNACKED;
    }
    if ack_class {
        if usize::from(t.last_dir) == d
            && t.last_seq == seq
            && t.last_ack == ack
            && t.last_end == end
            && t.last_win == win_raw
        {
            t.retrans = t.retrans.saturating_add(1);
        } else {
            t.last_dir = d as u8;
            t.last_seq = seq;
            t.last_ack = ack;
            t.last_end = end;
            t.last_win = win_raw;
            t.retrans = 0;
        }
    }
}
