//! The TCP connection state machine of Linux `nf_conntrack_proto_tcp`:
//! the same states, the same `tcp_conntracks[dir][packet][state]` table and
//! the same flag validity check (`tcp_valid_flags`).
//!
//! Sequence-window tracking and the special cases around this table are
//! in `tcp_window` and `tcp_packet`.

/// A TCP connection state (Linux `enum tcp_conntrack`, in that order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum TcpState {
    /// No state yet (only before the first packet).
    None = 0,
    /// SYN seen from the originator.
    SynSent = 1,
    /// SYN/ACK seen from the responder.
    SynRecv = 2,
    /// Three-way handshake done (or picked up mid-stream).
    Established = 3,
    /// FIN seen in one direction.
    FinWait = 4,
    /// ACK of the first FIN seen.
    CloseWait = 5,
    /// FIN seen in both directions.
    LastAck = 6,
    /// Last ACK seen.
    TimeWait = 7,
    /// RST seen.
    Close = 8,
    /// Simultaneous open: SYN seen from both sides.
    SynSent2 = 9,
}

impl TcpState {
    /// Every state, indexed by its discriminant.
    pub const ALL: [TcpState; 10] = [
        TcpState::None,
        TcpState::SynSent,
        TcpState::SynRecv,
        TcpState::Established,
        TcpState::FinWait,
        TcpState::CloseWait,
        TcpState::LastAck,
        TcpState::TimeWait,
        TcpState::Close,
        TcpState::SynSent2,
    ];

    /// The state with discriminant `v` (`None` for anything else).
    #[inline]
    pub fn from_u8(v: u8) -> TcpState {
        Self::ALL
            .get(usize::from(v))
            .copied()
            .unwrap_or(TcpState::None)
    }

    /// Linux's name (as in `/proc/net/nf_conntrack`).
    pub const fn name(self) -> &'static str {
        match self {
            TcpState::None => "NONE",
            TcpState::SynSent => "SYN_SENT",
            TcpState::SynRecv => "SYN_RECV",
            TcpState::Established => "ESTABLISHED",
            TcpState::FinWait => "FIN_WAIT",
            TcpState::CloseWait => "CLOSE_WAIT",
            TcpState::LastAck => "LAST_ACK",
            TcpState::TimeWait => "TIME_WAIT",
            TcpState::Close => "CLOSE",
            TcpState::SynSent2 => "SYN_SENT2",
        }
    }
}

/// What a packet does to a connection in a given state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Move to (or stay in) this state.
    To(TcpState),
    /// Let the packet pass but leave the state alone (Linux `sIG`).
    Ignore,
    /// The packet is invalid for this connection (Linux `sIV`).
    Invalid,
}

/// Packet classes of the table (Linux `enum tcp_bit_set`), from the flags
/// by [`packet_class`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketClass {
    /// SYN without ACK.
    Syn = 0,
    /// SYN with ACK.
    SynAck = 1,
    /// FIN (without SYN or RST).
    Fin = 2,
    /// ACK only.
    Ack = 3,
    /// RST (whatever else is set).
    Rst = 4,
    /// None of the above.
    None = 5,
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
/// The ACK flag.
pub(crate) const ACK: u8 = 0x10;
const URG: u8 = 0x20;
const ECE: u8 = 0x40;
const CWR: u8 = 0x80;

/// Linux `get_conntrack_index`: RST beats SYN beats FIN beats ACK.
#[inline]
pub fn packet_class(flags: u8) -> PacketClass {
    if flags & RST != 0 {
        PacketClass::Rst
    } else if flags & SYN != 0 {
        if flags & ACK != 0 {
            PacketClass::SynAck
        } else {
            PacketClass::Syn
        }
    } else if flags & FIN != 0 {
        PacketClass::Fin
    } else if flags & ACK != 0 {
        PacketClass::Ack
    } else {
        PacketClass::None
    }
}

/// Linux `tcp_valid_flags`: with ECE, CWR and PSH ignored, only SYN,
/// SYN|URG, SYN|ACK, RST, RST|ACK, FIN|ACK, FIN|ACK|URG, ACK and ACK|URG
/// are valid. Anything else (no flags, SYN|FIN, FIN alone, RST|FIN…) makes
/// the packet invalid whatever the connection's state.
#[inline]
pub fn flags_valid(flags: u8) -> bool {
    // A 64-bit set indexed by the five remaining flag bits (FIN..URG),
    // built at compile time: one shift and mask per packet.
    const VALID: u64 = {
        let combos = [
            SYN,
            SYN | URG,
            SYN | ACK,
            RST,
            RST | ACK,
            FIN | ACK,
            FIN | ACK | URG,
            ACK,
            ACK | URG,
        ];
        let mut m = 0u64;
        let mut i = 0;
        while i < combos.len() {
            m |= 1 << combos[i];
            i += 1;
        }
        m
    };
    VALID >> (flags & !(ECE | CWR | PSH)) & 1 == 1
}

// Shorthands for the table, as in the kernel source.
const S_SS: Transition = Transition::To(TcpState::SynSent);
const S_SR: Transition = Transition::To(TcpState::SynRecv);
const S_ES: Transition = Transition::To(TcpState::Established);
const S_FW: Transition = Transition::To(TcpState::FinWait);
const S_CW: Transition = Transition::To(TcpState::CloseWait);
const S_LA: Transition = Transition::To(TcpState::LastAck);
const S_TW: Transition = Transition::To(TcpState::TimeWait);
const S_CL: Transition = Transition::To(TcpState::Close);
const S_S2: Transition = Transition::To(TcpState::SynSent2);
const S_IV: Transition = Transition::Invalid;
const S_IG: Transition = Transition::Ignore;

/// `TABLE[dir][class][state]`, dir 0 = original, 1 = reply; states in
/// the order NONE, SYN_SENT, SYN_RECV, ESTABLISHED, FIN_WAIT, CLOSE_WAIT,
/// LAST_ACK, TIME_WAIT, CLOSE, SYN_SENT2 (Linux 6.x).
#[rustfmt::skip]
const TABLE: [[[Transition; 10]; 6]; 2] = [
    [
        //            sNO   sSS   sSR   sES   sFW   sCW   sLA   sTW   sCL   sS2
        /* syn    */ [S_SS, S_SS, S_IG, S_IG, S_IG, S_IG, S_IG, S_SS, S_SS, S_S2],
        /* synack */ [S_IV, S_IV, S_SR, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_SR],
        /* fin    */ [S_IV, S_IV, S_FW, S_FW, S_LA, S_LA, S_LA, S_TW, S_CL, S_IV],
        /* ack    */ [S_ES, S_IV, S_ES, S_ES, S_CW, S_CW, S_TW, S_TW, S_CL, S_IV],
        /* rst    */ [S_IV, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL],
        /* none   */ [S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV],
    ],
    [
        //            sNO   sSS   sSR   sES   sFW   sCW   sLA   sTW   sCL   sS2
        /* syn    */ [S_IV, S_S2, S_IV, S_IV, S_IV, S_IV, S_IV, S_SS, S_IV, S_S2],
        /* synack */ [S_IV, S_SR, S_IG, S_IG, S_IG, S_IG, S_IG, S_IG, S_IG, S_SR],
        /* fin    */ [S_IV, S_IV, S_FW, S_FW, S_LA, S_LA, S_LA, S_TW, S_CL, S_IV],
        /* ack    */ [S_IV, S_IG, S_SR, S_ES, S_CW, S_CW, S_TW, S_TW, S_CL, S_IG],
        /* rst    */ [S_IV, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL, S_CL],
        /* none   */ [S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV, S_IV],
    ],
];

/// The transition for a packet with `flags` travelling in the original
/// (`reply == false`) or reply direction of a connection in `state`.
/// Invalid flag combinations are [`Transition::Invalid`] in every state.
#[inline]
pub fn transition(state: TcpState, reply: bool, flags: u8) -> Transition {
    if !flags_valid(flags) {
        return Transition::Invalid;
    }
    TABLE[usize::from(reply)][packet_class(flags) as usize][state as usize]
}

/// The state a first packet with `flags` opens a connection in, if it may
/// open one: SYN opens `SYN_SENT`; with `loose` (Linux
/// `nf_conntrack_tcp_loose`, default on) a plain ACK picks up an existing
/// connection as `ESTABLISHED`; everything else is invalid.
#[inline]
pub fn opening_state(flags: u8, loose: bool) -> Option<TcpState> {
    match transition(TcpState::None, false, flags) {
        Transition::To(TcpState::SynSent) => Some(TcpState::SynSent),
        Transition::To(s) if loose => Some(s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_flag_combinations_are_linux_s() {
        let valid: Vec<u8> = (0..=255u8)
            .filter(|f| flags_valid(*f) && f & (ECE | CWR | PSH) == 0)
            .collect();
        assert_eq!(
            valid,
            [
                ACK,
                SYN,
                RST,
                0x11,
                SYN | ACK,
                RST | ACK,
                SYN | URG,
                ACK | URG,
                0x31
            ]
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<u8>>()
            .into_iter()
            .collect::<Vec<_>>()
        );
        assert!(flags_valid(ACK | PSH | ECE | CWR));
        assert!(!flags_valid(0));
        assert!(!flags_valid(FIN));
        assert!(!flags_valid(SYN | FIN));
        assert!(!flags_valid(RST | FIN));
    }

    #[test]
    fn handshake_data_close() {
        use TcpState::*;
        let steps = [
            (None, false, SYN, Transition::To(SynSent)),
            (SynSent, true, SYN | ACK, Transition::To(SynRecv)),
            (SynRecv, false, ACK, Transition::To(Established)),
            (Established, true, ACK | PSH, Transition::To(Established)),
            (Established, false, FIN | ACK, Transition::To(FinWait)),
            (FinWait, true, ACK, Transition::To(CloseWait)),
            (CloseWait, true, FIN | ACK, Transition::To(LastAck)),
            (LastAck, false, ACK, Transition::To(TimeWait)),
            (TimeWait, false, SYN, Transition::To(SynSent)),
            (Established, true, RST, Transition::To(Close)),
            (SynSent, false, ACK, Transition::Invalid),
            (SynSent, true, ACK, Transition::Ignore),
            (Established, true, SYN | ACK, Transition::Ignore),
            (SynSent, true, SYN, Transition::To(SynSent2)),
        ];
        for (s, reply, f, want) in steps {
            assert_eq!(
                transition(s, reply, f),
                want,
                "{s:?} reply={reply} flags={f:#x}"
            );
        }
    }

    #[test]
    fn opening() {
        assert_eq!(opening_state(SYN, false), Some(TcpState::SynSent));
        assert_eq!(opening_state(ACK, true), Some(TcpState::Established));
        assert_eq!(opening_state(ACK, false), None);
        assert_eq!(opening_state(SYN | ACK, true), None);
        assert_eq!(opening_state(RST, true), None);
        assert_eq!(opening_state(FIN | ACK, true), None);
    }
}
