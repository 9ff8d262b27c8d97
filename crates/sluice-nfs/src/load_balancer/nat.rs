//! In-place address/port rewrites with incremental checksum updates
//! (RFC 1624): the IPv4 header checksum for the address, and the TCP/UDP
//! checksum for the address (pseudo-header) and the port.

use sluice_packet::checksum::{update_bytes, update_u16};
use sluice_packet::{Headers, IpProtocol};

/// Which end of the packet to rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Source address and port (replies: backend → VIP).
    Src,
    /// Destination address and port (requests: VIP → backend).
    Dst,
}

/// Rewrites the `end` address to `addr` (4 or 16 bytes, the packet's
/// family) and port to `port`. The headers were validated by `parse`, and
/// the caller only rewrites unfragmented TCP/UDP packets; slices are still
/// taken with `get` so a bug cannot panic on packet input.
pub fn rewrite(frame: &mut [u8], h: &Headers, end: End, addr: &[u8], port: u16) -> bool {
    let l3 = usize::from(h.l3_offset);
    let l4 = usize::from(h.l4_offset);
    let (a_off, alen) = match (h.ip_version, end) {
        (4, End::Src) => (l3 + 12, 4),
        (4, End::Dst) => (l3 + 16, 4),
        (6, End::Src) => (l3 + 8, 16),
        (6, End::Dst) => (l3 + 24, 16),
        _ => return false,
    };
    if addr.len() != alen {
        return false;
    }
    let csum_off = match h.l4_protocol {
        IpProtocol::TCP => l4 + 16,
        IpProtocol::UDP => l4 + 6,
        _ => return false,
    };
    let p_off = l4 + if end == End::Src { 0 } else { 2 };
    if frame.len() < csum_off + 2 || frame.len() < a_off + alen {
        return false;
    }
    let mut old_addr = [0u8; 16];
    old_addr[..alen].copy_from_slice(&frame[a_off..a_off + alen]);
    let old_addr = &old_addr[..alen];
    let old_port = u16::from_be_bytes([frame[p_off], frame[p_off + 1]]);
    frame[a_off..a_off + alen].copy_from_slice(addr);
    frame[p_off..p_off + 2].copy_from_slice(&port.to_be_bytes());
    if h.ip_version == 4 {
        let c = u16::from_be_bytes([frame[l3 + 10], frame[l3 + 11]]);
        let c = update_bytes(c, old_addr, addr);
        frame[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    let c = u16::from_be_bytes([frame[csum_off], frame[csum_off + 1]]);
    // An IPv4 UDP checksum of 0 means "none": leave it so (RFC 768).
    if !(h.l4_protocol == IpProtocol::UDP && c == 0) {
        let mut c = update_u16(update_bytes(c, old_addr, addr), old_port, port);
        if h.l4_protocol == IpProtocol::UDP && c == 0 {
            c = 0xffff;
        }
        frame[csum_off..csum_off + 2].copy_from_slice(&c.to_be_bytes());
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_packet::{
        parse, verify_checksums, write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags,
    };

    fn frame(src: &str, dst: &str, tcp: bool) -> Vec<u8> {
        let spec = FrameSpec {
            src_mac: MacAddr::ZERO,
            dst_mac: MacAddr::BROADCAST,
            vlan: None,
            src_ip: src.parse().unwrap(),
            dst_ip: dst.parse().unwrap(),
            ttl: 9,
            l4: if tcp {
                L4Spec::Tcp {
                    src_port: 1234,
                    dst_port: 80,
                    seq: 7,
                    ack: 0,
                    flags: TcpFlags::SYN,
                    window: 9,
                }
            } else {
                L4Spec::Udp {
                    src_port: 1234,
                    dst_port: 80,
                }
            },
        };
        let mut buf = vec![0; 200];
        let n = write_frame(&mut buf, &spec, b"some payload").unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn rewrites_keep_checksums_valid() {
        for (s, d, new) in [
            ("10.0.0.1", "10.0.0.100", "10.1.2.3"),
            ("fd00::1", "fd00::100", "fd01::abcd:1"),
        ] {
            for tcp in [true, false] {
                let mut f = frame(s, d, tcp);
                let h = parse(&f).unwrap();
                let ip: std::net::IpAddr = new.parse().unwrap();
                let bytes = match ip {
                    std::net::IpAddr::V4(a) => a.octets().to_vec(),
                    std::net::IpAddr::V6(a) => a.octets().to_vec(),
                };
                assert!(rewrite(&mut f, &h, End::Dst, &bytes, 8080));
                let h = parse(&f).unwrap();
                verify_checksums(&f, &h).unwrap();
                let k = sluice_packet::flow_key(&f).unwrap();
                assert_eq!(k.dst_ip(), ip);
                assert_eq!(k.dst_port, 8080);
                assert!(rewrite(&mut f, &h, End::Src, &bytes, 443));
                verify_checksums(&f, &parse(&f).unwrap()).unwrap();
            }
        }
    }
}
