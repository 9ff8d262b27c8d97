//! Reading and rewriting the DSCP of an IP header in place.

use sluice_packet::checksum;

/// The DSCP of the IP header at `l3` (IPv4 TOS or IPv6 traffic class, top
/// six bits); `None` for non-IP frames or a header too short to read.
#[inline]
pub fn read(frame: &[u8], l3: usize, ip_version: u8) -> Option<u8> {
    match ip_version {
        4 => frame.get(l3 + 1).map(|b| b >> 2),
        6 => {
            let w = u16::from_be_bytes([*frame.get(l3)?, *frame.get(l3 + 1)?]);
            Some(((w >> 4) as u8) >> 2)
        }
        _ => None,
    }
}

/// Writes `dscp` (0–63) into the IP header at `l3`, keeping the ECN bits;
/// for IPv4 the header checksum is patched for the one changed word
/// (RFC 1624) rather than recomputed. IPv6 has no header checksum and the
/// traffic class is not in the transport pseudo-header. Returns whether the
/// header changed.
#[inline]
pub fn write(frame: &mut [u8], l3: usize, ip_version: u8, dscp: u8) -> bool {
    let Some(h) = frame.get_mut(l3..l3 + 12) else {
        return false;
    };
    let old = u16::from_be_bytes([h[0], h[1]]);
    let new = match ip_version {
        4 => (old & 0xff03) | (u16::from(dscp & 0x3f) << 2),
        6 => (old & 0xf03f) | (u16::from(dscp & 0x3f) << 6),
        _ => return false,
    };
    if new == old {
        return false;
    }
    h[..2].copy_from_slice(&new.to_be_bytes());
    if ip_version == 4 {
        let c = u16::from_be_bytes([h[10], h[11]]);
        h[10..12].copy_from_slice(&checksum::update_u16(c, old, new).to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::{parse, verify_checksums, write_frame, FrameSpec, L4Spec, MacAddr};

    fn frame(v6: bool) -> Vec<u8> {
        let (s, d) = if v6 {
            ("fd00::1", "fd00::2")
        } else {
            ("10.0.0.1", "10.0.0.2")
        };
        let spec = FrameSpec {
            src_mac: MacAddr::ZERO,
            dst_mac: MacAddr::BROADCAST,
            vlan: Some(7),
            src_ip: s.parse().unwrap(),
            dst_ip: d.parse().unwrap(),
            ttl: 9,
            l4: L4Spec::Udp {
                src_port: 1,
                dst_port: 2,
            },
        };
        let mut buf = vec![0; 128];
        let n = write_frame(&mut buf, &spec, b"x").unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn rewrites_keep_checksums_and_ecn() {
        for v6 in [false, true] {
            let mut f = frame(v6);
            let h = parse(&f).unwrap();
            let l3 = h.l3_offset as usize;
            f[l3 + 1] |= if v6 { 0x10 } else { 0x01 }; // ECN = 1
            if !v6 {
                // Keep the header checksum valid after setting ECN.
                let c = sluice_packet::checksum::checksum(&{
                    let mut x = f[l3..l3 + 20].to_vec();
                    x[10] = 0;
                    x[11] = 0;
                    x
                });
                f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
            }
            assert_eq!(read(&f, l3, h.ip_version), Some(0));
            assert!(write(&mut f, l3, h.ip_version, 46));
            assert!(!write(&mut f, l3, h.ip_version, 46));
            assert_eq!(read(&f, l3, h.ip_version), Some(46));
            let h2 = parse(&f).unwrap();
            verify_checksums(&f, &h2).unwrap();
            let ecn = if v6 {
                (f[l3 + 1] >> 4) & 3
            } else {
                f[l3 + 1] & 3
            };
            assert_eq!(ecn, 1);
        }
    }
}
