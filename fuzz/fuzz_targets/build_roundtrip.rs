//! Frames built from fuzzer-chosen specs always parse back with verifying
//! checksums and the expected flow key.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::ethernet::MacAddr;
use sluice_packet::flow::flow_key;
use sluice_packet::parse::{parse, verify_checksums};
use sluice_packet::tcp::TcpFlags;

fuzz_target!(|data: &[u8]| {
    let Some((h, payload)) = data.split_first_chunk::<64>() else {
        return;
    };
    let u16at = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let u32at = |i: usize| u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
    let mut a = [0u8; 16];
    let mut b = [0u8; 16];
    a.copy_from_slice(&h[12..28]);
    b.copy_from_slice(&h[28..44]);
    let (src_ip, dst_ip) = if h[0] & 1 == 0 {
        (
            IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
        )
    } else {
        (IpAddr::V6(Ipv6Addr::from(a)), IpAddr::V6(Ipv6Addr::from(b)))
    };
    let l4 = match h[1] % 3 {
        0 => L4Spec::Udp {
            src_port: u16at(44),
            dst_port: u16at(46),
        },
        1 => L4Spec::Tcp {
            src_port: u16at(44),
            dst_port: u16at(46),
            seq: u32at(48),
            ack: u32at(52),
            flags: TcpFlags::from_bits(h[56]),
            window: u16at(57),
        },
        _ => L4Spec::IcmpEcho {
            id: u16at(44),
            seq: u16at(46),
            reply: h[2] & 1 == 1,
        },
    };
    let spec = FrameSpec {
        src_mac: MacAddr([h[0], h[1], h[2], h[3], h[4], h[5]]),
        dst_mac: MacAddr([h[6], h[7], h[8], h[9], h[10], h[11]]),
        vlan: (h[3] & 1 == 1).then(|| u16at(60) & 0x0fff),
        src_ip,
        dst_ip,
        ttl: h[62],
        l4,
    };
    let mut buf = vec![0u8; spec.header_len() + payload.len()];
    let n = write_frame(&mut buf, &spec, payload).expect("buffer sized exactly");
    assert_eq!(n, buf.len());
    let hd = parse(&buf).expect("built frame parses");
    assert_eq!(verify_checksums(&buf, &hd), Ok(()));
    assert_eq!(usize::from(hd.payload_len), payload.len());
    let k = flow_key(&buf).expect("built frame has a flow key");
    assert_eq!(k.src_ip(), src_ip);
    assert_eq!(k.dst_ip(), dst_ip);
});
