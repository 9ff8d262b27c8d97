//! Golden frames generated with scapy 2.x (checksums and layouts computed by
//! scapy, independently of this crate) and checked in as hex.  The
//! generator script is reproduced at the bottom of this file.

mod common;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use common::hex;
use sluice_packet::arp::{ArpOp, ArpPacket};
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::ethernet::{EtherType, EthernetFrame, MacAddr};
use sluice_packet::flow::{flow_key, FlowKey};
use sluice_packet::icmpv4::{Icmpv4Packet, Icmpv4Type};
use sluice_packet::icmpv6::{Icmpv6Packet, Icmpv6Type};
use sluice_packet::ipv4::Ipv4Packet;
use sluice_packet::ipv6::Ipv6Packet;
use sluice_packet::parse::{parse, verify_checksums, Headers};
use sluice_packet::tcp::{TcpFlags, TcpOption, TcpSegment};
use sluice_packet::udp::UdpDatagram;
use sluice_packet::{IpProtocol, ParseError};

const B_IPV4_UDP: &str = "02000000000202000000000108004500002700004000401126c40a0000010a00000204d20050001354d568656c6c6f20776f726c64";
const B_IPV4_TCP: &str = "020000000002020000000001080045000038000040003f06c8f9c0a8010aac1005049c4001bb01020304a0b0c0d0501801f665e60000474554202f20485454502f312e310d0a";
const B_IPV6_UDP_VLAN: &str = "0200000000020200000000018100006486dd60000000000d11ff20010db800000000000000000000000120010db800000000000000000000000214e90035000d893d0001020304";
const B_ICMP_ECHO: &str = "02000000000202000000000108004500002100004000010162d70a0101010a0202020800b5e54242000770696e6721";
const B_ICMPV6_ECHO_REPLY: &str = "02000000000202000000000186dd60000000000c3a40fe800000000000000000000000000001fe8000000000000000000000000000028100a2ca0009000a706f6e67";
const QINQ_IPV4_UDP: &str = "02000000000202000000000188a8a12c8100602a08004500002212340000401154950a0000010a00000203e807d0000eb5ea616263646566";
const ARP_REQUEST: &str = "ffffffffffff02000000000108060001080006040001020000000001c0a80164000000000000c0a80101000000000000000000000000000000000000";
const IPV4_OPTIONS_UDP: &str = "02000000000202000000000108004700002700010000401153b80a0000010a000002070704010203040000070009000bf94b78797a";
const IPV4_UDP_PADDED: &str = "02000000000202000000000108004500001e00010000401166cc0a0000010a00000200070009000a8a656162eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee";
const IPV4_FRAG_LATER: &str = "02000000000202000000000108004500002c006300b9401165a30a0000010a000002111111111111111111111111111111111111111111111111";
const IPV4_FRAG_FIRST: &str = "02000000000202000000000108004500002c006320004011465c0a0000010a0000020001000205e4123422222222222222222222222222222222";
const IPV6_EXT_TCP: &str = "02000000000202000000000186dd628abcde002c004020010db800000000000000000000000a20010db800000000000000000000000b3c0001040000000006000104000000000016c350000000010000000070022000453e0000020405a001030307";
const IPV6_FRAG_FIRST_UDP: &str = "02000000000202000000000186dd6000000000202c4020010db800000000000000000000000a20010db800000000000000000000000b11000001000012340001000207d0555533333333333333333333333333333333";
const IPV6_FRAG_LATER: &str = "02000000000202000000000186dd6000000000182c4020010db800000000000000000000000a20010db800000000000000000000000b110005c80000123444444444444444444444444444444444";
const ICMP_FRAG_NEEDED: &str = "02000000000202000000000108004500003800010000400165c60a0000fe0a00000103041a7000000578450005dc00014000401117fe0a0000010a0909090fa0003505c8c776";
const ICMPV6_TOO_BIG: &str = "02000000000202000000000186dd6000000000383a4020010db80000000000000000000000fe20010db80000000000000000000000010200257d00000500600000000578114020010db800000000000000000000000120010db80000000000000000000000990fa0003505788e8d";
const IPV4_SCTP: &str =
    "02000000000202000000000108004500002000010000408466570a0000010a000002960c960c00000000fc7b3987";
const IPV4_GRE: &str =
    "02000000000202000000000108004500001800010000402f66b40a0000010a00000200000800";
const IPV4_UDP_ZERO_CSUM: &str =
    "02000000000202000000000108004500001e00010000401166cc0a0000010a00000200010002000a00007a7a";

const M1: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const M2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn spec(src: &str, dst: &str, ttl: u8, vlan: Option<u16>, l4: L4Spec) -> FrameSpec {
    FrameSpec {
        src_mac: M1,
        dst_mac: M2,
        vlan,
        src_ip: ip(src),
        dst_ip: ip(dst),
        ttl,
        l4,
    }
}

fn build(s: &FrameSpec, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let n = write_frame(&mut buf, s, payload).unwrap();
    buf.truncate(n);
    buf
}

fn parsed(name: &str, h: &str) -> (Vec<u8>, Headers) {
    let f = hex(h);
    let hd = parse(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
    (f, hd)
}

// ---------------------------------------------------------------------------
// Builder output is byte-identical to scapy's.

#[test]
fn builder_matches_scapy_ipv4_udp() {
    let s = spec(
        "10.0.0.1",
        "10.0.0.2",
        64,
        None,
        L4Spec::Udp {
            src_port: 1234,
            dst_port: 80,
        },
    );
    assert_eq!(build(&s, b"hello world"), hex(B_IPV4_UDP));
}

#[test]
fn builder_matches_scapy_ipv4_tcp() {
    let s = spec(
        "192.168.1.10",
        "172.16.5.4",
        63,
        None,
        L4Spec::Tcp {
            src_port: 40000,
            dst_port: 443,
            seq: 0x0102_0304,
            ack: 0xa0b0_c0d0,
            flags: TcpFlags::PSH | TcpFlags::ACK,
            window: 502,
        },
    );
    assert_eq!(build(&s, b"GET / HTTP/1.1\r\n"), hex(B_IPV4_TCP));
}

#[test]
fn builder_matches_scapy_ipv6_udp_vlan() {
    let s = spec(
        "2001:db8::1",
        "2001:db8::2",
        255,
        Some(100),
        L4Spec::Udp {
            src_port: 5353,
            dst_port: 53,
        },
    );
    assert_eq!(build(&s, &[0, 1, 2, 3, 4]), hex(B_IPV6_UDP_VLAN));
}

#[test]
fn builder_matches_scapy_icmp_echo() {
    let s = spec(
        "10.1.1.1",
        "10.2.2.2",
        1,
        None,
        L4Spec::IcmpEcho {
            id: 0x4242,
            seq: 7,
            reply: false,
        },
    );
    assert_eq!(build(&s, b"ping!"), hex(B_ICMP_ECHO));
}

#[test]
fn builder_matches_scapy_icmpv6_echo_reply() {
    let s = spec(
        "fe80::1",
        "fe80::2",
        64,
        None,
        L4Spec::IcmpEcho {
            id: 9,
            seq: 10,
            reply: true,
        },
    );
    assert_eq!(build(&s, b"pong"), hex(B_ICMPV6_ECHO_REPLY));
}

// ---------------------------------------------------------------------------
// parse / flow_key / views on scapy frames.

#[test]
fn ipv4_udp() {
    let (f, h) = parsed("ipv4_udp", B_IPV4_UDP);
    assert_eq!(
        h,
        Headers {
            l2_len: 14,
            vlan_count: 0,
            vlan_ids: [0, 0],
            ethertype: EtherType::IPV4,
            l3_offset: 14,
            ip_version: 4,
            l4_offset: 34,
            l4_protocol: IpProtocol::UDP,
            fragment: false,
            payload_offset: 42,
            payload_len: 11,
        }
    );
    verify_checksums(&f, &h).unwrap();
    assert_eq!(&f[42..], b"hello world");
    let k = flow_key(&f).unwrap();
    assert_eq!(k.to_string(), "udp 10.0.0.1:1234 -> 10.0.0.2:80");
    let eth = EthernetFrame::new_checked(&f[..]).unwrap();
    assert_eq!(eth.src_addr(), M1);
    assert_eq!(eth.dst_addr(), M2);
    let ip4 = Ipv4Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip4.checksum(), 0x26c4);
    let u = UdpDatagram::new_checked(ip4.payload()).unwrap();
    assert_eq!(u.checksum(), 0x54d5);
    assert!(u.verify_checksum_v4(&ip4.src_addr(), &ip4.dst_addr()));
}

#[test]
fn ipv4_tcp() {
    let (f, h) = parsed("ipv4_tcp", B_IPV4_TCP);
    assert_eq!((h.l4_offset, h.payload_offset, h.payload_len), (34, 54, 16));
    assert_eq!(h.l4_protocol, IpProtocol::TCP);
    verify_checksums(&f, &h).unwrap();
    let t = TcpSegment::new_checked(&f[34..]).unwrap();
    assert_eq!(t.flags(), TcpFlags::PSH | TcpFlags::ACK);
    assert_eq!(
        (t.seq(), t.ack(), t.window()),
        (0x0102_0304, 0xa0b0_c0d0, 502)
    );
    assert_eq!(
        flow_key(&f).unwrap().to_string(),
        "tcp 192.168.1.10:40000 -> 172.16.5.4:443"
    );
}

#[test]
fn ipv6_udp_vlan() {
    let (f, h) = parsed("ipv6_udp_vlan", B_IPV6_UDP_VLAN);
    assert_eq!(h.vlan_count, 1);
    assert_eq!(h.vlan_id(), Some(100));
    assert_eq!(h.l2_len, 18);
    assert_eq!(h.ethertype, EtherType::IPV6);
    assert_eq!((h.l4_offset, h.payload_offset, h.payload_len), (58, 66, 5));
    verify_checksums(&f, &h).unwrap();
    assert_eq!(
        flow_key(&f).unwrap().to_string(),
        "udp [2001:db8::1]:5353 -> [2001:db8::2]:53"
    );
}

#[test]
fn icmp_echo_flow_uses_id() {
    let (f, h) = parsed("icmp", B_ICMP_ECHO);
    verify_checksums(&f, &h).unwrap();
    let k = flow_key(&f).unwrap();
    assert_eq!((k.src_port, k.dst_port, k.proto), (0x4242, 0x4242, 1));
    assert_eq!(k.to_string(), "icmp 10.1.1.1 -> 10.2.2.2 id 16962");
    let i = Icmpv4Packet::new_checked(&f[34..]).unwrap();
    assert_eq!(i.msg_type(), Icmpv4Type::ECHO_REQUEST);
    assert_eq!((i.echo_ident(), i.echo_seq()), (0x4242, 7));

    let (f6, h6) = parsed("icmpv6", B_ICMPV6_ECHO_REPLY);
    verify_checksums(&f6, &h6).unwrap();
    let k6 = flow_key(&f6).unwrap();
    assert_eq!((k6.src_port, k6.dst_port, k6.proto), (9, 9, 58));
    let i = Icmpv6Packet::new_checked(&f6[54..]).unwrap();
    assert_eq!(i.msg_type(), Icmpv6Type::ECHO_REPLY);
    assert!(i.verify_checksum(&"fe80::1".parse().unwrap(), &"fe80::2".parse().unwrap()));
}

#[test]
fn qinq() {
    let (f, h) = parsed("qinq", QINQ_IPV4_UDP);
    assert_eq!(h.vlan_count, 2);
    assert_eq!(h.vlan_ids, [300, 42]);
    assert_eq!((h.l2_len, h.l3_offset, h.l4_offset), (22, 22, 42));
    assert_eq!((h.payload_offset, h.payload_len), (50, 6));
    verify_checksums(&f, &h).unwrap();
    // Three tags is too many.
    let mut g = f[..12].to_vec();
    g.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
    g.extend_from_slice(&f[12..]);
    assert_eq!(parse(&g), Err(ParseError::TooManyVlanTags));
    assert_eq!(parse(&f[..20]), Err(ParseError::VlanTruncated));
}

#[test]
fn arp() {
    let (f, h) = parsed("arp", ARP_REQUEST);
    assert_eq!(f.len(), 60);
    assert_eq!(h.ethertype, EtherType::ARP);
    assert_eq!(h.ip_version, 0);
    assert_eq!((h.l4_offset, h.payload_offset, h.payload_len), (14, 14, 28));
    assert_eq!(flow_key(&f), Err(ParseError::UnsupportedEtherType));
    verify_checksums(&f, &h).unwrap();
    let a = ArpPacket::new_checked(&f[14..]).unwrap();
    assert_eq!(a.operation(), ArpOp::REQUEST);
    assert_eq!(a.sender_hw_addr(), M1);
    assert_eq!(a.sender_proto_addr(), Ipv4Addr::new(192, 168, 1, 100));
    assert_eq!(a.target_proto_addr(), Ipv4Addr::new(192, 168, 1, 1));
    assert_eq!(parse(&f[..14 + 27]), Err(ParseError::ArpTruncated));
}

#[test]
fn ipv4_options() {
    let (f, h) = parsed("ipv4_options", IPV4_OPTIONS_UDP);
    assert_eq!(h.l4_offset, 14 + 28);
    assert_eq!(h.payload_len, 3);
    verify_checksums(&f, &h).unwrap();
    let ip4 = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip4.ihl(), 7);
    assert_eq!(ip4.options(), &[0x07, 0x07, 0x04, 1, 2, 3, 4, 0]);
}

#[test]
fn padding_excluded() {
    let (f, h) = parsed("padded", IPV4_UDP_PADDED);
    assert_eq!(f.len(), 60);
    assert_eq!((h.payload_offset, h.payload_len), (42, 2));
    verify_checksums(&f, &h).unwrap();
    let ip4 = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip4.payload().len(), 10);
}

#[test]
fn ipv4_fragments() {
    let (f, h) = parsed("frag_later", IPV4_FRAG_LATER);
    assert!(h.fragment);
    assert_eq!(h.l4_protocol, IpProtocol::UDP);
    assert_eq!((h.l4_offset, h.payload_offset, h.payload_len), (34, 34, 24));
    verify_checksums(&f, &h).unwrap();
    let ip4 = Ipv4Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip4.frag_offset(), 185 * 8);
    let k = flow_key(&f).unwrap();
    assert_eq!((k.src_port, k.dst_port), (0, 0));

    // The first fragment has a UDP header whose length covers the whole
    // datagram: it is not parsed, and maps to the same flow.
    let (f1, h1) = parsed("frag_first", IPV4_FRAG_FIRST);
    assert!(h1.fragment);
    assert_eq!(h1.payload_offset, h1.l4_offset);
    verify_checksums(&f1, &h1).unwrap();
    assert_eq!(flow_key(&f1).unwrap(), k);
}

#[test]
fn ipv6_extension_headers() {
    let (f, h) = parsed("ipv6_ext", IPV6_EXT_TCP);
    assert_eq!(h.l4_protocol, IpProtocol::TCP);
    assert_eq!(h.l4_offset, 14 + 40 + 8 + 8);
    assert_eq!(h.payload_len, 0);
    assert_eq!(h.l3_header_len(), 56);
    assert_eq!(h.l4_header_len(), 28);
    verify_checksums(&f, &h).unwrap();
    let ip6 = Ipv6Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(ip6.flow_label(), 0xabcde);
    assert_eq!(ip6.traffic_class(), 0x28);
    assert_eq!(ip6.next_header(), IpProtocol::HOPOPT);
    let ul = ip6.upper_layer().unwrap();
    assert_eq!(
        (ul.protocol, ul.offset, ul.ext_headers),
        (IpProtocol::TCP, 16, 2)
    );
    let t = TcpSegment::new_checked(ip6.upper_layer_payload().unwrap()).unwrap();
    assert_eq!(t.flags(), TcpFlags::SYN);
    let opts: Vec<_> = t.option_iter().map(Result::unwrap).collect();
    assert_eq!(
        &opts[..3],
        &[
            TcpOption::Mss(1440),
            TcpOption::Nop,
            TcpOption::WindowScale(7)
        ]
    );
    assert_eq!(
        flow_key(&f).unwrap().to_string(),
        "tcp [2001:db8::a]:22 -> [2001:db8::b]:50000"
    );
}

#[test]
fn ipv6_fragments() {
    let (f, h) = parsed("frag6_first", IPV6_FRAG_FIRST_UDP);
    assert!(h.fragment);
    assert_eq!(h.l4_protocol, IpProtocol::UDP);
    assert_eq!(h.l4_offset, 14 + 48);
    verify_checksums(&f, &h).unwrap();
    let k = flow_key(&f).unwrap();
    assert_eq!((k.src_port, k.dst_port), (0, 0));
    let (f2, h2) = parsed("frag6_later", IPV6_FRAG_LATER);
    assert!(h2.fragment);
    assert_eq!((h2.l4_offset, h2.payload_len), (62, 16));
    let ul = Ipv6Packet::new_checked(&f2[14..])
        .unwrap()
        .upper_layer()
        .unwrap();
    assert!(ul.is_non_first_fragment());
    assert_eq!(ul.fragment.unwrap().offset, 185 * 8);
    assert_eq!(ul.fragment.unwrap().ident, 0x1234);
    assert_eq!(flow_key(&f2).unwrap(), k);
}

#[test]
fn icmp_errors_embed_original() {
    let (f, h) = parsed("frag_needed", ICMP_FRAG_NEEDED);
    verify_checksums(&f, &h).unwrap();
    let i = Icmpv4Packet::new_checked(&f[34..]).unwrap();
    assert_eq!(i.msg_type(), Icmpv4Type::DEST_UNREACHABLE);
    assert_eq!(i.next_hop_mtu(), Some(1400));
    let inner = Ipv4Packet::new_embedded(i.invoking_packet().unwrap()).unwrap();
    assert_eq!(inner.total_len(), 1500);
    assert!(inner.verify_checksum());
    assert_eq!(inner.dst_addr(), Ipv4Addr::new(10, 9, 9, 9));
    assert_eq!(&inner.payload()[..4], &[0x0f, 0xa0, 0x00, 0x35]);
    let k = flow_key(&f).unwrap();
    assert_eq!((k.src_port, k.dst_port), (0, 0));

    let (f6, h6) = parsed("too_big", ICMPV6_TOO_BIG);
    verify_checksums(&f6, &h6).unwrap();
    let i = Icmpv6Packet::new_checked(&f6[54..]).unwrap();
    assert_eq!(i.mtu(), Some(1280));
    let inner = Ipv6Packet::new_embedded(i.invoking_packet().unwrap()).unwrap();
    assert_eq!(
        inner.dst_addr(),
        "2001:db8::99".parse::<Ipv6Addr>().unwrap()
    );
    assert_eq!(inner.payload_len(), 1400);
    assert_eq!(inner.upper_layer().unwrap().protocol, IpProtocol::UDP);
}

#[test]
fn sctp_gre_zero_csum() {
    let (f, h) = parsed("sctp", IPV4_SCTP);
    assert_eq!(h.l4_protocol, IpProtocol::SCTP);
    assert_eq!((h.payload_offset, h.payload_len), (46, 0));
    assert_eq!(
        flow_key(&f).unwrap().to_string(),
        "sctp 10.0.0.1:38412 -> 10.0.0.2:38412"
    );
    assert_eq!(parse(&f[..45]), Err(ParseError::Ipv4Truncated));

    let (f, h) = parsed("gre", IPV4_GRE);
    assert_eq!(h.l4_protocol, IpProtocol::GRE);
    assert_eq!((h.l4_offset, h.payload_offset, h.payload_len), (34, 34, 4));
    assert_eq!(
        flow_key(&f).unwrap().to_string(),
        "gre 10.0.0.1 -> 10.0.0.2"
    );

    let (f, h) = parsed("zero", IPV4_UDP_ZERO_CSUM);
    verify_checksums(&f, &h).unwrap();
}

#[test]
fn checksum_errors_are_reported() {
    let cases = [
        (B_IPV4_UDP, 14 + 11, ParseError::Ipv4BadChecksum),
        (B_IPV4_UDP, 14 + 20 + 6, ParseError::UdpBadChecksum),
        (B_IPV4_TCP, 14 + 20 + 16, ParseError::TcpBadChecksum),
        (B_ICMP_ECHO, 14 + 20 + 3, ParseError::Icmpv4BadChecksum),
        (
            B_ICMPV6_ECHO_REPLY,
            14 + 40 + 3,
            ParseError::Icmpv6BadChecksum,
        ),
        (B_IPV6_UDP_VLAN, 18 + 40 + 7, ParseError::UdpBadChecksum),
    ];
    for (frame, byte, want) in cases {
        let mut f = hex(frame);
        f[byte] ^= 0x01;
        let h = parse(&f).unwrap();
        assert_eq!(verify_checksums(&f, &h), Err(want), "{want:?}");
    }
    // Zero UDP checksum is invalid over IPv6.
    let mut f = hex(B_IPV6_UDP_VLAN);
    f[18 + 40 + 6] = 0;
    f[18 + 40 + 7] = 0;
    let h = parse(&f).unwrap();
    assert_eq!(verify_checksums(&f, &h), Err(ParseError::UdpBadChecksum));
}

#[test]
fn structural_errors() {
    let f = hex(B_IPV4_TCP);
    assert_eq!(parse(&f[..13]), Err(ParseError::EthernetTruncated));
    assert_eq!(parse(&f[..33]), Err(ParseError::Ipv4Truncated));
    let mut g = f.clone();
    g[14] = 0x55;
    assert_eq!(parse(&g), Err(ParseError::Ipv4BadVersion));
    g[14] = 0x43;
    assert_eq!(parse(&g), Err(ParseError::Ipv4BadHeaderLength));
    let mut g = f.clone();
    g[17] = 10;
    assert_eq!(parse(&g), Err(ParseError::Ipv4BadTotalLength));
    let mut g = f.clone();
    g[17] = 20 + 19; // IP payload shorter than the TCP header
    assert_eq!(parse(&g), Err(ParseError::TcpTruncated));
    let mut g = f.clone();
    g[14 + 20 + 12] = 0x40;
    assert_eq!(parse(&g), Err(ParseError::TcpBadDataOffset));
    let u = hex(B_IPV4_UDP);
    let mut g = u.clone();
    g[14 + 20 + 5] = 200;
    assert_eq!(parse(&g), Err(ParseError::UdpBadLength));
    let mut g = u.clone();
    g[17] = 20 + 7;
    assert_eq!(parse(&g), Err(ParseError::UdpTruncated));
    let i = hex(B_ICMP_ECHO);
    let mut g = i.clone();
    g[17] = 20 + 7;
    assert_eq!(parse(&g), Err(ParseError::Icmpv4Truncated));
    let v6 = hex(B_ICMPV6_ECHO_REPLY);
    assert_eq!(parse(&v6[..14 + 39]), Err(ParseError::Ipv6Truncated));
    let mut g = v6.clone();
    g[14] = 0x40;
    assert_eq!(parse(&g), Err(ParseError::Ipv6BadVersion));
    let mut g = v6.clone();
    g[14 + 5] = 7; // payload_len 7 < ICMPv6 header
    assert_eq!(parse(&g), Err(ParseError::Icmpv6Truncated));
    let mut g = v6.clone();
    g[14 + 6] = 60; // claims a dst-opts header
    g[14 + 40 + 1] = 200;
    assert_eq!(parse(&g), Err(ParseError::Ipv6ExtensionChain));
    // Unknown EtherType parses, but has no flow key.
    let mut g = f.clone();
    g[12] = 0x88;
    g[13] = 0xcc;
    let h = parse(&g).unwrap();
    assert_eq!((h.ip_version, h.payload_len), (0, (g.len() - 14) as u16));
    assert_eq!(flow_key(&g), Err(ParseError::UnsupportedEtherType));
}

#[test]
fn reversed_frames_share_canonical_key() {
    let fwd = flow_key(&hex(B_IPV4_TCP)).unwrap();
    let s = spec(
        "172.16.5.4",
        "192.168.1.10",
        64,
        None,
        L4Spec::Tcp {
            src_port: 443,
            dst_port: 40000,
            seq: 5,
            ack: 6,
            flags: TcpFlags::ACK,
            window: 1,
        },
    );
    let rev = flow_key(&build(&s, b"")).unwrap();
    assert_eq!(rev, fwd.reversed());
    assert_eq!(rev.canonical(), fwd.canonical());
    assert_eq!(rev.symmetric_hash(), fwd.symmetric_hash());
    assert_eq!(
        FlowKey::new(
            ip("192.168.1.10"),
            ip("172.16.5.4"),
            40000,
            443,
            IpProtocol::TCP
        ),
        fwd
    );
}

/* Generator (python3 + scapy), for reference:
from scapy.all import *
from scapy.layers.inet6 import *
from scapy.layers.sctp import SCTP
import sys
conf.verb = 0
M1="02:00:00:00:00:01"; M2="02:00:00:00:00:02"
frames = {}
# builder-equivalent frames (id=0, DF, no options)
frames["b_ipv4_udp"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2",id=0,flags="DF",ttl=64)/UDP(sport=1234,dport=80)/Raw(b"hello world")
frames["b_ipv4_tcp"] = Ether(src=M1,dst=M2)/IP(src="192.168.1.10",dst="172.16.5.4",id=0,flags="DF",ttl=63)/TCP(sport=40000,dport=443,seq=0x01020304,ack=0xa0b0c0d0,flags="PA",window=502,options=[])/Raw(b"GET / HTTP/1.1\r\n")
frames["b_ipv6_udp_vlan"] = Ether(src=M1,dst=M2)/Dot1Q(vlan=100)/IPv6(src="2001:db8::1",dst="2001:db8::2",hlim=255)/UDP(sport=5353,dport=53)/Raw(b"\x00\x01\x02\x03\x04")
frames["b_icmp_echo"] = Ether(src=M1,dst=M2)/IP(src="10.1.1.1",dst="10.2.2.2",id=0,flags="DF",ttl=1)/ICMP(type=8,id=0x4242,seq=7)/Raw(b"ping!")
frames["b_icmpv6_echo_reply"] = Ether(src=M1,dst=M2)/IPv6(src="fe80::1",dst="fe80::2",hlim=64)/ICMPv6EchoReply(id=9,seq=10,data=b"pong")
# parser golden frames
frames["qinq_ipv4_udp"] = Ether(src=M1,dst=M2,type=0x88a8)/Dot1AD(vlan=300,prio=5)/Dot1Q(vlan=42,prio=3)/IP(src="10.0.0.1",dst="10.0.0.2",id=0x1234)/UDP(sport=1000,dport=2000)/Raw(b"abcdef")
frames["arp_request"] = Ether(src=M1,dst="ff:ff:ff:ff:ff:ff")/ARP(op=1,hwsrc=M1,psrc="192.168.1.100",pdst="192.168.1.1")/Padding(load=b"\x00"*18)
frames["ipv4_options_udp"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2",options=[IPOption_RR(routers=["1.2.3.4"])])/UDP(sport=7,dport=9)/Raw(b"xyz")
frames["ipv4_udp_padded"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2")/UDP(sport=7,dport=9)/Raw(b"ab")/Padding(load=b"\xee"*16)
frames["ipv4_frag_later"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2",proto=17,frag=185,flags=0,id=99)/Raw(b"\x11"*24)
frames["ipv4_frag_first"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2",flags="MF",id=99)/UDP(sport=1,dport=2,len=1508,chksum=0x1234)/Raw(b"\x22"*16)
frames["ipv6_ext_tcp"] = Ether(src=M1,dst=M2)/IPv6(src="2001:db8::a",dst="2001:db8::b",fl=0xabcde,tc=0x28)/IPv6ExtHdrHopByHop()/IPv6ExtHdrDestOpt()/TCP(sport=22,dport=50000,flags="S",seq=1,options=[("MSS",1440),("NOP",None),("WScale",7)])
frames["ipv6_frag_first_udp"] = Ether(src=M1,dst=M2)/IPv6(src="2001:db8::a",dst="2001:db8::b")/IPv6ExtHdrFragment(offset=0,m=1,id=0x1234)/UDP(sport=1,dport=2,len=2000,chksum=0x5555)/Raw(b"\x33"*16)
frames["ipv6_frag_later"] = Ether(src=M1,dst=M2)/IPv6(src="2001:db8::a",dst="2001:db8::b")/IPv6ExtHdrFragment(offset=185,m=0,id=0x1234,nh=17)/Raw(b"\x44"*16)
frames["icmp_frag_needed"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.254",dst="10.0.0.1")/ICMP(type=3,code=4,nexthopmtu=1400)/IPerror(src="10.0.0.1",dst="10.9.9.9",len=1500,flags="DF")/UDPerror(sport=4000,dport=53,len=1480)
frames["icmpv6_too_big"] = Ether(src=M1,dst=M2)/IPv6(src="2001:db8::fe",dst="2001:db8::1")/ICMPv6PacketTooBig(mtu=1280)/IPerror6(src="2001:db8::1",dst="2001:db8::99",plen=1400)/UDPerror(sport=4000,dport=53,len=1400)
frames["ipv4_sctp"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2")/SCTP(sport=38412,dport=38412)
frames["ipv4_gre"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2",proto=47)/Raw(b"\x00\x00\x08\x00")
frames["ipv4_udp_zero_csum"] = Ether(src=M1,dst=M2)/IP(src="10.0.0.1",dst="10.0.0.2")/UDP(sport=1,dport=2,chksum=0)/Raw(b"zz")
for name, f in frames.items():
    b = bytes(f)
    print(f'pub const {name.upper()}: &str = "{b.hex()}";')
*/
