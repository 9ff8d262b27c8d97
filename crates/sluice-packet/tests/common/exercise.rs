//! Calls every parser and every accessor of every view on arbitrary bytes.
//!
//! Shared by the proptests (tests/proptests.rs) and the cargo-fuzz targets
//! (fuzz/fuzz_targets/*.rs include this file with `#[path]`).  The only
//! property checked here is "no panic" plus cheap internal invariants.
#![allow(dead_code)]

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};

use sluice_packet::arp::ArpPacket;
use sluice_packet::checksum;
use sluice_packet::ethernet::EthernetFrame;
use sluice_packet::flow::{flow_key, FlowKey};
use sluice_packet::icmpv4::Icmpv4Packet;
use sluice_packet::icmpv6::Icmpv6Packet;
use sluice_packet::ipv4::Ipv4Packet;
use sluice_packet::ipv6::{self, Ipv6Packet};
use sluice_packet::parse::{parse, parse_l3, verify_checksums, Headers};
use sluice_packet::tcp::TcpSegment;
use sluice_packet::udp::UdpDatagram;
use sluice_packet::vlan::{self, VlanTag};
use sluice_packet::IpProtocol;

/// Runs the hot-path functions on a whole frame and checks the invariants
/// of a successful parse.
pub fn exercise_frame(data: &[u8]) {
    if let Ok(h) = parse_l3(data) {
        check_headers(data, &h);
    }
    let parsed = parse(data);
    let key = flow_key(data);
    match parsed {
        Ok(h) => {
            check_headers(data, &h);
            black_box(verify_checksums(data, &h).ok());
            match key {
                Ok(k) => {
                    assert!(h.ip_version == 4 || h.ip_version == 6);
                    assert_eq!(FlowKey::from_headers(data, &h), Ok(k));
                    exercise_key(&k);
                }
                Err(e) => {
                    assert_eq!(h.ip_version, 0);
                    assert_eq!(e, sluice_packet::ParseError::UnsupportedEtherType);
                }
            }
        }
        Err(e) => {
            // flow_key fails exactly when parse fails, with the same reason.
            assert_eq!(key, Err(e));
            assert!(!e.name().is_empty());
        }
    }
    // verify_checksums must tolerate Headers that do not match the frame.
    let bogus = Headers {
        l2_len: 14,
        l3_offset: 14,
        l4_offset: 0xffff,
        ip_version: 4,
        l4_protocol: IpProtocol::TCP,
        ..Headers::default()
    };
    black_box(verify_checksums(data, &bogus).ok());
    black_box(FlowKey::from_headers(data, &bogus).ok());
    let bogus6 = Headers {
        l3_offset: 0xfff0,
        l4_offset: 3,
        ip_version: 6,
        l4_protocol: IpProtocol::ICMPV6,
        ..Headers::default()
    };
    black_box(verify_checksums(data, &bogus6).ok());
    black_box(FlowKey::from_headers(data, &bogus6).ok());

    // Every view on the Ethernet payload / at the parsed offsets.
    if let Ok(eth) = EthernetFrame::new_checked(data) {
        black_box((
            eth.dst_addr(),
            eth.src_addr(),
            eth.ethertype(),
            eth.payload(),
        ));
        if let Ok(st) = vlan::walk(eth.ethertype(), eth.payload()) {
            black_box((
                st.count(),
                st.vid(0),
                st.vid(1),
                st.tci(2),
                st.ethertype(),
                st.len(),
            ));
        }
    }
    exercise_views(data);
    if let Ok(h) = parse(data) {
        let l3 = data.get(usize::from(h.l3_offset)..).unwrap_or(&[]);
        exercise_views(l3);
        let l4 = data.get(usize::from(h.l4_offset)..).unwrap_or(&[]);
        exercise_views(l4);
    }
}

fn check_headers(data: &[u8], h: &Headers) {
    assert!(usize::from(h.l2_len) >= 14);
    assert_eq!(h.l2_len, h.l3_offset);
    assert_eq!(usize::from(h.l2_len), 14 + 4 * usize::from(h.vlan_count));
    assert!(h.vlan_count <= 2);
    assert!(h.l3_offset <= h.l4_offset);
    assert!(h.l4_offset <= h.payload_offset);
    assert!(usize::from(h.payload_offset) + usize::from(h.payload_len) <= data.len());
    if h.ip_version == 0 {
        assert_eq!(h.l4_offset, h.l3_offset);
    } else {
        assert!(h.l4_offset > h.l3_offset);
    }
    if h.fragment {
        assert_eq!(h.payload_offset, h.l4_offset);
    }
}

fn exercise_key(k: &FlowKey) {
    let r = k.reversed();
    assert_eq!(r.reversed(), *k);
    assert_eq!(r.canonical(), k.canonical());
    assert_eq!(r.symmetric_hash(), k.symmetric_hash());
    assert_eq!(r.symmetric_hash_with_seed(7), k.symmetric_hash_with_seed(7));
    black_box((k.src_ip(), k.dst_ip(), k.to_string()));
}

/// Every view's constructor and accessors on `data`, plus setters on a copy.
pub fn exercise_views(data: &[u8]) {
    let v4a = Ipv4Addr::new(10, 0, 0, 1);
    let v4b = Ipv4Addr::new(10, 0, 0, 2);
    let v6a = Ipv6Addr::LOCALHOST;
    let v6b = Ipv6Addr::UNSPECIFIED;

    if let Ok(t) = VlanTag::new_checked(data) {
        black_box((
            t.tci(),
            t.pcp(),
            t.dei(),
            t.vid(),
            t.ethertype(),
            t.payload(),
        ));
    }
    if let Ok(a) = ArpPacket::new_checked(data) {
        black_box((
            a.hardware_type(),
            a.protocol_type(),
            a.hardware_len(),
            a.protocol_len(),
            a.operation(),
            a.sender_hw_addr(),
            a.sender_proto_addr(),
            a.target_hw_addr(),
            a.target_proto_addr(),
        ));
    }
    for ip in [
        Ipv4Packet::new_checked(data),
        Ipv4Packet::new_embedded(data),
    ]
    .into_iter()
    .flatten()
    {
        black_box((
            ip.version(),
            ip.ihl(),
            ip.dscp(),
            ip.ecn(),
            ip.total_len(),
            ip.ident(),
            ip.dont_frag(),
            ip.more_frags(),
            ip.frag_offset(),
            ip.is_fragment(),
            ip.ttl(),
            ip.protocol(),
            ip.checksum(),
            ip.src_addr(),
            ip.dst_addr(),
        ));
        black_box((
            ip.options(),
            ip.payload(),
            ip.header(),
            ip.verify_checksum(),
            ip.pseudo_header_sum(),
        ));
        assert!(ip.header_len() >= 20);
        assert!(ip.payload().len() + ip.header_len() <= data.len());
    }
    for ip in [
        Ipv6Packet::new_checked(data),
        Ipv6Packet::new_embedded(data),
    ]
    .into_iter()
    .flatten()
    {
        black_box((
            ip.version(),
            ip.traffic_class(),
            ip.dscp(),
            ip.ecn(),
            ip.flow_label(),
            ip.payload_len(),
            ip.next_header(),
            ip.hop_limit(),
            ip.src_addr(),
            ip.dst_addr(),
            ip.payload(),
        ));
        if let Ok(ul) = ip.upper_layer() {
            assert!(ul.offset <= ip.payload().len());
            assert!(usize::from(ul.ext_headers) <= ipv6::MAX_EXT_HEADERS);
            black_box(ul.is_non_first_fragment());
        }
        black_box((
            ip.upper_layer_payload().ok(),
            ip.pseudo_header_sum(IpProtocol::TCP, 20),
        ));
    }
    black_box(ipv6::walk_extensions(IpProtocol::HOPOPT, data).ok());
    black_box(ipv6::walk_extensions(IpProtocol::IPV6_OPTS, data).ok());
    black_box(ipv6::walk_extensions(IpProtocol::IPV6_FRAG, data).ok());
    black_box(ipv6::walk_extensions(IpProtocol::AH, data).ok());
    if let Ok(t) = TcpSegment::new_checked(data) {
        black_box((
            t.src_port(),
            t.dst_port(),
            t.seq(),
            t.ack(),
            t.data_offset(),
            t.flags(),
            t.flags().to_string(),
            t.window(),
            t.checksum(),
            t.urgent(),
            t.options(),
            t.payload(),
            t.mss(),
        ));
        for o in t.option_iter() {
            black_box(o.ok());
        }
        black_box((
            t.verify_checksum_v4(&v4a, &v4b),
            t.verify_checksum_v6(&v6a, &v6b),
        ));
        assert!(t.header_len() + t.payload().len() == data.len());
    }
    if let Ok(u) = UdpDatagram::new_checked(data) {
        black_box((
            u.src_port(),
            u.dst_port(),
            u.len(),
            u.is_empty(),
            u.checksum(),
            u.payload(),
            u.datagram(),
            u.verify_checksum_v4(&v4a, &v4b),
            u.verify_checksum_v6(&v6a, &v6b),
        ));
        assert_eq!(u.payload().len() + 8, usize::from(u.len()));
    }
    if let Ok(i) = Icmpv4Packet::new_checked(data) {
        black_box((
            i.msg_type(),
            i.code(),
            i.checksum(),
            i.rest_of_header(),
            i.echo_ident(),
            i.echo_seq(),
            i.next_hop_mtu(),
            i.payload(),
            i.invoking_packet(),
            i.verify_checksum(),
        ));
    }
    if let Ok(i) = Icmpv6Packet::new_checked(data) {
        black_box((
            i.msg_type(),
            i.code(),
            i.checksum(),
            i.rest_of_header(),
            i.echo_ident(),
            i.echo_seq(),
            i.mtu(),
            i.pointer(),
            i.payload(),
            i.invoking_packet(),
            i.verify_checksum(&v6a, &v6b),
        ));
    }
    black_box((
        checksum::checksum(data),
        checksum::update_bytes(0x1234, data, data),
    ));

    exercise_setters(data);
}

/// Setters (including ones that make length fields inconsistent) followed
/// by getters, on a copy of `data`.
fn exercise_setters(data: &[u8]) {
    let mut buf = data.to_vec();
    let x = data.first().copied().unwrap_or(0);
    if let Ok(mut ip) = Ipv4Packet::new_checked(&mut buf[..]) {
        ip.fill_checksum();
        assert!(ip.verify_checksum());
        black_box(ip.decrement_ttl());
        assert!(ip.verify_checksum());
        ip.set_header_len(usize::from(x));
        ip.set_total_len(u16::from(x).wrapping_mul(300));
        black_box((
            ip.options(),
            ip.payload(),
            ip.header(),
            ip.verify_checksum(),
        ));
        black_box(ip.options_mut().len());
        black_box(ip.payload_mut().len());
    }
    let mut buf = data.to_vec();
    if let Ok(mut ip) = Ipv6Packet::new_checked(&mut buf[..]) {
        ip.set_payload_len(u16::from(x).wrapping_mul(300));
        black_box((ip.payload(), ip.upper_layer().ok()));
        black_box(ip.payload_mut().len());
    }
    let mut buf = data.to_vec();
    if let Ok(mut t) = TcpSegment::new_checked(&mut buf[..]) {
        t.fill_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::BROADCAST);
        assert!(t.verify_checksum_v4(&Ipv4Addr::LOCALHOST, &Ipv4Addr::BROADCAST));
        t.set_header_len(usize::from(x));
        black_box((t.options(), t.payload(), t.mss()));
        black_box(t.options_mut().len());
        black_box(t.payload_mut().len());
    }
    let mut buf = data.to_vec();
    if let Ok(mut u) = UdpDatagram::new_checked(&mut buf[..]) {
        u.fill_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST);
        assert!(u.verify_checksum_v6(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST));
        u.set_len(u16::from(x).wrapping_mul(300));
        black_box((u.payload(), u.datagram()));
        black_box(u.payload_mut().len());
    }
    let mut buf = data.to_vec();
    if let Ok(mut i) = Icmpv4Packet::new_checked(&mut buf[..]) {
        i.fill_checksum();
        assert!(i.verify_checksum());
    }
    let mut buf = data.to_vec();
    if let Ok(mut i) = Icmpv6Packet::new_checked(&mut buf[..]) {
        i.fill_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST);
        assert!(i.verify_checksum(&Ipv6Addr::LOCALHOST, &Ipv6Addr::LOCALHOST));
    }
}
