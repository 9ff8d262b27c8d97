//! The rule model the parser produces and the matcher compiles: header
//! (action, protocol, addresses, ports, direction) and the ordered payload
//! option chain.

use std::net::IpAddr;

use sluice_spec::IpNet;

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Log an alert and go on with the next rules.
    Alert,
    /// Log an alert and, in IPS mode, drop the packet (evaluation stops).
    Drop,
    /// Stop evaluating rules for this packet (no alert).
    Pass,
}

impl Action {
    /// The keyword, as written in rules and alert logs.
    pub fn name(self) -> &'static str {
        match self {
            Action::Alert => "alert",
            Action::Drop => "drop",
            Action::Pass => "pass",
        }
    }
}

/// The protocol a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// TCP (IP protocol 6).
    Tcp,
    /// UDP (17).
    Udp,
    /// ICMP (1) or ICMPv6 (58).
    Icmp,
    /// Any IP packet.
    Ip,
}

impl Proto {
    /// Whether a packet with IP protocol `p` is covered.
    #[inline]
    pub fn covers(self, p: u8) -> bool {
        match self {
            Proto::Tcp => p == 6,
            Proto::Udp => p == 17,
            Proto::Icmp => p == 1 || p == 58,
            Proto::Ip => true,
        }
    }
}

/// An address expression: Snort's `any`, prefixes, `!` and `[lists]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddrExpr {
    /// Every address.
    Any,
    /// One prefix (a bare address is a /32 or /128).
    Net(IpNet),
    /// The complement of the inner expression.
    Not(Box<AddrExpr>),
    /// Snort list semantics: matches when some positive element matches (or
    /// there is none) and no negated element's inner expression matches.
    List(Vec<AddrExpr>),
}

impl AddrExpr {
    /// Whether `ip` is in the set.
    pub fn contains(&self, ip: &IpAddr) -> bool {
        match self {
            AddrExpr::Any => true,
            AddrExpr::Net(n) => n.contains(ip),
            AddrExpr::Not(e) => !e.contains(ip),
            AddrExpr::List(l) => list_matches(
                l,
                |e| e.contains(ip),
                |e| match e {
                    AddrExpr::Not(inner) => Some(&**inner),
                    _ => None,
                },
            ),
        }
    }
}

/// A port expression: `any`, `N`, ranges `a:b` (open ends allowed), `!`
/// and `[lists]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortExpr {
    /// Every port.
    Any,
    /// An inclusive range.
    Range(u16, u16),
    /// The complement of the inner expression.
    Not(Box<PortExpr>),
    /// Same list semantics as [`AddrExpr::List`].
    List(Vec<PortExpr>),
}

impl PortExpr {
    /// Whether `port` is in the set.
    pub fn contains(&self, port: u16) -> bool {
        match self {
            PortExpr::Any => true,
            PortExpr::Range(lo, hi) => *lo <= port && port <= *hi,
            PortExpr::Not(e) => !e.contains(port),
            PortExpr::List(l) => list_matches(
                l,
                |e| e.contains(port),
                |e| match e {
                    PortExpr::Not(inner) => Some(&**inner),
                    _ => None,
                },
            ),
        }
    }

    /// Whether this is `any`.
    pub fn is_any(&self) -> bool {
        matches!(self, PortExpr::Any)
    }
}

fn list_matches<T>(
    list: &[T],
    matches: impl Fn(&T) -> bool,
    negated_inner: impl Fn(&T) -> Option<&T>,
) -> bool {
    let mut has_positive = false;
    let mut positive_hit = false;
    for e in list {
        match negated_inner(e) {
            Some(inner) => {
                if matches(inner) {
                    return false;
                }
            }
            None => {
                has_positive = true;
                positive_hit = positive_hit || matches(e);
            }
        }
    }
    !has_positive || positive_hit
}

/// `->` or `<>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Source to destination only.
    Forward,
    /// Either way round.
    Both,
}

/// One `content` option with its modifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// The bytes to find (as written; see `nocase`).
    pub pattern: Vec<u8>,
    /// `!content`: the bytes must not occur in the window.
    pub negated: bool,
    /// ASCII case-insensitive comparison.
    pub nocase: bool,
    /// Absolute window start (bytes from the payload start).
    pub offset: Option<u32>,
    /// Absolute window length from `offset`.
    pub depth: Option<u32>,
    /// Relative window start from the end of the previous match (may be negative).
    pub distance: Option<i32>,
    /// Relative window length from `distance`.
    pub within: Option<u32>,
    /// Explicit `fast_pattern`: use this content for the prefilter.
    pub fast_pattern: bool,
}

impl Content {
    /// A plain content with no modifiers.
    pub fn new(pattern: Vec<u8>, negated: bool) -> Content {
        Content {
            pattern,
            negated,
            nocase: false,
            offset: None,
            depth: None,
            distance: None,
            within: None,
            fast_pattern: false,
        }
    }

    /// Whether the window is relative to the previous match.
    pub fn is_relative(&self) -> bool {
        self.distance.is_some() || self.within.is_some()
    }
}

/// One `pcre` option.
#[derive(Debug, Clone)]
pub struct Pcre {
    /// The option value as written (`/…/flags`).
    pub source: String,
    /// The compiled expression (`regex` bytes API, Unicode off).
    pub regex: regex::bytes::Regex,
    /// `R` flag: search from the end of the previous match.
    pub relative: bool,
    /// `!pcre`: the expression must not match.
    pub negated: bool,
}

/// A payload option, in rule order.
#[derive(Debug, Clone)]
pub enum PayloadOpt {
    /// `content`.
    Content(Content),
    /// `pcre`.
    Pcre(Pcre),
}

/// Which side sent the packet, relative to the connection's initiator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlowDir {
    /// No `to_server`/`to_client` constraint.
    #[default]
    Any,
    /// `to_server` / `from_client`.
    ToServer,
    /// `to_client` / `from_server`.
    ToClient,
}

/// The `flow` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowOpt {
    /// Direction constraint.
    pub dir: FlowDir,
    /// `established` (Some(true)) / `not_established` (Some(false)).
    pub established: Option<bool>,
}

/// A parsed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Action.
    pub action: Action,
    /// Protocol.
    pub proto: Proto,
    /// Source addresses.
    pub src: AddrExpr,
    /// Source ports.
    pub src_ports: PortExpr,
    /// `->` or `<>`.
    pub direction: Direction,
    /// Destination addresses.
    pub dst: AddrExpr,
    /// Destination ports.
    pub dst_ports: PortExpr,
    /// `msg` (empty if absent).
    pub msg: String,
    /// `sid` (required).
    pub sid: u32,
    /// `rev` (default 1).
    pub rev: u32,
    /// `classtype`.
    pub classtype: Option<String>,
    /// `flow`.
    pub flow: FlowOpt,
    /// `content` and `pcre` options in rule order.
    pub payload: Vec<PayloadOpt>,
    /// Where the rule came from (`file:line` or `rules[i]`).
    pub origin: String,
}

impl Rule {
    /// Whether the header (protocol, addresses, ports, direction) accepts a
    /// packet with these fields. Ports are ignored for protocols without
    /// ports (the parser only allows `any` there).
    #[inline]
    pub fn header_matches(&self, proto: u8, src: &IpAddr, sp: u16, dst: &IpAddr, dp: u16) -> bool {
        if !self.proto.covers(proto) {
            return false;
        }
        let one_way = |s: &IpAddr, sp: u16, d: &IpAddr, dp: u16| {
            self.src_ports.contains(sp)
                && self.dst_ports.contains(dp)
                && self.src.contains(s)
                && self.dst.contains(d)
        };
        one_way(src, sp, dst, dp)
            || (self.direction == Direction::Both && one_way(dst, dp, src, sp))
    }
}
