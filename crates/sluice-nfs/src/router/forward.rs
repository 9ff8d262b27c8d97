//! The per-frame path: classify, answer or learn ARP/ND, look the route
//! up, check the TTL, resolve the next hop's MAC, rewrite, and pick the
//! output port — or turn the frame into an ICMP error or a neighbour
//! request. Plain functions on a byte buffer, so unit tests, fuzzing and
//! the bench drive it without a platform.

use sluice_nf::{DropReason, PortId, Verdict};
use sluice_packet::checksum::{checksum, update_u16};
use sluice_packet::ipv6::is_extension_header;
use sluice_packet::{parse_l3, IpProtocol, ParseError};

use super::icmp_error::{self, TokenBucket};
use super::iface::{is_link_local, Iface};
use super::neighbour::{v4_key, Neighbours};
use super::table::RouteTable;
use super::{drop_reason as dr, nd_wire};

/// Most neighbour requests queued by one call (one per unresolved
/// neighbour; the NF reserves this many buffers).
pub const SOLICITS_PER_CALL: usize = 32;

/// Marks a port that is not a router interface.
pub(super) const NO_IFACE: u16 = u16::MAX;

/// Event counts of one batch (flushed to the NF counters).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Packets forwarded to a next hop.
    pub forwarded: u64,
    /// Packets whose TTL / hop limit ran out.
    pub ttl_expired: u64,
    /// Packets with no matching route.
    pub no_route: u64,
    /// Packets whose next hop's MAC was unknown.
    pub neighbour_unresolved: u64,
    /// ARP replies sent.
    pub arp_replies: u64,
    /// Neighbor Advertisements sent.
    pub nd_advertisements: u64,
    /// ICMP / ICMPv6 errors sent.
    pub icmp_sent: u64,
    /// ICMP errors suppressed by the rate limit.
    pub icmp_rate_limited: u64,
    /// ARP requests sent.
    pub arp_requests: u64,
    /// Neighbor Solicitations sent.
    pub neighbour_solicitations: u64,
    /// Neighbours learned (new entries).
    pub neighbours_learned: u64,
    /// Neighbour requests that could not be sent (no buffer).
    pub requests_unsent: u64,
}

/// The router's state: interfaces, routes, neighbours, ICMP limiter.
pub struct Router {
    pub(super) ifaces: Vec<Iface>,
    /// Interface index by port id (`NO_IFACE` for other ports).
    pub(super) port_iface: Vec<u16>,
    /// Every local IPv4 / IPv6 address with its interface.
    pub(super) local4: Vec<u32>,
    pub(super) local6: Vec<u128>,
    pub(super) table: RouteTable,
    pub(super) neigh: Neighbours,
    pub(super) icmp: TokenBucket,
    pub(super) icmp_errors: bool,
    pub(super) retrans_ns: u64,
    /// Neighbour requests to send after this call (bounded).
    pub(super) solicits: Vec<(u16, u128)>,
    /// The fast paths' last resolved next hop.
    pub(super) memo: NeighMemo,
}

/// The last next hop the fast paths resolved, valid while the neighbour
/// table's version is unchanged: most traffic goes to few next hops, and
/// this line of the router is hot while a neighbour slot often is not.
#[derive(Debug, Clone, Copy)]
pub(super) struct NeighMemo {
    key: u128,
    port: u16,
    version: u64,
    mac: [u8; 6],
}

impl Default for NeighMemo {
    fn default() -> NeighMemo {
        NeighMemo {
            key: 0,
            port: 0,
            // Never a table version (they count up from 0).
            version: u64::MAX,
            mac: [0; 6],
        }
    }
}

/// [`Neighbours::mac`] through the memo.
#[inline(always)]
fn memo_mac(memo: &mut NeighMemo, neigh: &Neighbours, key: u128, port: u16) -> Option<[u8; 6]> {
    let version = neigh.version();
    if memo.version == version && memo.key == key && memo.port == port {
        return Some(memo.mac);
    }
    let mac = neigh.mac(key, port)?;
    *memo = NeighMemo {
        key,
        port,
        version,
        mac,
    };
    Some(mac)
}

/// The outcome of one frame: its verdict and its (possibly new) length.
pub type Outcome = (Verdict, usize);

#[inline]
fn drop(r: DropReason, len: usize) -> Outcome {
    (Verdict::Drop(r), len)
}

impl Router {
    /// The routing table.
    pub fn table(&self) -> &RouteTable {
        &self.table
    }

    /// The neighbour table.
    pub fn neighbours(&self) -> &Neighbours {
        &self.neigh
    }

    /// The name (port) of interface `i`.
    pub fn iface_name(&self, i: usize) -> &str {
        self.ifaces.get(i).map_or("", |f| f.name.as_str())
    }

    /// Forgets learned and incomplete neighbours (static ones stay) and
    /// refills the ICMP error bucket (the NF's `reset`).
    pub fn reset(&mut self) {
        self.neigh.clear_learned();
        self.icmp.reset();
        self.solicits.clear();
    }

    /// Interface index of port `port`, if it is a router interface.
    #[inline]
    pub(super) fn iface_of_port(&self, port: u16) -> Option<usize> {
        match self.port_iface.get(port as usize) {
            Some(&i) if i != NO_IFACE => Some(i as usize),
            _ => None,
        }
    }

    /// Processes one frame in `buf[..len]` (`buf` extends to the end of the
    /// buffer's room, for frames that grow), received on `port_in`.
    pub fn process_frame(
        &mut self,
        buf: &mut [u8],
        len: usize,
        port_in: u16,
        hash: u32,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        self.process_frame_hinted(buf, len, port_in, hash, now_ns, None, st)
    }

    /// [`Self::process_frame`] with the LPM value of the frame's
    /// destination already looked up (for untagged frames only: the IPv4
    /// destination at bytes 30..34, the IPv6 one at 38..54), as the NF does
    /// for a whole batch first ([`RouteTable::v4_value`],
    /// [`RouteTable::v6_values`]).
    ///
    /// Plain untagged IPv4 (IHL 5) and IPv6 (no extension header, not
    /// ICMPv6) frames that are simply forwarded take `fast_v4` /
    /// `fast_v6`; everything else, and every frame those decline,
    /// takes [`Self::process_frame_full`], which gives the same result for
    /// the frames the fast paths take (property test
    /// `tests/router_fast_path.rs`).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn process_frame_hinted(
        &mut self,
        buf: &mut [u8],
        len: usize,
        port_in: u16,
        hash: u32,
        now_ns: u64,
        lpm_value: Option<u32>,
        st: &mut Stats,
    ) -> Outcome {
        let len = len.min(buf.len());
        let fast = match buf.get(12..14) {
            Some([0x08, 0x00]) => self.fast_v4(buf, len, hash, lpm_value),
            Some([0x86, 0xdd]) => self.fast_v6(buf, len, hash, lpm_value),
            _ => None,
        };
        if let Some(port) = fast {
            st.forwarded += 1;
            return (Verdict::ToPort(port), len);
        }
        self.process_frame_full(buf, len, port_in, hash, now_ns, lpm_value, st)
    }

    /// Forwards a plain IPv4 frame — untagged, IHL 5, total length within
    /// the frame, good header checksum, routable non-local destination, a
    /// route, TTL > 1, a resolved next hop — and returns its output port;
    /// `None` (the frame untouched) for anything else. Does exactly what
    /// [`Self::ipv4`] does on that path, without the generic parse.
    // Cost (2026-11-26 01:23 UTC, 2-core VM, builds alternated, medians of
    // 5): `rtr` in `sluice bench nfs --flows 100000 --duration 4` 19.0
    // ns/packet with this path and the next-hop memo, 30.3 through the
    // generic parse; router/nf_forward_v4_batched 25 vs 39 ns per packet.
    // Of it ≈ 3 ns is the LPM, the rest the batch walk, the two header
    // lines and the neighbour (docs/nfs/router.md, Cost).
    #[inline(always)]
    fn fast_v4(
        &mut self,
        buf: &mut [u8],
        len: usize,
        hash: u32,
        value: Option<u32>,
    ) -> Option<PortId> {
        let f = buf.get_mut(..len)?.first_chunk_mut::<34>()?;
        // Version 4, IHL 5; 20 <= total length <= what the frame holds.
        let total = u16::from_be_bytes([f[16], f[17]]) as usize;
        if f[14] != 0x45 || total < 20 || total > len - 14 {
            return None;
        }
        // RFC 1812 §5.2.2 header checksum: ten 16-bit words, folded.
        let mut sum = 0u32;
        for w in f[14..34].chunks_exact(2) {
            sum += u16::from_be_bytes([w[0], w[1]]) as u32;
        }
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        if sum != 0xffff {
            return None;
        }
        let dst = u32::from_be_bytes([f[30], f[31], f[32], f[33]]);
        let first = dst >> 24;
        if first == 0 || first == 127 || first >= 224 || self.local4.contains(&dst) {
            return None;
        }
        let nh = match value {
            Some(v) => self.table.pick_value(v, hash),
            None => self.table.lookup_v4(dst, hash),
        }?;
        let ttl = f[22];
        if ttl <= 1 {
            return None;
        }
        let out = self.ifaces.get(nh.iface as usize)?;
        let key = nh.gateway.unwrap_or(v4_key(dst));
        let mac = memo_mac(&mut self.memo, &self.neigh, key, out.port.0)?;
        // RFC 1624 incremental update of the TTL/protocol word.
        let old = u16::from_be_bytes([ttl, f[23]]);
        let new = old - 0x100;
        let c = update_u16(u16::from_be_bytes([f[24], f[25]]), old, new);
        f[22] = ttl - 1;
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&out.mac);
        Some(out.port)
    }

    /// Forwards a plain IPv6 frame — untagged, payload within the frame,
    /// no extension header and not ICMPv6 (so neither NDP nor an ICMPv6
    /// type to check before an error), a routable non-local destination
    /// and source, a route, hop limit > 1, a resolved next hop — and
    /// returns its output port; `None` (the frame untouched) otherwise.
    /// Does exactly what [`Self::ipv6`] does on that path.
    #[inline(always)]
    fn fast_v6(
        &mut self,
        buf: &mut [u8],
        len: usize,
        hash: u32,
        value: Option<u32>,
    ) -> Option<PortId> {
        let f = buf.get_mut(..len)?.first_chunk_mut::<54>()?;
        let plen = u16::from_be_bytes([f[18], f[19]]) as usize;
        let nh = f[20];
        if f[14] >> 4 != 6
            || 40 + plen > len - 14
            || is_extension_header(IpProtocol(nh))
            || nh == 58
        {
            return None;
        }
        let hl = f[21];
        let src = u128::from_be_bytes(*f[22..38].first_chunk::<16>()?);
        let dst = u128::from_be_bytes(*f[38..54].first_chunk::<16>()?);
        if hl <= 1
            || (dst >> 120) == 0xff
            || is_link_local(dst)
            || is_link_local(src)
            || dst <= 1
            || self.local6.contains(&dst)
        {
            return None;
        }
        let nh = match value {
            Some(v) => self.table.pick_value(v, hash),
            None => self.table.lookup_v6(dst, hash),
        }?;
        let out = self.ifaces.get(nh.iface as usize)?;
        let key = nh.gateway.unwrap_or(dst);
        let mac = memo_mac(&mut self.memo, &self.neigh, key, out.port.0)?;
        f[21] = hl - 1;
        f[0..6].copy_from_slice(&mac);
        f[6..12].copy_from_slice(&out.mac);
        Some(out.port)
    }

    /// The general path, for every frame: the L2/L3 parse
    /// ([`sluice_packet::parse_l3`]: no transport-header checks), ARP and NDP, and every outcome of forwarding
    /// (ICMP errors, neighbour requests, drops). The reference the fast
    /// paths are tested against.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub fn process_frame_full(
        &mut self,
        buf: &mut [u8],
        len: usize,
        port_in: u16,
        hash: u32,
        now_ns: u64,
        lpm_value: Option<u32>,
        st: &mut Stats,
    ) -> Outcome {
        let len = len.min(buf.len());
        let h = match parse_l3(&buf[..len]) {
            Ok(h) => h,
            Err(e) => return drop(DropReason::malformed(e), len),
        };
        let l3 = h.l3_offset as usize;
        let l4 = h.l4_offset as usize;
        let value = if l3 == 14 { lpm_value } else { None };
        match h.ethertype.0 {
            0x0800 => self.ipv4(buf, len, l3, port_in, hash, value, now_ns, st),
            0x86dd => {
                // The ICMPv6 type, if the datagram holds one (a router
                // does not require a whole ICMPv6 header).
                let icmp_type = (h.l4_protocol.0 == 58 && !h.fragment && h.payload_len > 0)
                    .then(|| buf.get(l4).copied())
                    .flatten();
                if let Some(t @ 133..=137) = icmp_type {
                    return self.ndp(buf, len, (l3, l4), t, port_in, now_ns, st);
                }
                self.ipv6(buf, len, l3, icmp_type, port_in, hash, value, now_ns, st)
            }
            0x0806 => self.arp(buf, len, l3, port_in, now_ns, st),
            _ => drop(dr::NON_IP, len),
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn ipv4(
        &mut self,
        buf: &mut [u8],
        len: usize,
        l3: usize,
        port_in: u16,
        hash: u32,
        value: Option<u32>,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        let ihl = (buf[l3] & 0x0f) as usize * 4;
        // RFC 1812 §5.2.2: verify the header checksum before forwarding.
        // ≈ 3 ns for 20 bytes.
        if checksum(&buf[l3..l3 + ihl]) != 0 {
            return drop(DropReason::malformed(ParseError::Ipv4BadChecksum), len);
        }
        let dst = u32::from_be_bytes([buf[l3 + 16], buf[l3 + 17], buf[l3 + 18], buf[l3 + 19]]);
        if self.local4.contains(&dst) {
            return drop(dr::LOCAL, len);
        }
        let first = dst >> 24;
        if dst == 0 || first == 0 || first == 127 || first >= 224 {
            // Martian, loopback, multicast, class E and limited broadcast
            // destinations are never forwarded (RFC 1812 §5.3.7).
            return drop(dr::NOT_ROUTABLE, len);
        }
        let nh = match value {
            Some(v) => self.table.pick_value(v, hash),
            None => self.table.lookup_v4(dst, hash),
        };
        let Some(&nh) = nh else {
            st.no_route += 1;
            // RFC 1812 §5.2.7.1: net unreachable (code 0).
            return self.icmp_v4(
                buf,
                len,
                l3,
                port_in,
                icmp_error::V4_UNREACH,
                0,
                dr::NO_ROUTE,
                now_ns,
                st,
            );
        };
        let ttl = buf[l3 + 8];
        if ttl <= 1 {
            st.ttl_expired += 1;
            return self.icmp_v4(
                buf,
                len,
                l3,
                port_in,
                icmp_error::V4_TIME_EXCEEDED,
                0,
                dr::TTL_EXPIRED,
                now_ns,
                st,
            );
        }
        let iface = nh.iface as usize;
        let Some(out) = self.ifaces.get(iface) else {
            return drop(dr::NO_ROUTE, len);
        };
        let port = out.port;
        let key = nh.gateway.unwrap_or(v4_key(dst));
        let Some(mac) = self.neigh.mac(key, port.0) else {
            return self.unresolved(len, iface, key, now_ns, st);
        };
        // RFC 1624 incremental update of the TTL/protocol word.
        let old = u16::from_be_bytes([ttl, buf[l3 + 9]]);
        buf[l3 + 8] = ttl - 1;
        let new = u16::from_be_bytes([ttl - 1, buf[l3 + 9]]);
        let c = update_u16(u16::from_be_bytes([buf[l3 + 10], buf[l3 + 11]]), old, new);
        buf[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        buf[0..6].copy_from_slice(&mac);
        buf[6..12].copy_from_slice(&out.mac);
        st.forwarded += 1;
        (Verdict::ToPort(port), len)
    }

    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn ipv6(
        &mut self,
        buf: &mut [u8],
        len: usize,
        l3: usize,
        icmp_type: Option<u8>,
        port_in: u16,
        hash: u32,
        value: Option<u32>,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        let dst = u128::from_be_bytes(buf[l3 + 24..l3 + 40].try_into().unwrap_or([0; 16]));
        let src = u128::from_be_bytes(buf[l3 + 8..l3 + 24].try_into().unwrap_or([0; 16]));
        if self.local6.contains(&dst) {
            return drop(dr::LOCAL, len);
        }
        // Multicast, link-local (either end: RFC 4291 §2.5.6 says routers
        // must not forward them), unspecified and loopback.
        if (dst >> 120) == 0xff || is_link_local(dst) || is_link_local(src) || dst <= 1 {
            return drop(dr::NOT_ROUTABLE, len);
        }
        let nh = match value {
            Some(v) => self.table.pick_value(v, hash),
            None => self.table.lookup_v6(dst, hash),
        };
        let Some(&nh) = nh else {
            st.no_route += 1;
            // RFC 4443 §3.1 code 0: no route to destination.
            return self.icmp_v6(
                buf,
                len,
                l3,
                icmp_type,
                port_in,
                icmp_error::V6_UNREACH,
                dr::NO_ROUTE,
                now_ns,
                st,
            );
        };
        let hl = buf[l3 + 7];
        if hl <= 1 {
            st.ttl_expired += 1;
            return self.icmp_v6(
                buf,
                len,
                l3,
                icmp_type,
                port_in,
                icmp_error::V6_TIME_EXCEEDED,
                dr::TTL_EXPIRED,
                now_ns,
                st,
            );
        }
        let iface = nh.iface as usize;
        let Some(out) = self.ifaces.get(iface) else {
            return drop(dr::NO_ROUTE, len);
        };
        let port = out.port;
        let key = nh.gateway.unwrap_or(dst);
        let Some(mac) = self.neigh.mac(key, port.0) else {
            return self.unresolved(len, iface, key, now_ns, st);
        };
        buf[l3 + 7] = hl - 1;
        buf[0..6].copy_from_slice(&mac);
        buf[6..12].copy_from_slice(&out.mac);
        st.forwarded += 1;
        (Verdict::ToPort(port), len)
    }

    /// Whether an ICMP error may go out now (enabled and a token left);
    /// counts the suppressed ones.
    fn icmp_allowed(&mut self, now_ns: u64, st: &mut Stats) -> bool {
        if !self.icmp_errors {
            return false;
        }
        if self.icmp.allow(now_ns) {
            true
        } else {
            st.icmp_rate_limited += 1;
            false
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn icmp_v4(
        &mut self,
        buf: &mut [u8],
        len: usize,
        l3: usize,
        port_in: u16,
        typ: u8,
        code: u8,
        reason: DropReason,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        if !icmp_error::may_send_v4(&buf[l3..len]) {
            return drop(reason, len);
        }
        // Source: the ingress interface's address, else the address of the
        // interface the route back to the sender leaves by (Linux picks by
        // the reverse route; they agree on symmetric setups).
        let sender = u32::from_be_bytes([buf[l3 + 12], buf[l3 + 13], buf[l3 + 14], buf[l3 + 15]]);
        let ingress = self.iface_of_port(port_in);
        let src = ingress.and_then(|i| self.ifaces[i].v4_addr()).or_else(|| {
            let nh = self.table.lookup_v4(sender, 0)?;
            self.ifaces.get(nh.iface as usize)?.v4_addr()
        });
        let Some(src) = src else {
            return drop(reason, len);
        };
        if !self.icmp_allowed(now_ns, st) {
            return drop(reason, len);
        }
        let mac = self.reply_mac(buf, ingress);
        match icmp_error::write_v4(buf, l3, len, typ, code, src, mac) {
            Some(n) => {
                st.icmp_sent += 1;
                (Verdict::ToPort(PortId(port_in)), n)
            }
            None => drop(reason, len),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn icmp_v6(
        &mut self,
        buf: &mut [u8],
        len: usize,
        l3: usize,
        icmp_type: Option<u8>,
        port_in: u16,
        typ: u8,
        reason: DropReason,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        if !icmp_error::may_send_v6(&buf[l3..len], icmp_type) {
            return drop(reason, len);
        }
        let sender = u128::from_be_bytes(buf[l3 + 8..l3 + 24].try_into().unwrap_or([0; 16]));
        let ingress = self.iface_of_port(port_in);
        let src = ingress
            .and_then(|i| self.ifaces[i].v6_source_for(sender))
            .or_else(|| {
                let nh = self.table.lookup_v6(sender, 0)?;
                self.ifaces.get(nh.iface as usize)?.v6_source_for(sender)
            });
        let Some(src) = src else {
            return drop(reason, len);
        };
        if !self.icmp_allowed(now_ns, st) {
            return drop(reason, len);
        }
        let mac = self.reply_mac(buf, ingress);
        match icmp_error::write_v6(buf, l3, len, typ, 0, src, mac) {
            Some(n) => {
                st.icmp_sent += 1;
                (Verdict::ToPort(PortId(port_in)), n)
            }
            None => drop(reason, len),
        }
    }

    /// Source MAC of a reply out of the ingress port: the interface's MAC,
    /// or the MAC the frame was sent to when the port is not an interface.
    fn reply_mac(&self, buf: &[u8], ingress: Option<usize>) -> [u8; 6] {
        match ingress {
            Some(i) => self.ifaces[i].mac,
            None => buf[0..6].try_into().unwrap_or([0; 6]),
        }
    }

    /// The next hop `key` on interface `iface` has no MAC: the packet is
    /// dropped, and an ARP request / Neighbor Solicitation for the
    /// neighbour is queued (at most one per neighbour per retransmit
    /// interval) for the caller to send ([`Self::take_solicit`]).
    fn unresolved(
        &mut self,
        len: usize,
        iface: usize,
        key: u128,
        now_ns: u64,
        st: &mut Stats,
    ) -> Outcome {
        st.neighbour_unresolved += 1;
        let port = self.ifaces[iface].port;
        if self.solicits.len() < SOLICITS_PER_CALL
            && self
                .neigh
                .should_solicit(key, port.0, now_ns, self.retrans_ns)
        {
            self.solicits.push((iface as u16, key));
        }
        drop(dr::NEIGHBOUR_UNRESOLVED, len)
    }

    /// The next queued neighbour request: `(interface, neighbour key)`.
    pub fn take_solicit(&mut self) -> Option<(u16, u128)> {
        self.solicits.pop()
    }

    /// Writes the ARP request (IPv4-mapped key) or Neighbor Solicitation
    /// for neighbour `key` of interface `iface` at the start of `buf`.
    /// Returns the port to send it out of, its length, and whether it is
    /// an ARP request; `None` if the interface has no address to ask from.
    pub fn write_solicit(
        &self,
        iface: u16,
        key: u128,
        buf: &mut [u8],
    ) -> Option<(PortId, usize, bool)> {
        let out = self.ifaces.get(iface as usize)?;
        let v4 = key >> 32 == 0xffff;
        let n = if v4 {
            nd_wire::write_arp_request(buf, out.mac, out.v4_addr()?, key as u32)?
        } else {
            nd_wire::write_ns(buf, out.mac, out.v6_source_for(key)?, key)?
        };
        Some((out.port, n, v4))
    }
}
