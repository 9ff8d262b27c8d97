//! Where the sink finds the transport header and payload of a frame.
//!
//! The common case — untagged IPv4 without options (not a fragment) or
//! untagged IPv6 without extension headers, carrying TCP or UDP — is
//! decoded inline from fixed offsets; everything else goes through
//! `sluice_packet::parse`.  The fast path reads the same fields with the
//! same bounds (IP and UDP length fields, TCP data offset) as `parse`, so
//! it yields the same offsets for the frames it accepts, and it accepts
//! nothing `parse` would reject.

use sluice_packet::ip::IpProtocol;
use sluice_packet::parse;

/// Transport protocol of a located frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum L4 {
    Udp,
    Tcp,
    /// Anything else, including IP fragments and non-IP frames.
    Other,
}

/// Offsets of a frame's parts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Located {
    pub l4: L4,
    pub v6: bool,
    pub l3_off: usize,
    pub l4_off: usize,
    pub payload_off: usize,
    pub payload_len: usize,
}

/// Transport header at `l4` ending (with its payload) at `end`, for
/// protocol `proto`; `None` if not TCP/UDP or malformed.
#[inline(always)]
fn transport(f: &[u8], proto: u8, l4: usize, end: usize, v6: bool) -> Option<Located> {
    let (kind, payload_off, payload_end) = match proto {
        17 => {
            let u: &[u8; 8] = f.get(l4..l4 + 8)?.try_into().ok()?;
            let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if ulen < 8 || l4 + ulen > end {
                return None;
            }
            (L4::Udp, l4 + 8, l4 + ulen)
        }
        6 => {
            let doff = usize::from(*f.get(l4 + 12)? >> 4) * 4;
            if doff < 20 || l4 + doff > end {
                return None;
            }
            (L4::Tcp, l4 + doff, end)
        }
        _ => return None,
    };
    Some(Located {
        l4: kind,
        v6,
        l3_off: 14,
        l4_off: l4,
        payload_off,
        payload_len: payload_end - payload_off,
    })
}

/// The inline fast path; `None` means "use the full parser".
#[inline(always)]
fn fast(f: &[u8]) -> Option<Located> {
    let h: &[u8; 34] = f.get(..34)?.try_into().ok()?;
    let at = |i: usize| usize::from(u16::from_be_bytes([h[i], h[i + 1]]));
    match at(12) {
        0x0800 => {
            let total = at(16);
            if h[14] != 0x45 || at(20) & 0x3fff != 0 || total < 20 || 14 + total > f.len() {
                return None;
            }
            transport(f, h[23], 34, 14 + total, false)
        }
        0x86dd => {
            let plen = at(18);
            if h[14] >> 4 != 6 || 54 + plen > f.len() {
                return None;
            }
            transport(f, h[20], 54, 54 + plen, true)
        }
        _ => None,
    }
}

/// Locates the parts of `f`; `None` if it does not parse.
#[inline]
pub(crate) fn locate(f: &[u8]) -> Option<Located> {
    if let Some(l) = fast(f) {
        return Some(l);
    }
    let h = parse(f).ok()?;
    let l4 = if !h.has_l4_header() {
        L4::Other
    } else if h.l4_protocol == IpProtocol::TCP {
        L4::Tcp
    } else if h.l4_protocol == IpProtocol::UDP {
        L4::Udp
    } else {
        L4::Other
    };
    Some(Located {
        l4,
        v6: h.is_ipv6(),
        l3_off: usize::from(h.l3_offset),
        l4_off: usize::from(h.l4_offset),
        payload_off: usize::from(h.payload_offset),
        payload_len: usize::from(h.payload_len),
    })
}

#[inline(always)]
fn fmul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
fn word(f: &[u8], i: usize) -> u64 {
    match f.get(i..i + 8) {
        Some(b) => {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w)
        }
        None => 0,
    }
}

/// Directional 64-bit key (never 0) of the TCP connection of a located
/// frame: addresses and ports mixed with folded multiplies.  Used only as
/// a table key, so a rare collision merges two connections' ordering
/// state, nothing worse.
#[inline]
pub(crate) fn conn_key(f: &[u8], l: &Located) -> u64 {
    const K: [u64; 4] = [
        0x243f_6a88_85a3_08d3,
        0x1319_8a2e_0370_7344,
        0xa409_3822_299f_31d0,
        0x082e_fa98_ec4e_6c89,
    ];
    let ports = match f.get(l.l4_off..l.l4_off + 4) {
        Some(&[a, b, c, d]) => u64::from(u32::from_be_bytes([a, b, c, d])),
        _ => 0,
    };
    let h = if l.v6 {
        let a = l.l3_off + 8;
        let x = fmul(word(f, a) ^ K[0], word(f, a + 8) ^ K[1]);
        let y = fmul(word(f, a + 16) ^ K[2], word(f, a + 24) ^ K[3]);
        fmul(x ^ ports, y ^ K[0])
    } else {
        fmul(word(f, l.l3_off + 12) ^ K[0], ports ^ K[1])
    };
    h.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
    use sluice_packet::{MacAddr, TcpFlags};

    fn frame(v6: bool, tcp: bool, vlan: Option<u16>, payload: usize) -> Vec<u8> {
        let (s, d) = if v6 {
            ("2001:db8::1", "2001:db8::2")
        } else {
            ("10.0.0.1", "10.0.0.2")
        };
        let l4 = if tcp {
            L4Spec::Tcp {
                src_port: 1,
                dst_port: 2,
                seq: 3,
                ack: 4,
                flags: TcpFlags::ACK,
                window: 5,
            }
        } else {
            L4Spec::Udp {
                src_port: 1,
                dst_port: 2,
            }
        };
        let spec = FrameSpec {
            src_mac: MacAddr::ZERO,
            dst_mac: MacAddr::ZERO,
            vlan,
            src_ip: s.parse().unwrap(),
            dst_ip: d.parse().unwrap(),
            ttl: 9,
            l4,
        };
        let mut buf = vec![0u8; 2048];
        let n = write_frame(&mut buf, &spec, &vec![7u8; payload]).unwrap();
        buf.truncate(n);
        // Link padding the fast path must not count as payload.
        buf.extend_from_slice(&[0xee; 6]);
        buf
    }

    #[test]
    fn fast_path_agrees_with_parse() {
        for v6 in [false, true] {
            for tcp in [false, true] {
                for payload in [0, 1, 30, 500] {
                    let f = frame(v6, tcp, None, payload);
                    let a = fast(&f).expect("fast path takes plain frames");
                    let h = parse(&f).unwrap();
                    assert_eq!(a.payload_off, usize::from(h.payload_offset));
                    assert_eq!(a.payload_len, usize::from(h.payload_len));
                    assert_eq!(a.payload_len, payload);
                    assert_eq!(a.l4_off, usize::from(h.l4_offset));
                    assert_eq!(a.l4 == L4::Tcp, tcp);
                    // Truncations are never accepted by the fast path alone.
                    for cut in 0..f.len() - 6 {
                        if let Some(l) = fast(&f[..cut]) {
                            let h = parse(&f[..cut]).unwrap();
                            assert_eq!(l.payload_off, usize::from(h.payload_offset));
                            assert_eq!(l.payload_len, usize::from(h.payload_len));
                        }
                    }
                }
                // Tagged frames take the full parser, with the same result.
                let f = frame(v6, tcp, Some(5), 40);
                assert!(fast(&f).is_none());
                let l = locate(&f).unwrap();
                assert_eq!((l.l3_off, l.payload_len), (18, 40));
            }
        }
    }

    #[test]
    fn conn_keys_are_directional_and_distinct() {
        let a = frame(false, true, None, 0);
        let mut b = a.clone();
        b.swap(35, 37); // swap the ports (1 <-> 2): the reverse direction
        let la = locate(&a).unwrap();
        let lb = locate(&b).unwrap();
        assert_ne!(conn_key(&a, &la), conn_key(&b, &lb));
        let c = frame(true, true, None, 0);
        let lc = locate(&c).unwrap();
        assert_ne!(conn_key(&a, &la), conn_key(&c, &lc));
        assert_eq!(conn_key(&c, &lc), conn_key(&c.clone(), &lc));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

        /// Whatever the fast path accepts, `parse` accepts with the same
        /// offsets.
        #[test]
        fn fast_path_never_disagrees_with_parse(
            mut f in proptest::collection::vec(any::<u8>(), 0..120),
            v6 in any::<bool>(),
            tcp in any::<bool>(),
        ) {
            if f.len() > 60 {
                // Steer most inputs onto the fast path's branches.
                f[12] = if v6 { 0x86 } else { 0x08 };
                f[13] = if v6 { 0xdd } else { 0x00 };
                f[14] = if v6 { 0x60 } else { 0x45 };
                f[if v6 { 20 } else { 23 }] = if tcp { 6 } else { 17 };
                if !v6 {
                    f[20] &= 0x80;
                    f[21] = 0;
                    f[16] = 0;
                    f[17] = f[17].min((f.len() - 14) as u8);
                } else {
                    f[18] = 0;
                    f[19] = f[19].min((f.len() - 54) as u8);
                }
            }
            if let Some(l) = fast(&f) {
                let h = parse(&f);
                prop_assert!(h.is_ok(), "fast accepted, parse said {:?}", h);
                let h = h.unwrap();
                prop_assert_eq!(l.l4_off, usize::from(h.l4_offset));
                prop_assert_eq!(l.payload_off, usize::from(h.payload_offset));
                prop_assert_eq!(l.payload_len, usize::from(h.payload_len));
            }
        }
    }
}
