//! Per-state idle timeouts, with Linux's defaults
//! (`net.netfilter.nf_conntrack_*_timeout*`).

use super::tcp::TcpState;

const S: u64 = 1_000_000_000;

/// Idle timeouts in nanoseconds: a connection expires when no packet
/// refreshed it for the timeout of its current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP, indexed by [`TcpState`] discriminant (`None` unused).
    pub tcp: [u64; 10],
    /// UDP before a reply was seen, or replied for less than 2 s.
    pub udp: u64,
    /// UDP seen both ways for at least 2 s (a "stream").
    pub udp_stream: u64,
    /// ICMP/ICMPv6 echo.
    pub icmp: u64,
    /// Any other IP protocol.
    pub generic: u64,
    /// TCP after 3 retransmissions of the same segment, when shorter than
    /// the state's (`nf_conntrack_tcp_timeout_max_retrans`).
    pub tcp_retrans: u64,
    /// TCP with data not yet acknowledged, or picked up mid-stream with
    /// no reply yet, when shorter than the state's
    /// (`nf_conntrack_tcp_timeout_unacknowledged`).
    pub tcp_unack: u64,
}

impl Default for Timeouts {
    /// Linux 6.x defaults: SYN_SENT 120 s, SYN_RECV 60 s, ESTABLISHED
    /// 5 days, FIN_WAIT 120 s, CLOSE_WAIT 60 s, LAST_ACK 30 s, TIME_WAIT
    /// 120 s, CLOSE 10 s, SYN_SENT2 120 s; UDP 30 s / 120 s stream; ICMP
    /// 30 s; generic 600 s; TCP retransmitting or unacknowledged 300 s.
    fn default() -> Self {
        Timeouts {
            tcp: [
                0,
                120 * S,
                60 * S,
                5 * 24 * 3600 * S,
                120 * S,
                60 * S,
                30 * S,
                120 * S,
                10 * S,
                120 * S,
            ],
            udp: 30 * S,
            udp_stream: 120 * S,
            icmp: 30 * S,
            generic: 600 * S,
            tcp_retrans: 300 * S,
            tcp_unack: 300 * S,
        }
    }
}

impl Timeouts {
    /// The timeout of TCP state `s`.
    #[inline]
    pub fn tcp(&self, s: TcpState) -> u64 {
        self.tcp[s as usize]
    }

    /// The ESTABLISHED timeout (the ACK step's, a constant index).
    #[inline(always)]
    pub fn tcp_established(&self) -> u64 {
        self.tcp[TcpState::Established as usize]
    }

    /// Config key of each TCP state's timeout (`tcp_<state>`), by state.
    pub const TCP_KEYS: [(&'static str, TcpState); 9] = [
        ("tcp_syn_sent", TcpState::SynSent),
        ("tcp_syn_recv", TcpState::SynRecv),
        ("tcp_established", TcpState::Established),
        ("tcp_fin_wait", TcpState::FinWait),
        ("tcp_close_wait", TcpState::CloseWait),
        ("tcp_last_ack", TcpState::LastAck),
        ("tcp_time_wait", TcpState::TimeWait),
        ("tcp_close", TcpState::Close),
        ("tcp_syn_sent2", TcpState::SynSent2),
    ];
}
