//! pcapng blocks (draft-ietf-opsawg-pcapng): a section header, one
//! Ethernet interface with nanosecond timestamps, and an enhanced packet
//! block per captured packet. Little-endian, every block padded to 4.

use sluice_dataplane::worker::tap::Captured;

fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let padded = body.len().div_ceil(4) * 4;
    let total = (12 + padded) as u32;
    let mut b = Vec::with_capacity(total as usize);
    b.extend(kind.to_le_bytes());
    b.extend(total.to_le_bytes());
    b.extend(body);
    b.resize(8 + padded, 0);
    b.extend(total.to_le_bytes());
    b
}

/// The Section Header Block.
pub fn section_header() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(0x1A2B_3C4Du32.to_le_bytes());
    body.extend(1u16.to_le_bytes());
    body.extend(0u16.to_le_bytes());
    body.extend((-1i64).to_le_bytes()); // section length unknown
    block(0x0A0D_0D0A, &body)
}

/// The Interface Description Block: Ethernet, `snaplen`, timestamps in ns.
pub fn interface(snaplen: u32) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(1u16.to_le_bytes()); // LINKTYPE_ETHERNET
    body.extend(0u16.to_le_bytes());
    body.extend(snaplen.to_le_bytes());
    // if_tsresol = 9: timestamps count nanoseconds.
    body.extend(9u16.to_le_bytes());
    body.extend(1u16.to_le_bytes());
    body.extend([9u8, 0, 0, 0]);
    body.extend([0u8; 4]); // opt_endofopt
    block(1, &body)
}

/// An Enhanced Packet Block.
pub fn packet(p: &Captured) -> Vec<u8> {
    let mut body = Vec::with_capacity(20 + p.data.len());
    body.extend(0u32.to_le_bytes());
    body.extend(((p.time_ns >> 32) as u32).to_le_bytes());
    body.extend((p.time_ns as u32).to_le_bytes());
    body.extend((p.data.len() as u32).to_le_bytes());
    body.extend(p.len.to_le_bytes());
    body.extend(&p.data);
    block(6, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_padded_and_framed_by_their_length() {
        let p = packet(&Captured {
            time_ns: 0x0000_0001_0000_0002,
            len: 61,
            data: vec![0xab; 61],
        });
        assert_eq!(p.len() % 4, 0);
        let total = u32::from_le_bytes(p[4..8].try_into().unwrap()) as usize;
        assert_eq!(total, p.len());
        assert_eq!(&p[p.len() - 4..], &p[4..8]);
        assert_eq!(
            u32::from_le_bytes(p[12..16].try_into().unwrap()),
            1,
            "ts high"
        );
        assert_eq!(
            u32::from_le_bytes(p[16..20].try_into().unwrap()),
            2,
            "ts low"
        );
        let shb = section_header();
        assert_eq!(&shb[8..12], &0x1A2B_3C4Du32.to_le_bytes());
        assert_eq!(interface(128).len() % 4, 0);
    }
}
