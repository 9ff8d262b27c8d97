//! The IPv4 fast-path tuple `Firewall::process` keeps between its passes
//! over a batch, and the first pass's reading of it: one flat read of the
//! frame's bytes (tuple, TCP segment numbers, checksums), where building a
//! [`RawTuple`] with its [`L4`], packing it and then verifying the
//! checksums took ≈ 3 times the instructions, its values passed through
//! the stack several times over (bench: firewall/process_100k).

use super::super::csum;
use super::super::tcp_window::Seg;
use super::{v4_pair, Addrs, RawTuple, ACK, ETH, FIN_SYN_RST, L4};

/// An IPv4 [`RawTuple`] packed for keeping between passes over a batch
/// (32 bytes, where a `RawTuple` with its [`L4`] takes far more), or none
/// (protocol 0): `Firewall::process` reads a batch's tuples in one pass,
/// straight into its slots ([`V4Tuple::read_into`]), and applies them in
/// another. A TCP segment's numbers are kept without the SYN options a
/// fast-path segment never has (the [`Seg`] field by field: 8 bytes fewer
/// per packet than the `Seg` itself). IPv6 tuples borrow the frame and
/// are not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct V4Tuple {
    addrs: u64,
    ports: u32,
    /// The TCP segment's [`Seg`] fields (0 for UDP).
    seq: u32,
    ack: u32,
    sack: u32,
    end: u32,
    win: u16,
    flags: u8,
    /// 6 (TCP, an ACK-class segment) or 17 (UDP): a fast-path tuple has
    /// no other, so this also gives its class; 0: no tuple.
    proto: u8,
}

const _: () = assert!(std::mem::size_of::<V4Tuple>() == 32);

const TCP: u8 = 6;
const UDP: u8 = 17;

impl V4Tuple {
    /// No tuple.
    pub(crate) const NONE: V4Tuple = V4Tuple {
        addrs: 0,
        ports: 0,
        seq: 0,
        ack: 0,
        sack: 0,
        end: 0,
        win: 0,
        flags: 0,
        proto: 0,
    };

    /// The tuple, if there is one.
    #[inline(always)]
    pub(crate) fn get(&self) -> Option<&V4Tuple> {
        (self.proto != 0).then_some(self)
    }

    /// Reads [`V4Tuple::read`]'s tuple of `f` into `self` (none for a
    /// frame it does not take): every field straight into place, where
    /// returning an `Option` made the first pass carry and shuffle its
    /// fields through registers and the stack (≈ 40 instructions per
    /// packet; bench: firewall/process_100k).
    #[inline(always)]
    pub(crate) fn read_into(&mut self, f: &[u8], verify: bool) {
        self.proto = 0;
        if let Some(proto) = self.fill(f, verify) {
            self.proto = proto;
        }
    }

    /// `RawTuple::read_frame(f)?.to_v4()` read in one go, and `None` too
    /// for a frame whose IPv4 header or transport checksum is bad when
    /// `verify` (`csum::frame_ok`): the same tuple for the same frames
    /// (test: `read_is_read_frame_packed`).
    #[cfg(test)]
    pub(crate) fn read(f: &[u8], verify: bool) -> Option<V4Tuple> {
        let mut t = V4Tuple::NONE;
        t.read_into(f, verify);
        t.get().copied()
    }

    /// [`V4Tuple::read_into`] without the protocol, which it returns.
    #[inline(always)]
    fn fill(&mut self, f: &[u8], verify: bool) -> Option<u8> {
        // Ethernet, IPv4 header, 8 bytes of transport: the shortest
        // frame that can qualify (`RawTuple::read_frame`).
        let h: &[u8; ETH + 28] = f.first_chunk()?;
        let total = usize::from(u16::from_be_bytes([h[16], h[17]]));
        if h[12] != 0x08
            || h[13] != 0x00
            || h[14] != 0x45
            || (h[20] & 0x3f) | h[21] != 0
            || total > f.len() - ETH
        {
            return None;
        }
        let t = self;
        t.addrs = v4_pair([h[26], h[27], h[28], h[29]], [h[30], h[31], h[32], h[33]]);
        t.ports = u32::from_be_bytes([h[34], h[35], h[36], h[37]]).rotate_left(16);
        let proto = h[23];
        match proto {
            UDP => {
                let ulen = usize::from(u16::from_be_bytes([h[38], h[39]]));
                if ulen < 8 || ulen + 20 > total {
                    return None;
                }
                // A UDP tuple's segment fields are 0 (as `to_v4`'s).
                (t.seq, t.ack, t.sack, t.end, t.win, t.flags) = (0, 0, 0, 0, 0, 0);
            }
            TCP => {
                let s: &[u8; 20] = f.get(ETH + 20..)?.first_chunk()?;
                let thl = usize::from(s[12] >> 4) * 4;
                if thl < 20 || thl + 20 > total || s[13] & (FIN_SYN_RST | ACK) != ACK {
                    return None;
                }
                t.seq = u32::from_be_bytes([s[4], s[5], s[6], s[7]]);
                t.ack = u32::from_be_bytes([s[8], s[9], s[10], s[11]]);
                t.win = u16::from_be_bytes([s[14], s[15]]);
                t.flags = s[13];
                // No SYN or FIN: the data alone.
                t.end = t.seq.wrapping_add((total - 20 - thl) as u32);
                t.sack = t.ack;
                if thl > 20 {
                    // Options within the IP length (checked above).
                    t.sack = options_sack(f.get(ETH + 20..ETH + 20 + thl)?, t.ack);
                }
            }
            _ => return None,
        }
        // Verified in each arm's own copy of this (`proto` a constant
        // there): ≈ 10 instructions fewer than one copy for both.
        if verify {
            let ip: &[u8; ETH + 20] = f.first_chunk()?;
            let ok = match proto {
                TCP => csum::v4_sums_ok(ip, f.get(ETH + 20..ETH + total)?, TCP),
                _ => csum::v4_sums_ok(ip, f.get(ETH + 20..ETH + total)?, UDP),
            };
            if !ok {
                return None;
            }
        }
        Some(proto)
    }

    /// The TCP segment's numbers (`None` for UDP), as `unpack` gives them.
    #[inline(always)]
    pub(in crate::conntrack) fn tcp_seg(&self) -> Option<Seg> {
        (self.proto == TCP).then_some(Seg {
            seq: self.seq,
            ack: self.ack,
            sack: self.sack,
            end: self.end,
            win: self.win,
            flags: self.flags,
            opts: 0,
            wscale: 0,
        })
    }

    /// The tuple it packs (every fast-path TCP segment is of the ACK
    /// class, so its `Seg` has no SYN options; every other fast-path
    /// tuple is UDP).
    #[inline(always)]
    pub(in crate::conntrack) fn unpack(&self) -> RawTuple<'static> {
        RawTuple {
            addrs: Addrs::V4(self.addrs),
            ports: self.ports,
            proto: self.proto,
            l4: match self.tcp_seg() {
                Some(seg) => L4::Tcp {
                    flags: self.flags,
                    seg,
                },
                None => L4::Udp,
            },
        }
    }
}

/// The SACK edge `Seg::read` finds in TCP header `t` (options present):
/// the usual block of an established connection (NOP, NOP, timestamps)
/// has none and is answered inline; any other is walked out of line.
#[inline(always)]
fn options_sack(t: &[u8], ack: u32) -> u32 {
    if t.len() == 32 && t[20..24] == [1, 1, 8, 10] {
        return ack;
    }
    walk_sack(t, ack)
}

#[inline(never)]
fn walk_sack(t: &[u8], ack: u32) -> u32 {
    Seg::read(t, 0).map_or(ack, |s| s.sack)
}

#[cfg(test)]
impl RawTuple<'_> {
    /// The packed form of an IPv4 tuple; `None` for IPv6 (and protocol
    /// 0, which no fast-path tuple has): what [`V4Tuple::read`] must
    /// give.
    pub(super) fn to_v4(self) -> Option<V4Tuple> {
        use std::num::NonZeroU8;
        let s = match self.l4 {
            L4::Tcp { seg, .. } => seg,
            _ => Seg::default(),
        };
        match self.addrs {
            Addrs::V4(addrs) => Some(V4Tuple {
                addrs,
                ports: self.ports,
                seq: s.seq,
                ack: s.ack,
                sack: s.sack,
                end: s.end,
                win: s.win,
                flags: s.flags,
                proto: NonZeroU8::new(self.proto)?.get(),
            }),
            Addrs::V6(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::mutated;
    use super::*;
    use proptest::prelude::*;
    use sluice_packet::{write_frame, FrameSpec, L4Spec, MacAddr, TcpFlags};
    use std::net::IpAddr;

    /// IPv4 TCP segments with data and options (timestamps, SACK,
    /// others), UDP datagrams, with random bytes changed, truncated or
    /// padded, half of them with their checksums fixed after the change.
    fn segments() -> impl Strategy<Value = Vec<u8>> {
        let opts: [&[u8]; 5] = [
            &[],
            &[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
            &[1, 1, 5, 10, 0, 0, 0, 9, 0, 0, 0x30, 0x39],
            &[1, 1, 4, 2],
            &[2, 4, 5, 0xb4, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2],
        ];
        (
            0..5usize,
            0..40usize,
            any::<bool>(),
            prop::collection::vec((14..90usize, any::<u8>()), 0..3),
            prop::option::of(0..120usize),
            0..10usize,
            any::<bool>(),
        )
            .prop_map(move |(o, data, udp, muts, cut, pad, fix)| {
                let l4 = if udp {
                    L4Spec::Udp {
                        src_port: 1000,
                        dst_port: 53,
                    }
                } else {
                    L4Spec::Tcp {
                        src_port: 1000,
                        dst_port: 80,
                        seq: 0x1234_5678,
                        ack: 0x0000_3000,
                        flags: TcpFlags::ACK | TcpFlags::PSH,
                        window: 512,
                    }
                };
                let spec = FrameSpec {
                    src_mac: MacAddr::new(2, 0, 0, 0, 0, 1),
                    dst_mac: MacAddr::new(2, 0, 0, 0, 0, 2),
                    vlan: None,
                    src_ip: "10.0.0.1".parse::<IpAddr>().unwrap(),
                    dst_ip: "10.0.0.2".parse::<IpAddr>().unwrap(),
                    ttl: 64,
                    l4,
                };
                let payload: Vec<u8> = (0..data).map(|i| i as u8).collect();
                let mut f = vec![0u8; spec.header_len() + payload.len()];
                let n = write_frame(&mut f, &spec, &payload).unwrap();
                f.truncate(n);
                if !udp {
                    let ob = opts[o];
                    f.splice(54..54, ob.iter().copied());
                    f[46] = (((20 + ob.len()) / 4) << 4) as u8;
                    let total = (f.len() - 14) as u16;
                    f[16..18].copy_from_slice(&total.to_be_bytes());
                }
                for (at, b) in muts {
                    if let Some(x) = f.get_mut(at) {
                        *x = b;
                    }
                }
                if fix {
                    fix_checksums(&mut f);
                }
                if let Some(n) = cut {
                    f.truncate(n);
                }
                f.resize(f.len() + pad, 0);
                f
            })
    }

    /// Recomputes the IPv4 header and TCP/UDP checksums where the lengths
    /// allow.
    fn fix_checksums(f: &mut [u8]) {
        use sluice_packet::checksum::{checksum, checksum_with, pseudo_header_v4};
        if f.len() < 34 {
            return;
        }
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
        let Some(l4) = f.get(34..14 + total.max(20)) else {
            return;
        };
        let at = match f[23] {
            6 if l4.len() >= 20 => 34 + 16,
            17 if l4.len() >= 8 => 34 + 6,
            _ => return,
        };
        let src = std::net::Ipv4Addr::new(f[26], f[27], f[28], f[29]);
        let dst = std::net::Ipv4Addr::new(f[30], f[31], f[32], f[33]);
        let len = if f[23] == 17 {
            usize::from(u16::from_be_bytes([f[38], f[39]])).min(l4.len())
        } else {
            l4.len()
        };
        f[at..at + 2].copy_from_slice(&[0, 0]);
        let pseudo = pseudo_header_v4(&src, &dst, f[23], len as u16);
        let c = checksum_with(pseudo, &f[34..34 + len]);
        f[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }

    fn packed(f: &[u8], verify: bool) -> Option<V4Tuple> {
        let t = RawTuple::read_frame(f)?.to_v4()?;
        (!verify || csum::frame_ok(f)).then_some(t)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]

        /// The one-go read is the general read packed (and the checksum
        /// verification), frame for frame.
        #[test]
        fn read_is_read_frame_packed(f in segments(), verify in any::<bool>()) {
            prop_assert_eq!(V4Tuple::read(&f, verify), packed(&f, verify));
        }

        /// The same over the general read's own test frames (both
        /// families: an IPv6 frame is never read).
        #[test]
        fn read_is_read_frame_packed_for_mutated_frames(f in mutated(), verify in any::<bool>()) {
            prop_assert_eq!(V4Tuple::read(&f, verify), packed(&f, verify));
        }
    }

    /// The generator makes frames the reads take, with and without good
    /// checksums, with every option block.
    #[test]
    fn segments_cover_the_fast_path() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::TestRunner;
        let mut runner = TestRunner::deterministic();
        let (mut taken, mut verified, mut sacked) = (0, 0, 0);
        for _ in 0..5_000 {
            let f = segments().new_tree(&mut runner).unwrap().current();
            if let Some(t) = V4Tuple::read(&f, false) {
                taken += 1;
                verified += usize::from(V4Tuple::read(&f, true).is_some());
                sacked += usize::from(t.sack != t.ack);
            }
        }
        assert!(
            taken > 1_000 && verified > 500 && sacked > 50,
            "{taken} {verified} {sacked}"
        );
    }
}
