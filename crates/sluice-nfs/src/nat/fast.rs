//! The fast path: a packet of a known session, recognised by its platform
//! flow id and checked against the raw header bytes at fixed offsets.
//!
//! The full path parses the frame, classifies it (inside/outside,
//! external, hairpin), builds a key and hashes it. Here the per-flow-id
//! hint names the session, whose `fast` flags say which of its tuples the
//! full path translated as plain outbound or inbound traffic (set there,
//! cleared when the slot is reused); the packet is taken only if
//! it is untagged Ethernet + a 20-byte IPv4 header + UDP or TCP, not a
//! fragment, with lengths that `sluice_packet::parse` would accept, and
//! its tuple equals the live, unexpired session's. The classification
//! depends only on the addresses (equal to the session's) and, with
//! `inside_ports`, on the ingress port (checked), so the full path would
//! do exactly the same: refresh the session and rewrite one endpoint. The
//! checksums are updated with the session's precomputed RFC 1624 sums.
//! Anything else returns `None` and takes the full path (which hints the
//! session again when it had to look it up).

use super::rewrite::apply;
use super::table::{Session, FAST_IN, FAST_OUT};
use super::translate::{Action, Nat};

/// Untagged Ethernet, IPv4 without options, and the UDP header (or the
/// first 8 bytes of TCP).
const HDR: usize = 42;

#[inline(always)]
fn be16(b: &[u8; HDR], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

#[inline(always)]
fn be32(b: &[u8; HDR], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

#[inline(always)]
fn be64(b: &[u8; HDR], o: usize) -> u64 {
    u64::from_be_bytes([
        b[o],
        b[o + 1],
        b[o + 2],
        b[o + 3],
        b[o + 4],
        b[o + 5],
        b[o + 6],
        b[o + 7],
    ])
}

#[inline(always)]
fn put16(b: &mut [u8; HDR], o: usize, v: u16) {
    [b[o], b[o + 1]] = v.to_be_bytes();
}

#[inline(always)]
fn put32(b: &mut [u8; HDR], o: usize, v: u32) {
    [b[o], b[o + 1], b[o + 2], b[o + 3]] = v.to_be_bytes();
}

impl Nat {
    /// Prefetches the hint slot of `flow_id` (first pass of `process`).
    #[inline(always)]
    pub(crate) fn prefetch_hint(&self, flow_id: u32) {
        if let Some(c) = self.cache.get(flow_id as usize) {
            sluice_sys::prefetch(c);
        }
    }

    /// Prefetches the session line the hint of `flow_id` names (second
    /// pass of `process`, once the hints are on their way).
    #[inline(always)]
    pub(crate) fn prefetch_session(&self, flow_id: u32) {
        if let Some(&c) = self.cache.get(flow_id as usize) {
            if let Some(s) = self.tables.sessions.get(c.wrapping_sub(1) as usize) {
                sluice_sys::prefetch(s);
            }
        }
    }

    /// Translates `f` if it is a packet of its flow's hinted session (see
    /// the module doc); `None` when the full path must decide.
    #[inline(always)]
    pub(crate) fn fast(
        &mut self,
        f: &mut [u8],
        port_in: u16,
        flow_id: u32,
        now: u64,
    ) -> Option<Action> {
        let slot = self.cache.get(flow_id as usize)?.wrapping_sub(1);
        let len = f.len();
        let (h, rest) = f.split_first_chunk_mut::<HDR>()?;
        // The shape `parse` accepts with l3 = 14 and l4 = 34, not a
        // fragment: EtherType 0x0800 and version/IHL 0x45 in one word (TOS
        // masked), MF and the offset in another (DF masked).
        let total = usize::from(be16(h, 16));
        if be32(h, 12) & 0xffff_ff00 != 0x0800_4500
            || be16(h, 20) & 0x3fff != 0
            || total < 20
            || total > len - 14
        {
            return None;
        }
        let seg = total - 20;
        // One copy of the rest per protocol and direction, so the checksum
        // offset is a constant and nothing lives on the stack.
        match h[23] {
            17 => {
                let ulen = usize::from(be16(h, 38));
                if seg < 8 || ulen < 8 || ulen > seg {
                    return None;
                }
                self.fast_proto::<false>(h, None, slot, port_in, now)
            }
            6 => {
                // The rest of the TCP header (offset, flags, checksum at
                // 46, 47, 50).
                let t = rest.first_chunk_mut::<10>()?;
                let thl = usize::from(t[4] >> 4) * 4;
                if seg < 20 || thl < 20 || thl > seg {
                    return None;
                }
                self.fast_proto::<true>(h, Some(t), slot, port_in, now)
            }
            _ => None,
        }
    }

    /// [`Self::fast`] for UDP or (`TCP`) TCP: which of the session's
    /// tuples this can be.
    #[inline(always)]
    fn fast_proto<const TCP: bool>(
        &mut self,
        h: &mut [u8; HDR],
        tcp: Option<&mut [u8; 10]>,
        slot: u32,
        port_in: u16,
        now: u64,
    ) -> Option<Action> {
        let x = self.tables.sessions.get(slot as usize)?;
        if x.internal.addr == be32(h, 26) {
            self.fast_dir::<true, TCP>(h, tcp, slot, port_in, now)
        } else {
            self.fast_dir::<false, TCP>(h, tcp, slot, port_in, now)
        }
    }

    /// The rest of [`Self::fast`] for an outbound (`OUT`) or inbound
    /// packet: match the session's tuple for that direction, refresh it,
    /// rewrite the source (destination) with the precomputed sums.
    #[inline(always)]
    fn fast_dir<const OUT: bool, const TCP: bool>(
        &mut self,
        h: &mut [u8; HDR],
        tcp: Option<&mut [u8; 10]>,
        slot: u32,
        port_in: u16,
        now: u64,
    ) -> Option<Action> {
        let x: &Session = self.tables.sessions.get(slot as usize)?;
        let (a, b, flag, new, [d_ip, d_l4]) = if OUT {
            (x.internal, x.remote, FAST_OUT, x.external, x.delta_out)
        } else {
            (x.remote, x.external, FAST_IN, x.internal, x.delta_in)
        };
        // Whether the full path took this tuple as plain traffic (with
        // `inside_ports`, from the same side: the flag was set on an
        // inside (outside) port).
        let side_ok = !self.inside.by_port || self.inside.has_port(port_in) == OUT;
        // The tuple as two words: addresses (26..34), ports (34..38).
        let addrs = (u64::from(a.addr) << 32) | u64::from(b.addr);
        let ports = (u32::from(a.port) << 16) | u32::from(b.port);
        let proto = if TCP { 6 } else { 17 };
        if !(x.fast & flag != 0
            && side_ok
            && x.live
            && x.expires > now
            && x.proto == proto
            && be64(h, 26) == addrs
            && be32(h, 34) == ports)
        {
            return None;
        }
        let flags = match &tcp {
            Some(t) if TCP => t[5],
            _ => 0,
        };
        self.tables.touch(slot, flags, OUT, now);
        // NAT share of `process`: ≈ 23–40 ns/packet with the state in
        // cache, ≈ 46–67 ns at 100 k mappings (was 83–96 before the
        // prefetches and the bounded sweep), on-CPU under heavy load;
        // ≈ 198 instructions outbound, 202 inbound (221 / 225 before the
        // two-word tuple compare and the wire-order sums) and 2 lines not
        // in L1 (hint, session) per packet (bench nat/outbound_hot_1k,
        // outbound_100k minus copy_only; callgrind NAT_INSTR_PACKETS).
        let (ao, po) = if OUT { (26, 34) } else { (30, 36) };
        put32(h, ao, new.addr);
        put16(h, po, new.port);
        // Checksums and sums in wire order (see `Session::delta_out`).
        [h[24], h[25]] = apply(u16::from_ne_bytes([h[24], h[25]]), d_ip).to_ne_bytes();
        if TCP {
            if let Some(t) = tcp {
                [t[8], t[9]] = apply(u16::from_ne_bytes([t[8], t[9]]), d_l4).to_ne_bytes();
            }
        } else {
            let c = u16::from_ne_bytes([h[40], h[41]]);
            if c != 0 {
                // 0 means "no checksum" in UDP: a computed 0 is sent as
                // 0xffff (both the same in either byte order).
                let c = apply(c, d_l4);
                [h[40], h[41]] = if c == 0 { 0xffff } else { c }.to_ne_bytes();
            }
        }
        if OUT {
            self.stats.translated_out += 1;
            Some(Action::Out)
        } else {
            self.stats.translated_in += 1;
            Some(Action::In)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::build_nf;
    use super::*;
    use proptest::prelude::*;
    use sluice_nf::{BuildContext, NfId, PortId, Resolver};
    use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
    use sluice_packet::{MacAddr, TcpFlags};
    use sluice_spec::ConfigNode;
    use std::net::Ipv4Addr;

    const S: u64 = 1_000_000_000;
    const T0: u64 = 1_000 * S;

    /// Port "in" is ingress port 0.
    struct Names;
    impl Resolver for Names {
        fn nf(&self, _: &str) -> Option<NfId> {
            None
        }
        fn port(&self, name: &str) -> Option<PortId> {
            (name == "in").then_some(PortId(0))
        }
        /// Every port here both receives and transmits.
        fn input_port(&self, name: &str) -> Option<PortId> {
            self.port(name)
        }
    }

    fn nat(by_port: bool) -> Nat {
        let mut cfg = serde_json::json!({
            "pool": ["192.0.2.1"],
            "capacity": 64,
            "forward": [{ "proto": "udp", "external": "192.0.2.1:7000", "internal": "10.0.0.9:70" }],
        });
        if by_port {
            cfg["inside_ports"] = serde_json::json!(["in"]);
        } else {
            cfg["inside"] = serde_json::json!(["10.0.0.0/16"]);
        }
        let config = ConfigNode::from_json(cfg);
        let ctx = BuildContext {
            name: "nat".into(),
            config: &config,
            resolver: &Names,
            flow_capacity: 16,
        };
        build_nf(&ctx).unwrap().into_nat()
    }

    fn frame(tcp: bool, vlan: bool, src: (u32, u16), dst: (u32, u16)) -> Vec<u8> {
        let l4 = if tcp {
            L4Spec::Tcp {
                src_port: src.1,
                dst_port: dst.1,
                seq: 1,
                ack: 1,
                flags: TcpFlags::ACK,
                window: 100,
            }
        } else {
            L4Spec::Udp {
                src_port: src.1,
                dst_port: dst.1,
            }
        };
        let spec = FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan: vlan.then_some(7),
            src_ip: Ipv4Addr::from(src.0).into(),
            dst_ip: Ipv4Addr::from(dst.0).into(),
            ttl: 64,
            l4,
        };
        let mut buf = vec![0u8; 90];
        let n = write_frame(&mut buf, &spec, &[0xab; 12]).unwrap();
        buf.truncate(n);
        buf
    }

    const IN1: u32 = 0x0a00_0001; // 10.0.0.1
    const IN2: u32 = 0x0a00_0002;
    const EXT: u32 = 0xc000_0201; // 192.0.2.1
    const REM: u32 = 0xc633_6407; // 198.51.100.7

    fn udp(src: (u32, u16), dst: (u32, u16)) -> Vec<u8> {
        frame(false, false, src, dst)
    }

    #[test]
    fn a_known_flow_takes_the_fast_path_both_ways() {
        let mut n = nat(false);
        let mut f = udp((IN1, 5000), (REM, 53));
        let mut g = f.clone();
        assert_eq!(n.fast(&mut f, 1, 3, T0), None, "no hint yet");
        assert_eq!(n.translate(&mut f, 1, 3, T0), Action::Out);
        assert_eq!(n.fast(&mut g, 1, 3, T0), Some(Action::Out));
        assert_eq!(f, g, "same bytes as the full path");
        let mut r = udp((REM, 53), (EXT, 5000));
        assert_eq!(n.translate(&mut r, 1, 4, T0), Action::In);
        let mut r2 = udp((REM, 53), (EXT, 5000));
        assert_eq!(n.fast(&mut r2, 1, 4, T0), Some(Action::In));
        assert_eq!(r, r2);
        assert_eq!(r2, udp((REM, 53), (IN1, 5000)), "checksums as if built so");
        assert_eq!(n.stats().translated_out, 2);
        assert_eq!(n.stats().translated_in, 2);
    }

    #[test]
    fn the_hint_dies_with_its_session() {
        let mut n = nat(false);
        let f = udp((IN1, 5000), (REM, 53));
        assert_eq!(n.translate(&mut f.clone(), 1, 3, T0), Action::Out);
        // Timed out (UDP: 300 s) but not yet swept: not taken, and the
        // full path makes a new mapping.
        let later = T0 + 301 * S;
        assert_eq!(n.fast(&mut f.clone(), 1, 3, later), None);
        assert_eq!(n.translate(&mut f.clone(), 1, 3, later), Action::Out);
        assert_eq!(n.table_stats().mapping_expired, 1);
        assert_eq!(n.table_stats().mapping_created, 2);
        // Swept away, and its slot reused by another flow (the slab's free
        // list is LIFO): the tuple no longer matches.
        let much_later = later + 301 * S;
        assert_eq!(n.expire(much_later, 64), 1);
        let other = udp((IN2, 6000), (REM, 53));
        assert_eq!(
            n.translate(&mut other.clone(), 1, 9, much_later),
            Action::Out
        );
        assert_eq!(n.fast(&mut f.clone(), 1, 3, much_later), None);
        assert_eq!(n.translate(&mut f.clone(), 1, 3, much_later), Action::Out);
        assert_eq!(n.fast(&mut f.clone(), 1, 3, much_later), Some(Action::Out));
    }

    #[test]
    fn a_packet_of_another_flow_under_the_same_id_falls_back() {
        let mut n = nat(false);
        let a = udp((IN1, 5000), (REM, 53));
        let b = udp((IN2, 6000), (REM, 53));
        assert_eq!(n.translate(&mut a.clone(), 1, 3, T0), Action::Out);
        for mut f in [
            b.clone(),
            udp((IN1, 5001), (REM, 53)),
            udp((IN1, 5000), (REM, 54)),
            udp((IN1, 5000), (REM + 1, 53)),
            frame(true, false, (IN1, 5000), (REM, 53)),
        ] {
            assert_eq!(n.fast(&mut f.clone(), 1, 3, T0), None);
            assert_eq!(n.translate(&mut f, 1, 3, T0), Action::Out);
        }
        // The hint now names the last flow; `a` still translates right.
        let mut f = a.clone();
        assert_eq!(n.translate(&mut f, 1, 3, T0), Action::Out);
        assert_eq!(&f[26..30], &EXT.to_be_bytes());
        assert_eq!(&f[34..36], &5000u16.to_be_bytes());
    }

    #[test]
    fn flow_end_and_reset_forget_the_hint() {
        let mut n = nat(false);
        let f = udp((IN1, 5000), (REM, 53));
        assert_eq!(n.translate(&mut f.clone(), 1, 3, T0), Action::Out);
        n.flow_end(3);
        assert_eq!(n.fast(&mut f.clone(), 1, 3, T0), None);
        assert_eq!(n.translate(&mut f.clone(), 1, 3, T0), Action::Out);
        n.reset();
        assert_eq!(n.fast(&mut f.clone(), 1, 3, T0), None);
    }

    #[test]
    fn shapes_the_fast_path_does_not_handle_fall_back() {
        let mut n = nat(false);
        let f = udp((IN1, 5000), (REM, 53));
        assert_eq!(n.translate(&mut f.clone(), 1, 3, T0), Action::Out);
        let tagged = frame(false, true, (IN1, 5000), (REM, 53));
        let mut fragment = f.clone();
        fragment[20] |= 0x20; // more fragments
        let mut short = f.clone();
        short[17] = 200; // IP total length past the frame
        let mut bad_udp = f.clone();
        bad_udp[39] = 4; // UDP length below 8
        for g in [tagged, fragment, short, bad_udp] {
            assert_eq!(n.fast(&mut g.clone(), 1, 3, T0), None);
        }
        // Hairpin (inside → an external endpoint) is never hinted fast.
        let hp = udp((IN2, 6000), (EXT, 5000));
        assert_eq!(n.translate(&mut hp.clone(), 1, 5, T0), Action::Hairpin);
        assert_eq!(n.fast(&mut hp.clone(), 1, 5, T0), None);
        assert_eq!(n.translate(&mut hp.clone(), 1, 5, T0), Action::Hairpin);
    }

    #[test]
    fn with_inside_ports_the_ingress_port_is_checked() {
        let mut n = nat(true);
        let f = udp((IN1, 5000), (REM, 53));
        assert_eq!(n.translate(&mut f.clone(), 0, 3, T0), Action::Out);
        assert_eq!(n.fast(&mut f.clone(), 0, 3, T0), Some(Action::Out));
        // The same tuple from an outside port is not outbound traffic.
        assert_eq!(n.fast(&mut f.clone(), 1, 3, T0), None);
        assert_eq!(n.translate(&mut f.clone(), 1, 3, T0), Action::Untranslated);
    }

    /// One step of a random run.
    #[derive(Debug, Clone)]
    enum Step {
        Packet {
            kind: u8,
            host: u8,
            tcp: bool,
            vlan: bool,
            id: u32,
            port_in: u16,
            csum: Option<u16>,
            flags: u8,
            mangle: u8,
        },
        Wait(u64),
        Sweep(usize),
        FlowEnd(u32),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            8 => (0u8..4, 0u8..4, any::<bool>(), prop::bool::weighted(0.1), prop_oneof![0u32..6, Just(u32::MAX)],
                  0u16..2, prop::option::of(prop_oneof![Just(0u16), Just(0xffff), any::<u16>()]),
                  any::<u8>(), prop_oneof![6 => Just(0u8), 1 => 1u8..4])
                .prop_map(|(kind, host, tcp, vlan, id, port_in, csum, flags, mangle)| Step::Packet {
                    kind, host, tcp, vlan, id, port_in, csum, flags, mangle
                }),
            1 => prop_oneof![Just(S), Just(100 * S), Just(250 * S), Just(400 * S)].prop_map(Step::Wait),
            1 => (1usize..70).prop_map(Step::Sweep),
            1 => (0u32..6).prop_map(Step::FlowEnd),
        ]
    }

    /// The frame of a step: outbound, inbound reply, hairpin or
    /// port-forwarded inbound, possibly with its checksums, TCP flags or
    /// lengths changed.
    fn packet(
        kind: u8,
        host: u8,
        tcp: bool,
        vlan: bool,
        csum: Option<u16>,
        flags: u8,
        mangle: u8,
    ) -> Vec<u8> {
        let inside = (IN1 + u32::from(host & 1), 5000 + u16::from(host >> 1));
        let remote = (REM + u32::from(host & 1), 53);
        let (src, dst) = match kind {
            0 => (inside, remote),
            1 => (remote, (EXT, inside.1)),
            2 => (inside, (EXT, 5000 + u16::from(host & 1))),
            _ => (remote, (EXT, 7000)),
        };
        let mut f = frame(tcp, vlan, src, dst);
        let l3 = if vlan { 18 } else { 14 };
        let l4 = l3 + 20;
        if let Some(c) = csum {
            let o = if tcp { l4 + 16 } else { l4 + 6 };
            f[o..o + 2].copy_from_slice(&c.to_be_bytes());
            f[l3 + 10..l3 + 12].copy_from_slice(&c.rotate_left(3).to_be_bytes());
        }
        if tcp {
            f[l4 + 13] = flags;
        }
        match mangle {
            1 => f[l3 + 6] |= 0x20,                      // a fragment
            2 => f[l3 + 3] = f[l3 + 3].wrapping_add(40), // longer than the frame
            3 if tcp => f[l4 + 12] = 0x20,               // TCP header length 8
            3 => f[l4 + 5] = 3,                          // UDP length 3
            _ => {}
        }
        f
    }

    proptest! {
        /// `translate` (fast path first) does exactly what the full path
        /// alone does — verdicts, bytes, counters, tables — over random
        /// runs mixing directions, hairpins, port forwards, flow ids shared
        /// by several flows, expiry, sweeps, flow ends, odd shapes.
        #[test]
        fn the_fast_path_changes_nothing(by_port in any::<bool>(), steps in prop::collection::vec(step(), 1..120)) {
            let (mut fast, mut slow) = (nat(by_port), nat(by_port));
            let mut now = T0;
            for st in steps {
                match st {
                    Step::Packet { kind, host, tcp, vlan, id, port_in, csum, flags, mangle } => {
                        let f = packet(kind, host, tcp, vlan, csum, flags, mangle);
                        let (mut a, mut b) = (f.clone(), f);
                        let ra = fast.translate(&mut a, port_in, id, now);
                        let rb = slow.translate_slow(&mut b, port_in, id, now);
                        prop_assert_eq!(ra, rb);
                        prop_assert_eq!(a, b);
                    }
                    Step::Wait(d) => now += d,
                    Step::Sweep(n) => prop_assert_eq!(fast.expire(now, n), slow.expire(now, n)),
                    Step::FlowEnd(id) => {
                        fast.flow_end(id);
                        slow.flow_end(id);
                    }
                }
                prop_assert_eq!(fast.stats(), slow.stats());
                prop_assert_eq!(fast.table_stats(), slow.table_stats());
                prop_assert_eq!(fast.session_count(), slow.session_count());
                prop_assert_eq!(fast.mapping_count(), slow.mapping_count());
            }
        }
    }
}
