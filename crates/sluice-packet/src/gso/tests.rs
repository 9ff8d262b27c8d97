//! Properties of segmentation and checksum completion over generated
//! super-packets, and the refusals of bad offload state.

use proptest::prelude::*;

use super::*;
use crate::{parse, verify_checksums, write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};

fn super_packet(
    v6: bool,
    vlan: Option<u16>,
    payload: &[u8],
    seq: u32,
    flags: u8,
    id: u16,
) -> Vec<u8> {
    let (src, dst) = if v6 {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    } else {
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
    };
    let spec = FrameSpec {
        src_mac: "02:00:00:00:00:01".parse().unwrap(),
        dst_mac: MacAddr::BROADCAST,
        vlan,
        src_ip: src,
        dst_ip: dst,
        ttl: 64,
        l4: L4Spec::Tcp {
            src_port: 40000,
            dst_port: 5201,
            seq,
            ack: 77,
            flags: TcpFlags::from_bits(flags),
            window: 512,
        },
    };
    let mut buf = vec![0u8; payload.len() + 200];
    let n = write_frame(&mut buf, &spec, payload).unwrap();
    buf.truncate(n);
    if !v6 {
        let l3 = if vlan.is_some() { 18 } else { 14 };
        buf[l3 + 4..l3 + 6].copy_from_slice(&id.to_be_bytes());
        buf[l3 + 10..l3 + 12].fill(0);
        let c = crate::checksum::checksum(&buf[l3..l3 + 20]);
        buf[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    buf
}

fn gso(v6: bool, mss: u16) -> Offload {
    Offload {
        gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
        flags: F_NEEDS_CSUM,
        gso_size: mss,
        ..Offload::NONE
    }
}

/// All segments of `frame`, written one by one.
fn cut(frame: &[u8], o: &Offload) -> Result<Vec<Vec<u8>>, GsoError> {
    let s = segment(frame, o)?;
    (0..s.count())
        .map(|k| {
            let mut out = vec![0u8; s.len_of(k)];
            let n = s.write(frame, k, &mut out)?;
            assert_eq!(n, out.len());
            Ok(out)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The segments' payloads put together are the super-packet's payload;
    /// every segment has valid checksums, consecutive IPv4 ids, advancing
    /// sequence numbers, FIN/PSH only at the end, CWR only at the start,
    /// and otherwise the super-packet's headers.
    #[test]
    fn segments_reassemble_to_the_super_packet(
        v6 in any::<bool>(),
        tagged in any::<bool>(),
        len in 0usize..20_000,
        mss_pick in 1u16..=1460,
        seq in any::<u32>(),
        flags in any::<u8>(),
        id in any::<u16>(),
        fill in any::<u8>(),
    ) {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ fill).collect();
        let flags = flags & !0x07 | 0x10; // no SYN/RST/FIN noise beyond ACK…
        let flags = flags | (fill & 0x01); // …and FIN sometimes
        let frame = super_packet(v6, tagged.then_some(7), &payload, seq, flags, id);
        let mss = mss_pick.max(len.div_ceil(MAX_SEGMENTS) as u16);
        let segs = cut(&frame, &gso(v6, mss)).unwrap();
        let h0 = parse(&frame).unwrap();
        let hdr = usize::from(h0.payload_offset);
        prop_assert_eq!(segs.len(), len.div_ceil(usize::from(mss)).max(1));
        let mut joined = Vec::new();
        for (k, s) in segs.iter().enumerate() {
            let h = parse(s).unwrap();
            verify_checksums(s, &h).unwrap();
            prop_assert_eq!(usize::from(h.payload_offset), hdr);
            prop_assert!(usize::from(h.payload_len) <= usize::from(mss));
            joined.extend_from_slice(&s[hdr..]);
            let l3 = usize::from(h.l3_offset);
            let l4 = usize::from(h.l4_offset);
            if !v6 {
                let got = u16::from_be_bytes([s[l3 + 4], s[l3 + 5]]);
                prop_assert_eq!(got, id.wrapping_add(k as u16));
            }
            let got_seq = u32::from_be_bytes([s[l4 + 4], s[l4 + 5], s[l4 + 6], s[l4 + 7]]);
            prop_assert_eq!(got_seq, seq.wrapping_add((k * usize::from(mss)) as u32));
            let mut want = flags;
            if k + 1 < segs.len() { want &= !0x09; }
            if k > 0 { want &= !0x80; }
            prop_assert_eq!(s[l4 + 13], want);
            // Everything else in the headers is the super-packet's.
            let mut a = s[..hdr].to_vec();
            let mut b = frame[..hdr].to_vec();
            for r in [l4 + 4..l4 + 8, l4 + 13..l4 + 14, l4 + 16..l4 + 18] {
                a[r.clone()].fill(0);
                b[r].fill(0);
            }
            // IPv6 payload length; IPv4 total length, id and checksum.
            let ip_fields = if v6 { [l3 + 4..l3 + 6, l3 + 4..l3 + 6] } else { [l3 + 2..l3 + 6, l3 + 10..l3 + 12] };
            for r in ip_fields {
                a[r.clone()].fill(0);
                b[r].fill(0);
            }
            prop_assert_eq!(a, b);
        }
        prop_assert_eq!(joined, payload);
    }

    /// Completing a partial checksum gives what a full computation gives.
    #[test]
    fn completed_checksums_equal_full_ones(
        v6 in any::<bool>(), len in 0usize..3000, seed in any::<u8>()
    ) {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed).collect();
        let full = super_packet(v6, None, &payload, 1, 0x18, 9);
        let h = parse(&full).unwrap();
        let l4 = usize::from(h.l4_offset);
        // What a stack with checksum offload hands out: the folded
        // pseudo-header sum, not complemented, in the field.
        let mut partial = full.clone();
        partial[l4 + 16..l4 + 18].fill(0);
        let body = crate::checksum::sum(&partial[l4..]);
        let field = u16::from_be_bytes([full[l4 + 16], full[l4 + 17]]);
        // ~field = fold(pseudo + body), so pseudo = ~field - body.
        let pseudo = crate::checksum::fold(crate::checksum::add(u64::from(!field), u64::from(!crate::checksum::fold(body))));
        partial[l4 + 16..l4 + 18].copy_from_slice(&pseudo.to_be_bytes());
        let o = Offload { flags: F_NEEDS_CSUM, csum_start: l4 as u16, csum_offset: 16, ..Offload::NONE };
        complete_checksum(&mut partial, &o).unwrap();
        verify_checksums(&partial, &h).unwrap();
    }

    /// Any bytes and any offload state: errors, never panics.
    #[test]
    fn garbage_never_panics(
        frame in proptest::collection::vec(any::<u8>(), 0..300),
        hdr in any::<[u8; VNET_HDR_LEN]>(),
        raw in any::<(u8, u8, u16, u16, u16)>(),
    ) {
        let _ = Offload::from_vnet(&hdr, frame.len());
        let o = Offload { gso_type: raw.0, flags: raw.1, gso_size: raw.2, csum_start: raw.3, csum_offset: raw.4 };
        let mut f = frame.clone();
        let _ = complete_checksum(&mut f, &o);
        if let Ok(s) = segment(&frame, &o) {
            let mut out = vec![0u8; 400];
            for k in 0..s.count() + 1 {
                let _ = s.write(&frame, k, &mut out);
            }
        }
    }
}

#[test]
fn bad_offload_state_is_named() {
    let frame = super_packet(false, None, &[1; 3000], 1, 0x10, 1);
    let mut o = gso(false, 0);
    assert_eq!(segment(&frame, &o), Err(GsoError::GsoSizeZero));
    o.gso_size = 1;
    assert_eq!(segment(&frame, &o), Err(GsoError::TooManySegments));
    o.gso_type = GSO_TCPV6;
    o.gso_size = 1000;
    assert_eq!(segment(&frame, &o), Err(GsoError::BadHeaders));
    o.gso_type = GSO_UDP_L4;
    assert_eq!(segment(&frame, &o), Err(GsoError::Unsupported));
    let o = Offload {
        flags: F_NEEDS_CSUM,
        csum_start: 3050,
        csum_offset: 16,
        ..Offload::NONE
    };
    assert_eq!(
        complete_checksum(&mut frame.clone(), &o),
        Err(GsoError::BadChecksumOffset)
    );
    let s = segment(&frame, &gso(false, 1000)).unwrap();
    assert_eq!(s.write(&frame, 0, &mut [0u8; 100]), Err(GsoError::NoRoom));
    let mut hdr = [0u8; VNET_HDR_LEN];
    hdr[0] = 0x40;
    assert_eq!(Offload::from_vnet(&hdr, 100), Err(GsoError::BadVnetHeader));
    hdr[0] = 0;
    hdr[1] = 9;
    assert_eq!(Offload::from_vnet(&hdr, 100), Err(GsoError::BadVnetHeader));
}

#[test]
fn error_indices_match_all() {
    for (i, e) in GsoError::ALL.iter().enumerate() {
        assert_eq!(e.index(), i, "{e}");
    }
}

#[test]
fn vnet_headers_round_trip() {
    let o = Offload {
        gso_type: GSO_TCPV4 | GSO_ECN,
        flags: F_NEEDS_CSUM,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    };
    assert_eq!(Offload::from_vnet(&o.vnet(), 60_000), Ok(o));
    assert_eq!(o.shifted(4).csum_start, 38);
    // A plain frame's stray fields are dropped on receive.
    let mut h = [0u8; VNET_HDR_LEN];
    h[4] = 0x10;
    h[6] = 0x22;
    assert_eq!(Offload::from_vnet(&h, 60), Ok(Offload::NONE));
}
