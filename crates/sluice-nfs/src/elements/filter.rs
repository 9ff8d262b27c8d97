//! A tcpdump-like filter language, parsed once into a predicate tree and
//! evaluated on a frame parsed once with [`sluice_packet::parse`].
//!
//! ```text
//! expr  := and ( ("or" | "||") and )*
//! and   := unary ( ("and" | "&&") unary )*
//! unary := ("not" | "!") unary | "(" expr ")" | proto [qual] | qual
//! proto := "ip" | "ip6" | "tcp" | "udp" | "sctp" | "icmp" | "icmp6" | "arp"
//! qual  := ["src" | "dst"] ("host" ADDR | "net" CIDR | "port" N | "portrange" A-B)
//!        | "vlan" [ID] | "proto" (N | tcp | udp | icmp | …)
//! ```
//! `tcp port 80` means `tcp and port 80`, as in tcpdump. Semantics follow
//! pcap-filter(7) with these differences: primitives always look past
//! VLAN tags (tcpdump needs a `vlan` primitive first); IP fragments never
//! match port primitives (tcpdump matches the first fragment); IPv6
//! protocols are those after the extension headers.

use std::fmt;
use std::net::IpAddr;

use sluice_packet::{EtherType, Headers, IpProtocol};

/// Which address or port a primitive looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Source or destination.
    Any,
    /// Source only.
    Src,
    /// Destination only.
    Dst,
}

/// An address prefix: the address as 128 bits (IPv4 in the low 32) and
/// the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    v4: bool,
    addr: u128,
    mask: u128,
}

impl Prefix {
    fn contains(&self, v4: bool, a: u128) -> bool {
        self.v4 == v4 && a & self.mask == self.addr
    }
}

/// A filter expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// Both sides.
    And(Box<Expr>, Box<Expr>),
    /// Either side.
    Or(Box<Expr>, Box<Expr>),
    /// Negation.
    Not(Box<Expr>),
    /// IPv4 (`ip`).
    Ip4,
    /// IPv6 (`ip6`).
    Ip6,
    /// ARP.
    Arp,
    /// IP protocol (v4 or v6), e.g. `tcp`, `proto 47`.
    Proto(u8),
    /// ICMP over IPv4 only (`icmp`).
    Icmp4,
    /// ICMPv6 over IPv6 only (`icmp6`).
    Icmp6,
    /// Address in prefix (`host` is a full-length prefix); IPv4 ones also
    /// match ARP sender/target addresses, as in tcpdump.
    Net(Dir, Prefix),
    /// TCP/UDP/SCTP port in `lo..=hi`.
    Port(Dir, u16, u16),
    /// 802.1Q/802.1ad tagged, optionally with this (outermost) VLAN id.
    Vlan(Option<u16>),
}

/// A parse error with the byte offset it was found at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// Byte offset in the expression.
    pub at: usize,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at offset {})", self.msg, self.at)
    }
}

impl std::error::Error for FilterError {}

/// Limits that keep hostile expressions cheap to parse and evaluate.
const MAX_LEN: usize = 4096;
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    toks: Vec<(usize, &'a str)>,
    pos: usize,
    end: usize,
    depth: usize,
}

fn tokenize(s: &str) -> Vec<(usize, &str)> {
    let mut out = vec![];
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'(' || c == b')' || c == b'!' {
            out.push((i, &s[i..i + 1]));
            i += 1;
        } else if (c == b'&' || c == b'|') && b.get(i + 1) == Some(&c) {
            out.push((i, &s[i..i + 2]));
            i += 2;
        } else {
            let start = i;
            while i < b.len()
                && !b[i].is_ascii_whitespace()
                && !matches!(b[i], b'(' | b')' | b'!' | b'&' | b'|')
            {
                i += 1;
            }
            if i == start {
                // A lone `&` or `|`.
                i += 1;
            }
            out.push((start, &s[start..i]));
        }
    }
    out
}

/// Parses a filter expression.
pub fn parse_filter(s: &str) -> Result<Expr, FilterError> {
    if s.len() > MAX_LEN {
        return Err(FilterError {
            at: MAX_LEN,
            msg: format!("expression longer than {MAX_LEN} bytes"),
        });
    }
    let mut p = Parser {
        toks: tokenize(s),
        pos: 0,
        end: s.len(),
        depth: 0,
    };
    if p.toks.is_empty() {
        return Err(p.err("empty expression"));
    }
    let e = p.or()?;
    match p.peek() {
        None => Ok(e),
        Some(t) => Err(p.err(format!("unexpected `{t}`"))),
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.toks.get(self.pos).map(|t| t.1)
    }
    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.end, |t| t.0)
    }
    fn err(&self, msg: impl Into<String>) -> FilterError {
        FilterError {
            at: self.at(),
            msg: msg.into(),
        }
    }
    fn next(&mut self) -> Option<&'a str> {
        let t = self.peek();
        self.pos += 1;
        t
    }
    fn eat(&mut self, alts: &[&str]) -> bool {
        if self.peek().is_some_and(|t| alts.contains(&t)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.and()?;
        while self.eat(&["or", "||"]) {
            e = Expr::Or(Box::new(e), Box::new(self.and()?));
        }
        Ok(e)
    }

    fn and(&mut self) -> Result<Expr, FilterError> {
        let mut e = self.unary()?;
        while self.eat(&["and", "&&"]) {
            e = Expr::And(Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("expression nested deeper than {MAX_DEPTH}")));
        }
        let r = self.unary_inner();
        self.depth -= 1;
        r
    }

    fn unary_inner(&mut self) -> Result<Expr, FilterError> {
        if self.eat(&["not", "!"]) {
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        if self.eat(&["("]) {
            let e = self.or()?;
            if !self.eat(&[")"]) {
                return Err(self.err("expected `)`"));
            }
            return Ok(e);
        }
        let proto = match self.peek() {
            Some("ip") => Some(Expr::Ip4),
            Some("ip6") => Some(Expr::Ip6),
            Some("arp") => Some(Expr::Arp),
            Some("tcp") => Some(Expr::Proto(6)),
            Some("udp") => Some(Expr::Proto(17)),
            Some("sctp") => Some(Expr::Proto(132)),
            Some("icmp") => Some(Expr::Icmp4),
            Some("icmp6") => Some(Expr::Icmp6),
            _ => None,
        };
        if let Some(p) = proto {
            self.pos += 1;
            return Ok(match self.qualifier_start() {
                true => Expr::And(Box::new(p), Box::new(self.qualifier()?)),
                false => p,
            });
        }
        self.qualifier()
    }

    fn qualifier_start(&self) -> bool {
        matches!(
            self.peek(),
            Some("src" | "dst" | "host" | "net" | "port" | "portrange" | "proto")
        )
    }

    fn qualifier(&mut self) -> Result<Expr, FilterError> {
        let dir = if self.eat(&["src"]) {
            Dir::Src
        } else if self.eat(&["dst"]) {
            Dir::Dst
        } else {
            Dir::Any
        };
        let at = self.at();
        let kw = self
            .next()
            .ok_or_else(|| self.err("expression ends early"))?;
        let value = |p: &mut Self, what: &str| -> Result<(usize, &'a str), FilterError> {
            let at = p.at();
            match p.next() {
                Some(v) if !matches!(v, "(" | ")" | "!" | "&&" | "||") => Ok((at, v)),
                _ => Err(FilterError {
                    at,
                    msg: format!("`{kw}` needs {what}"),
                }),
            }
        };
        let bad = |at: usize, msg: String| FilterError { at, msg };
        match kw {
            "host" | "net" => {
                let (vat, v) = value(
                    self,
                    if kw == "host" {
                        "an address"
                    } else {
                        "a prefix"
                    },
                )?;
                let p = parse_prefix(v, kw == "host").map_err(|m| bad(vat, m))?;
                Ok(Expr::Net(dir, p))
            }
            "port" => {
                let (vat, v) = value(self, "a port number")?;
                let n = v
                    .parse::<u16>()
                    .map_err(|_| bad(vat, format!("invalid port `{v}`")))?;
                Ok(Expr::Port(dir, n, n))
            }
            "portrange" => {
                let (vat, v) = value(self, "a range like 1024-2047")?;
                let r = v
                    .split_once('-')
                    .and_then(|(a, b)| Some((a.parse::<u16>().ok()?, b.parse::<u16>().ok()?)))
                    .filter(|(a, b)| a <= b)
                    .ok_or_else(|| bad(vat, format!("invalid port range `{v}`")))?;
                Ok(Expr::Port(dir, r.0, r.1))
            }
            "vlan" | "proto" if dir != Dir::Any => Err(bad(at, format!("`{kw}` takes no src/dst"))),
            "vlan" => {
                let id = match self.peek() {
                    Some(v) if v.bytes().all(|c| c.is_ascii_digit()) => {
                        let vat = self.at();
                        self.pos += 1;
                        let id = v.parse::<u16>().ok().filter(|i| *i < 4096);
                        Some(id.ok_or_else(|| {
                            bad(vat, format!("vlan id `{v}` is out of range 0-4095"))
                        })?)
                    }
                    _ => None,
                };
                Ok(Expr::Vlan(id))
            }
            "proto" => {
                let (vat, v) = value(self, "a protocol number or name")?;
                let n = match v {
                    "tcp" => 6,
                    "udp" => 17,
                    "icmp" => 1,
                    "icmp6" => 58,
                    "sctp" => 132,
                    "gre" => 47,
                    "esp" => 50,
                    "ah" => 51,
                    _ => v
                        .parse::<u8>()
                        .map_err(|_| bad(vat, format!("invalid protocol `{v}`")))?,
                };
                Ok(Expr::Proto(n))
            }
            other => Err(bad(at, format!("unknown primitive `{other}`"))),
        }
    }
}

fn parse_prefix(s: &str, host: bool) -> Result<Prefix, String> {
    let (a, len) = match s.split_once('/') {
        Some(_) if host => {
            return Err(format!(
                "`host` takes an address, not the prefix `{s}` (use `net`)"
            ))
        }
        Some((a, l)) => (
            a,
            Some(
                l.parse::<u8>()
                    .map_err(|_| format!("invalid prefix length in `{s}`"))?,
            ),
        ),
        None => (s, None),
    };
    let ip: IpAddr = a.parse().map_err(|_| format!("invalid address `{a}`"))?;
    let (v4, bits, addr) = match ip {
        IpAddr::V4(x) => (true, 32u8, u128::from(u32::from(x))),
        IpAddr::V6(x) => (false, 128u8, u128::from(x)),
    };
    let len = len.unwrap_or(bits);
    if len > bits {
        return Err(format!("prefix length {len} is too long for `{a}`"));
    }
    let full: u128 = if bits == 32 {
        u128::from(u32::MAX)
    } else {
        u128::MAX
    };
    let mask = if len == 0 {
        0
    } else {
        full & (full << (bits - len))
    };
    if addr & !mask != 0 {
        return Err(format!(
            "`{s}` has host bits set (did you mean {}?)",
            fmt_net(v4, addr & mask, len)
        ));
    }
    Ok(Prefix { v4, addr, mask })
}

fn fmt_net(v4: bool, addr: u128, len: u8) -> String {
    if v4 {
        format!("{}/{len}", std::net::Ipv4Addr::from(addr as u32))
    } else {
        format!("{}/{len}", std::net::Ipv6Addr::from(addr))
    }
}

/// What a predicate reads from one frame, extracted once.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// 4, 6, or 0 (non-IP).
    ip_version: u8,
    arp: bool,
    proto: u8,
    v4: bool,
    src: u128,
    dst: u128,
    ports: Option<(u16, u16)>,
    vlan: Option<u16>,
}

impl Fields {
    /// Extracts the fields of `frame` parsed into `h`.
    #[inline]
    pub fn new(frame: &[u8], h: &Headers) -> Fields {
        let l3 = usize::from(h.l3_offset);
        let get = |o: usize, n: usize| frame.get(l3 + o..l3 + o + n);
        let be = |s: Option<&[u8]>| {
            s.map_or(0u128, |b| {
                b.iter().fold(0u128, |a, &x| a << 8 | u128::from(x))
            })
        };
        let arp = h.ethertype == EtherType::ARP;
        let (v4, src, dst) = match h.ip_version {
            4 => (true, be(get(12, 4)), be(get(16, 4))),
            6 => (false, be(get(8, 16)), be(get(24, 16))),
            // ARP (Ethernet/IPv4 checked by parse): sender / target.
            _ if arp => (true, be(get(14, 4)), be(get(24, 4))),
            _ => (false, 0, 0),
        };
        let ports = match h.l4_protocol {
            IpProtocol::TCP | IpProtocol::UDP | IpProtocol::SCTP if h.has_l4_header() => {
                let l4 = usize::from(h.l4_offset);
                let p = |o: usize| {
                    frame
                        .get(l4 + o..l4 + o + 2)
                        .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
                };
                Some((p(0), p(2)))
            }
            _ => None,
        };
        Fields {
            ip_version: h.ip_version,
            arp,
            proto: h.l4_protocol.0,
            v4,
            src,
            dst,
            ports,
            vlan: h.vlan_id(),
        }
    }
}

impl Expr {
    /// Evaluates the predicate.
    pub fn eval(&self, f: &Fields) -> bool {
        match self {
            Expr::And(a, b) => a.eval(f) && b.eval(f),
            Expr::Or(a, b) => a.eval(f) || b.eval(f),
            Expr::Not(a) => !a.eval(f),
            Expr::Ip4 => f.ip_version == 4,
            Expr::Ip6 => f.ip_version == 6,
            Expr::Arp => f.arp,
            Expr::Proto(p) => f.ip_version != 0 && f.proto == *p,
            Expr::Icmp4 => f.ip_version == 4 && f.proto == 1,
            Expr::Icmp6 => f.ip_version == 6 && f.proto == 58,
            Expr::Net(d, p) => {
                (f.ip_version != 0 || f.arp)
                    && match d {
                        Dir::Src => p.contains(f.v4, f.src),
                        Dir::Dst => p.contains(f.v4, f.dst),
                        Dir::Any => p.contains(f.v4, f.src) || p.contains(f.v4, f.dst),
                    }
            }
            Expr::Port(d, lo, hi) => f.ports.is_some_and(|(s, t)| {
                let r = *lo..=*hi;
                match d {
                    Dir::Src => r.contains(&s),
                    Dir::Dst => r.contains(&t),
                    Dir::Any => r.contains(&s) || r.contains(&t),
                }
            }),
            Expr::Vlan(id) => f.vlan.is_some_and(|v| id.is_none_or(|i| i == v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_and_sugar() {
        let e = parse_filter("tcp port 80 or not udp and src net 10.0.0.0/8").unwrap();
        let expect = Expr::Or(
            Box::new(Expr::And(
                Box::new(Expr::Proto(6)),
                Box::new(Expr::Port(Dir::Any, 80, 80)),
            )),
            Box::new(Expr::And(
                Box::new(Expr::Not(Box::new(Expr::Proto(17)))),
                Box::new(Expr::Net(
                    Dir::Src,
                    parse_prefix("10.0.0.0/8", false).unwrap(),
                )),
            )),
        );
        assert_eq!(e, expect);
        assert_eq!(
            parse_filter("!(ip||ip6)&&vlan 7").unwrap(),
            parse_filter("not (ip or ip6) and vlan 7").unwrap()
        );
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = |s: &str| parse_filter(s).unwrap_err();
        assert_eq!(e("tcp port").at, 8);
        assert!(e("tcp port").msg.contains("needs a port"));
        assert_eq!(e("host 10.0.0.300").at, 5);
        assert!(e("net 10.0.0.1/8").msg.contains("did you mean 10.0.0.0/8"));
        assert!(e("(tcp").msg.contains("expected `)`"));
        assert!(e("tcp udp").msg.contains("unexpected `udp`"));
        assert!(e("bogus").msg.contains("unknown primitive `bogus`"));
        assert!(e("").msg.contains("empty"));
        assert!(e(&"(".repeat(100)).msg.contains("deeper"));
        assert!(e("portrange 9-3").msg.contains("invalid port range"));
        assert!(e("vlan 5000").msg.contains("out of range"));
        assert!(e("src vlan 1").msg.contains("no src/dst"));
    }
}
