//! Raw bytes as a transport segment: TCP (options iterator), UDP, ICMPv4,
//! ICMPv6, with checksum verify/fill against fuzzer-chosen addresses.
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use sluice_packet::icmpv4::Icmpv4Packet;
use sluice_packet::icmpv6::Icmpv6Packet;
use sluice_packet::tcp::{TcpOptions, TcpSegment};
use sluice_packet::udp::UdpDatagram;

#[path = "../../crates/sluice-packet/tests/common/exercise.rs"]
mod exercise;

fuzz_target!(|data: &[u8]| {
    let Some((addrs, seg)) = data.split_first_chunk::<32>() else {
        return;
    };
    let mut a = [0u8; 16];
    let mut b = [0u8; 16];
    a.copy_from_slice(&addrs[..16]);
    b.copy_from_slice(&addrs[16..]);
    let (s6, d6) = (Ipv6Addr::from(a), Ipv6Addr::from(b));
    let (s4, d4) = (
        Ipv4Addr::new(a[0], a[1], a[2], a[3]),
        Ipv4Addr::new(b[0], b[1], b[2], b[3]),
    );
    exercise::exercise_views(seg);
    for o in TcpOptions::new(seg) {
        let _ = o;
    }
    let mut buf = seg.to_vec();
    if let Ok(mut t) = TcpSegment::new_checked(&mut buf[..]) {
        t.fill_checksum_v4(&s4, &d4);
        assert!(t.verify_checksum_v4(&s4, &d4));
        t.fill_checksum_v6(&s6, &d6);
        assert!(t.verify_checksum_v6(&s6, &d6));
    }
    let mut buf = seg.to_vec();
    if let Ok(mut u) = UdpDatagram::new_checked(&mut buf[..]) {
        u.fill_checksum_v4(&s4, &d4);
        assert!(u.verify_checksum_v4(&s4, &d4));
        u.fill_checksum_v6(&s6, &d6);
        assert!(u.verify_checksum_v6(&s6, &d6));
    }
    let mut buf = seg.to_vec();
    if let Ok(mut i) = Icmpv4Packet::new_checked(&mut buf[..]) {
        i.fill_checksum();
        assert!(i.verify_checksum());
    }
    let mut buf = seg.to_vec();
    if let Ok(mut i) = Icmpv6Packet::new_checked(&mut buf[..]) {
        i.fill_checksum(&s6, &d6);
        assert!(i.verify_checksum(&s6, &d6));
    }
});
