//! RFC 1624 incremental updates agree with a full recomputation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_packet::checksum;

fuzz_target!(|data: &[u8]| {
    // Layout: [offset selector, 4 new bytes, packet...]; the packet's first
    // word is forced non-zero (see the checksum module docs on the all-zero
    // corner case).
    let Some((head, pkt)) = data.split_first_chunk::<5>() else {
        return;
    };
    let mut pkt = pkt.to_vec();
    if pkt.len() % 2 == 1 {
        pkt.pop();
    }
    if pkt.len() < 6 {
        return;
    }
    if pkt[0] == 0 && pkt[1] == 0 {
        pkt[1] = 1;
    }
    let words = pkt.len() / 2;
    let off = 2 + 2 * (usize::from(head[0]) % (words - 2));
    let before = checksum::checksum(&pkt);

    let old16 = u16::from_be_bytes([pkt[off], pkt[off + 1]]);
    let new16 = u16::from_be_bytes([head[1], head[2]]);
    let mut p2 = pkt.clone();
    p2[off..off + 2].copy_from_slice(&new16.to_be_bytes());
    assert_eq!(
        checksum::update_u16(before, old16, new16),
        checksum::checksum(&p2)
    );

    let old32 = u32::from_be_bytes([pkt[off], pkt[off + 1], pkt[off + 2], pkt[off + 3]]);
    let new32 = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let mut p3 = pkt.clone();
    p3[off..off + 4].copy_from_slice(&new32.to_be_bytes());
    assert_eq!(
        checksum::update_u32(before, old32, new32),
        checksum::checksum(&p3)
    );
    assert_eq!(
        checksum::update_bytes(before, &pkt[off..off + 4], &p3[off..off + 4]),
        checksum::checksum(&p3)
    );
});
