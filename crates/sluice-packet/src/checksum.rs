//! RFC 1071 internet checksum, pseudo-header sums and RFC 1624 incremental
//! updates.
//!
//! # Partial sums
//!
//! A *partial sum* is a `u64` holding an unfolded one's-complement sum of
//! big-endian 16-bit words.  Partial sums of byte ranges that each start at
//! an even offset of the checksummed data can be combined with [`add`];
//! [`fold`] reduces a partial sum to 16 bits and [`finish`] complements it
//! into the value stored in a checksum field.
//!
//! [`sum`] is the fast path: it adds the data as 64-bit little-endian words
//! into two 128-bit accumulators (an `add`/`adc` pair per 8 bytes, no byte
//! swapping) and swaps the folded result once at the end; the one's
//! complement sum is byte-order independent (RFC 1071 §2(B)) and
//! `2^64 - 1` is a multiple of `2^16 - 1`, so this equals the word-by-word
//! definition.
//!
//! # Incremental update and the ±0 corner case
//!
//! [`update_u16`], [`update_u32`] and [`update_bytes`] implement RFC 1624
//! eqn. 3, `HC' = ~(~HC + ~m + m')`.  For a checksum that was correct
//! before the rewrite, the result is bit-for-bit what a full recomputation
//! gives, *including* a new checksum of `0x0000`, as long as the covered
//! data is not all zero after the rewrite (a full recomputation then gives
//! `0xFFFF`, eqn. 3 gives `0x0000`; both verify).  Real headers are never
//! all zero: IPv4 has its version nibble, and TCP/UDP/ICMPv6 checksums cover
//! a pseudo-header with a non-zero protocol number.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Partial one's-complement sum of `data` (see the module docs).
///
/// An odd trailing byte is padded with a zero low byte, as RFC 1071
/// specifies.  The result is already folded to at most 16 bits.
#[inline]
pub fn sum(data: &[u8]) -> u64 {
    // Two independent accumulators so the add/adc chains can overlap.
    let mut a: u128 = 0;
    let mut b: u128 = 0;
    let mut chunks = data.chunks_exact(16);
    for c in &mut chunks {
        let (x, y) = c.split_at(8);
        a += u128::from(le64(x));
        b += u128::from(le64(y));
    }
    let mut rest = chunks.remainder();
    if rest.len() >= 8 {
        let (x, r) = rest.split_at(8);
        a += u128::from(le64(x));
        rest = r;
    }
    // Remaining 0..=7 bytes without a variable-length copy: every read
    // starts at an even offset, so its bytes land in whole 16-bit lanes.
    let mut t: u64 = 0;
    if rest.len() >= 4 {
        let (x, r) = rest.split_at(4);
        t += u64::from(u32::from_le_bytes([x[0], x[1], x[2], x[3]]));
        rest = r;
    }
    if rest.len() >= 2 {
        let (x, r) = rest.split_at(2);
        t += u64::from(u16::from_le_bytes([x[0], x[1]]));
        rest = r;
    }
    if let Some(&x) = rest.first() {
        // Odd final byte: high byte of a zero-padded big-endian word, i.e.
        // the low byte of a little-endian lane.
        t += u64::from(x);
    }
    let acc = a + b + u128::from(t);
    // Fold 128 -> 64 bits with end-around carry.
    let lo = acc as u64;
    let hi = (acc >> 64) as u64;
    let (s, c) = lo.overflowing_add(hi);
    let s = s + u64::from(c);
    // Fold to 16 bits (still in little-endian lane order), then swap once.
    u64::from(fold(s).swap_bytes())
}

#[inline(always)]
fn le64(x: &[u8]) -> u64 {
    match x.first_chunk::<8>() {
        Some(w) => u64::from_le_bytes(*w),
        None => 0,
    }
}

/// One's-complement addition of two partial sums (end-around carry).
#[inline(always)]
pub const fn add(a: u64, b: u64) -> u64 {
    let (s, c) = a.overflowing_add(b);
    s + c as u64
}

/// Folds a partial sum to 16 bits (not complemented).
///
/// Returns 0 only for a zero partial sum.
#[inline(always)]
pub const fn fold(sum: u64) -> u16 {
    let s = (sum & 0xffff_ffff) + (sum >> 32); // <= 2^33
    let s = (s & 0xffff) + (s >> 16); // <= 2^17 + ...
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// Folds and complements a partial sum: the value for a checksum field.
#[inline(always)]
pub const fn finish(sum: u64) -> u16 {
    !fold(sum)
}

/// RFC 1071 internet checksum of `data` (checksum field assumed zeroed).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data))
}

/// Checksum of `data` preceded by a pseudo-header partial sum.
#[inline]
pub fn checksum_with(pseudo: u64, data: &[u8]) -> u16 {
    finish(add(pseudo, sum(data)))
}

/// True if `data`, *including* its stored checksum field, sums to `0xFFFF`
/// when combined with the partial sum `pseudo` (use 0 for none).
#[inline]
pub fn verify_with(pseudo: u64, data: &[u8]) -> bool {
    fold(add(pseudo, sum(data))) == 0xffff
}

#[inline(always)]
const fn u32_words(v: u32) -> u64 {
    (v >> 16) as u64 + (v & 0xffff) as u64
}

/// Partial sum of the IPv4 pseudo-header (RFC 793/768): source, destination,
/// zero byte + protocol, and upper-layer length.
#[inline]
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, protocol: u8, length: u16) -> u64 {
    u32_words(src.to_bits()) + u32_words(dst.to_bits()) + protocol as u64 + length as u64
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 §8.1): source,
/// destination, 32-bit upper-layer length, and next header.
#[inline]
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, length: u32) -> u64 {
    let a = src.to_bits();
    let b = dst.to_bits();
    let mut s = u32_words(length) + next_header as u64;
    let mut i = 0;
    while i < 4 {
        s += u32_words((a >> (32 * i)) as u32) + u32_words((b >> (32 * i)) as u32);
        i += 1;
    }
    s
}

/// Pseudo-header partial sum for either address family.
///
/// Returns `None` if `src` and `dst` are of different families, or for IPv4
/// if `length` does not fit the 16-bit pseudo-header length field.
#[inline]
pub fn pseudo_header(src: &IpAddr, dst: &IpAddr, protocol: u8, length: u32) -> Option<u64> {
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let len = u16::try_from(length).ok()?;
            Some(pseudo_header_v4(s, d, protocol, len))
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => Some(pseudo_header_v6(s, d, protocol, length)),
        _ => None,
    }
}

#[inline(always)]
const fn fold32(s: u32) -> u16 {
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// RFC 1624 eqn. 3: new checksum after a 16-bit word of the covered data
/// (at an even offset) changes from `old` to `new`.
#[inline]
pub const fn update_u16(csum: u16, old: u16, new: u16) -> u16 {
    let s = (!csum) as u32 + (!old) as u32 + new as u32;
    !fold32(s)
}

/// Incremental update for a 32-bit field at an even offset (e.g. an IPv4
/// address or a TCP sequence number), as two 16-bit words.
#[inline]
pub const fn update_u32(csum: u16, old: u32, new: u32) -> u16 {
    let s = (!csum) as u64
        + (!(old >> 16) & 0xffff) as u64
        + (!old & 0xffff) as u64
        + (new >> 16) as u64
        + (new & 0xffff) as u64;
    !fold(s)
}

/// Incremental update for a byte range at an even offset whose contents
/// change from `old` to `new` (e.g. an IPv6 address or MAC pair).
///
/// `old` and `new` should have the same, even length.  An odd final byte is
/// treated as the high byte of a zero-padded word; unequal lengths are
/// accepted and mean "these words were removed, those were added".
#[inline]
pub fn update_bytes(csum: u16, old: &[u8], new: &[u8]) -> u16 {
    let s = (!csum) as u64 + (!fold(sum(old))) as u64 + sum(new);
    finish(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Word-by-word reference implementation straight from RFC 1071.
    fn reference(data: &[u8]) -> u16 {
        let mut s: u32 = 0;
        for c in data.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], 0])
            };
            s += u32::from(w);
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // Classic example header (checksum field zeroed): 0xb861.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h), 0xb861);
        let mut h2 = h;
        h2[10] = 0xb8;
        h2[11] = 0x61;
        assert!(verify_with(0, &h2));
    }

    #[test]
    fn matches_reference_on_all_small_lengths() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        for len in 0..data.len() {
            assert_eq!(checksum(&data[..len]), reference(&data[..len]), "len {len}");
        }
        let ff = [0xffu8; 64];
        for len in 0..ff.len() {
            assert_eq!(checksum(&ff[..len]), reference(&ff[..len]), "ff len {len}");
        }
    }

    #[test]
    fn empty_and_zero() {
        assert_eq!(sum(&[]), 0);
        assert_eq!(checksum(&[]), 0xffff);
        assert_eq!(checksum(&[0; 10]), 0xffff);
    }

    #[test]
    fn fold_edges() {
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xffff), 0xffff);
        assert_eq!(fold(0x1_0000), 1);
        assert_eq!(fold(u64::MAX), 0xffff);
        assert_eq!(add(u64::MAX, 1), 1);
    }

    #[test]
    fn pseudo_headers_match_byte_layout() {
        let s4 = Ipv4Addr::new(10, 0, 0, 1);
        let d4 = Ipv4Addr::new(192, 168, 1, 200);
        let mut b = Vec::new();
        b.extend_from_slice(&s4.octets());
        b.extend_from_slice(&d4.octets());
        b.extend_from_slice(&[0, 17, 0x01, 0x2c]);
        assert_eq!(fold(pseudo_header_v4(&s4, &d4, 17, 300)), fold(sum(&b)));

        let s6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d6: Ipv6Addr = "fe80::dead:beef:1".parse().unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(&s6.octets());
        b.extend_from_slice(&d6.octets());
        b.extend_from_slice(&70000u32.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 6]);
        assert_eq!(fold(pseudo_header_v6(&s6, &d6, 6, 70000)), fold(sum(&b)));
    }

    #[test]
    fn pseudo_header_dispatch() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "::1".parse().unwrap();
        assert!(pseudo_header(&a, &b, 17, 8).is_some());
        assert!(pseudo_header(&a, &b, 17, 70000).is_none());
        assert!(pseudo_header(&a, &c, 17, 8).is_none());
        assert!(pseudo_header(&c, &c, 17, 70000).is_some());
    }

    #[test]
    fn rfc1624_corner_case() {
        // RFC 1624 §4 example: sum of other words 0xCD7A, field 0x5555 ->
        // 0x3285.  Full recompute gives 0x0000; eqn. 3 must agree.
        let mut data = [0xcd, 0x7a, 0x55, 0x55];
        let before = checksum(&data);
        assert_eq!(before, 0xdd2f);
        data[2] = 0x32;
        data[3] = 0x85;
        assert_eq!(checksum(&data), 0x0000);
        assert_eq!(update_u16(before, 0x5555, 0x3285), 0x0000);
    }

    #[test]
    fn update_u32_and_bytes_agree_with_u16() {
        let c = 0x1234;
        let a = update_u16(update_u16(c, 0x0a00, 0xc0a8), 0x0001, 0x0102);
        assert_eq!(update_u32(c, 0x0a00_0001, 0xc0a8_0102), a);
        assert_eq!(
            update_bytes(c, &[0x0a, 0x00, 0x00, 0x01], &[0xc0, 0xa8, 0x01, 0x02]),
            a
        );
    }
}
