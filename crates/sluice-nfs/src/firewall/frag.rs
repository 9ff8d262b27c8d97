//! IP fragments as Linux's `nf_defrag_ipv4` / `nf_defrag_ipv6` see them:
//! reading a fragment's identity and geometry from its headers, and the
//! rules for adding it to a reassembly queue (`ip_frag_queue`,
//! `nf_ct_frag6_queue`, `inet_frag_queue_insert`). No packets here: the
//! queue's bookkeeping is kept apart from the buffers it holds
//! (`defrag.rs`) so the rules can be tested on their own.

use sluice_packet::Headers;

/// Largest IP datagram / IPv6 payload (`IPV6_MAXPLEN`): 65535 bytes.
pub const MAX_LEN: u32 = 65_535;

/// What a fragment says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragInfo {
    /// Queue identity: version, addresses, identification, protocol (IPv4).
    pub key: FragKey,
    /// Offset of its data in the datagram's fragmentable part (bytes).
    pub offset: u32,
    /// Offset just past its data.
    pub end: u32,
    /// More fragments follow (MF).
    pub more: bool,
    /// Frame offset of its data.
    pub data_at: usize,
    /// Frame offset of the fragment header (IPv6) or of the transport
    /// data (IPv4): the length of the part every fragment repeats.
    pub head_len: usize,
    /// Frame offset of the byte naming the fragment header (IPv6: the
    /// next-header field before it; IPv4: unused).
    pub nh_at: usize,
    /// The fragment header's next header (IPv6).
    pub next: u8,
    /// Frame offset of the IP header.
    pub l3: usize,
}

/// A reassembly queue's identity (Linux: addresses, identification,
/// protocol for IPv4, and the conntrack zone through the defrag user).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FragKey {
    /// 4 or 6.
    pub version: u8,
    /// Conntrack zone.
    pub zone: u16,
    /// Source address (IPv4 in the first 4 bytes).
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Identification (IPv4's is 16 bits).
    pub id: u32,
    /// IPv4 protocol (0 for IPv6).
    pub proto: u8,
}

/// Why a fragment cannot be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The headers do not hold together (truncated, past 65535 bytes).
    Malformed,
}

/// Reads fragment `f` parsed as `h` (`h.fragment` set) in `zone`.
pub fn read(f: &[u8], h: &Headers, zone: u16) -> Result<FragInfo, Refused> {
    let l3 = usize::from(h.l3_offset);
    let b = |i: usize| f.get(i).copied().ok_or(Refused::Malformed);
    let be16 = |i: usize| Ok::<u16, Refused>(u16::from_be_bytes([b(i)?, b(i + 1)?]));
    match h.ip_version {
        4 => {
            let ihl = usize::from(b(l3)? & 0x0f) * 4;
            let total = usize::from(be16(l3 + 2)?);
            let fo = be16(l3 + 6)?;
            let mut src = [0; 16];
            let mut dst = [0; 16];
            src[..4].copy_from_slice(f.get(l3 + 12..l3 + 16).ok_or(Refused::Malformed)?);
            dst[..4].copy_from_slice(f.get(l3 + 16..l3 + 20).ok_or(Refused::Malformed)?);
            let offset = u32::from(fo & 0x1fff) * 8;
            let len = total.checked_sub(ihl).ok_or(Refused::Malformed)?;
            if l3 + total > f.len() {
                return Err(Refused::Malformed);
            }
            Ok(FragInfo {
                key: FragKey {
                    version: 4,
                    zone,
                    src,
                    dst,
                    id: u32::from(be16(l3 + 4)?),
                    proto: b(l3 + 9)?,
                },
                offset,
                end: offset + len as u32,
                more: fo & 0x2000 != 0,
                data_at: l3 + ihl,
                head_len: l3 + ihl,
                nh_at: l3 + 9,
                next: b(l3 + 9)?,
                l3,
            })
        }
        6 => {
            let payload = usize::from(be16(l3 + 4)?);
            let stop = l3 + 40 + payload;
            if stop > f.len() {
                return Err(Refused::Malformed);
            }
            // Walk to the fragment header (hop-by-hop, routing,
            // destination options, AH before it).
            let (mut nh, mut nh_at, mut at) = (b(l3 + 6)?, l3 + 6, l3 + 40);
            for _ in 0..8 {
                match nh {
                    44 => {
                        let fo = be16(at + 2)?;
                        let offset = u32::from(fo & 0xfff8);
                        let data_at = at + 8;
                        let len = stop.checked_sub(data_at).ok_or(Refused::Malformed)?;
                        let id =
                            u32::from_be_bytes([b(at + 4)?, b(at + 5)?, b(at + 6)?, b(at + 7)?]);
                        let addr = |o: usize| -> Result<[u8; 16], Refused> {
                            f.get(o..o + 16)
                                .and_then(|s| s.try_into().ok())
                                .ok_or(Refused::Malformed)
                        };
                        return Ok(FragInfo {
                            key: FragKey {
                                version: 6,
                                zone,
                                src: addr(l3 + 8)?,
                                dst: addr(l3 + 24)?,
                                id,
                                proto: 0,
                            },
                            offset,
                            end: offset + len as u32,
                            more: fo & 1 != 0,
                            data_at,
                            head_len: at,
                            nh_at,
                            next: b(at)?,
                            l3,
                        });
                    }
                    0 | 43 | 60 => {
                        nh_at = at;
                        nh = b(at)?;
                        at += (usize::from(b(at + 1)?) + 1) * 8;
                    }
                    51 => {
                        nh_at = at;
                        nh = b(at)?;
                        at += (usize::from(b(at + 1)?) + 2) * 4;
                    }
                    _ => return Err(Refused::Malformed),
                }
            }
            Err(Refused::Malformed)
        }
        _ => Err(Refused::Malformed),
    }
}

/// One queued fragment's place (its buffer is held beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Data offset in the datagram.
    pub offset: u32,
    /// Data end (IPv4: rounded down to 8 for all but the last).
    pub end: u32,
    /// Starts a run of contiguous pieces (Linux `fragrun_create`); the
    /// run goes on through the following pieces that are not heads.
    pub head: bool,
}

/// What adding a fragment to a queue does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Add {
    /// Queued at this index of the (offset-ordered) pieces.
    At(usize, Piece),
    /// Wholly inside data already queued: this fragment is dropped, the
    /// queue kept (Linux `IPFRAG_DUP`).
    Duplicate,
    /// Overlaps queued data otherwise: the whole queue is dropped (RFC
    /// 5722 for IPv6; Linux does the same for IPv4 since 4.19).
    Overlap,
    /// Inconsistent with the queue (an end before data already seen, a
    /// second different last fragment, data past the last, empty, IPv6
    /// length not a multiple of 8, past 65535): this fragment is dropped,
    /// and with `kill` the queue too.
    Bad {
        /// Drop the queue as well.
        kill: bool,
    },
}

/// A queue's totals: the datagram length once the last fragment is in
/// (`len`, the highest end seen before that) and whether it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Highest end seen, or the datagram's length with `last`.
    pub len: u32,
    /// The last fragment (MF clear) is in.
    pub last: bool,
    /// Bytes of data queued (no overlaps, so this is the coverage).
    pub meat: u32,
}

/// Linux's checks and `inet_frag_queue_insert` for fragment `fr` on a
/// queue with `pieces` (offset order) and totals `t` (updated when it is
/// queued).
pub fn add(pieces: &[Piece], t: &mut Totals, fr: &FragInfo) -> Add {
    let v4 = fr.key.version == 4;
    let offset = fr.offset;
    let mut end = fr.end;
    if end > MAX_LEN {
        return Add::Bad { kill: false };
    }
    let mut new = *t;
    if !fr.more {
        if end < t.len || (t.last && end != t.len) {
            return Add::Bad { kill: v4 };
        }
        new.last = true;
        new.len = end;
    } else {
        if end & 7 != 0 {
            if !v4 {
                return Add::Bad { kill: true };
            }
            end &= !7;
        }
        if end > t.len {
            if t.last {
                return Add::Bad { kill: v4 };
            }
            new.len = end;
        }
    }
    if end == offset {
        return Add::Bad { kill: v4 };
    }
    let piece = |head| Piece { offset, end, head };
    let Some(last) = pieces.last() else {
        *t = Totals {
            meat: end - offset,
            ..new
        };
        return Add::At(0, piece(true));
    };
    let at = if last.end < end {
        // The common case: past the end of everything queued.
        if offset < last.end {
            return Add::Overlap;
        }
        let p = piece(offset != last.end);
        *t = Totals {
            meat: t.meat + (end - offset),
            ..new
        };
        return Add::At(pieces.len(), p);
    } else {
        // Against the runs: inside one is a duplicate, across any other
        // overlap is an overlap, clear of all goes in as a run of its own.
        let mut hits = 0;
        let mut inside = false;
        let mut i = 0;
        while i < pieces.len() {
            let start = pieces[i].offset;
            let mut j = i;
            while j + 1 < pieces.len() && !pieces[j + 1].head {
                j += 1;
            }
            let run_end = pieces[j].end;
            if start < end && offset < run_end {
                hits += 1;
                inside = offset >= start && end <= run_end;
            }
            i = j + 1;
        }
        match (hits, inside) {
            (0, _) => pieces.partition_point(|p| p.offset < offset),
            (1, true) => return Add::Duplicate,
            _ => return Add::Overlap,
        }
    };
    *t = Totals {
        meat: t.meat + (end - offset),
        ..new
    };
    Add::At(at, piece(true))
}

/// Whether a queue with totals `t` and first piece `first` is complete.
pub fn complete(t: &Totals, first: Option<&Piece>) -> bool {
    t.last && first.is_some_and(|p| p.offset == 0) && t.meat == t.len
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fr(v: u8, offset: u32, end: u32, more: bool) -> FragInfo {
        FragInfo {
            key: FragKey {
                version: v,
                zone: 0,
                src: [0; 16],
                dst: [0; 16],
                id: 1,
                proto: 17,
            },
            offset,
            end,
            more,
            data_at: 0,
            head_len: 0,
            nh_at: 0,
            next: 0,
            l3: 0,
        }
    }

    /// Adds fragments in order; the outcome of each.
    fn run(v: u8, frags: &[(u32, u32, bool)]) -> (Vec<Add>, Vec<Piece>, Totals) {
        let (mut pieces, mut t, mut out) = (Vec::new(), Totals::default(), Vec::new());
        for &(o, e, m) in frags {
            let a = add(&pieces, &mut t, &fr(v, o, e, m));
            if let Add::At(i, p) = a {
                pieces.insert(i, p);
            }
            out.push(a);
        }
        (out, pieces, t)
    }

    #[test]
    fn in_order_and_out_of_order_complete() {
        for order in [
            [(0, 600, true), (600, 1208, false)],
            [(600, 1208, false), (0, 600, true)],
        ] {
            let (_, pieces, t) = run(4, &order);
            assert!(complete(&t, pieces.first()));
            assert_eq!((t.len, t.meat), (1208, 1208));
        }
        let (_, pieces, t) = run(6, &[(0, 600, true)]);
        assert!(!complete(&t, pieces.first()));
    }

    /// Linux `inet_frag_queue_insert`: inside a run is a duplicate, any
    /// other overlap an overlap, for both versions (RFC 5722).
    #[test]
    fn duplicates_and_overlaps() {
        for v in [4, 6] {
            let (a, ..) = run(v, &[(0, 600, true), (0, 600, true)]);
            assert_eq!(a[1], Add::Duplicate);
            let (a, ..) = run(v, &[(0, 600, true), (8, 16, true)]);
            assert_eq!(a[1], Add::Duplicate);
            let (a, ..) = run(v, &[(0, 600, true), (592, 1208, false)]);
            assert_eq!(a[1], Add::Overlap);
            // Two runs (the middle one arrived last): spanning both is an
            // overlap although every byte is queued.
            let (a, ..) = run(
                v,
                &[(0, 8, true), (16, 24, true), (8, 16, true), (0, 16, true)],
            );
            assert_eq!(a[3], Add::Overlap);
            // Appended at the tail, a fragment extends the tail run.
            let (a, ..) = run(v, &[(0, 8, true), (8, 16, true), (0, 16, true)]);
            assert_eq!(a[2], Add::Duplicate);
        }
    }

    #[test]
    fn inconsistent_fragments() {
        // A second last fragment with another end: IPv4 drops the queue,
        // IPv6 only the fragment.
        let (a, ..) = run(4, &[(600, 1208, false), (0, 600, true), (600, 1200, false)]);
        assert_eq!(
            a[1],
            Add::At(
                0,
                Piece {
                    offset: 0,
                    end: 600,
                    head: true
                }
            )
        );
        let (a, ..) = run(4, &[(600, 1208, false), (1208, 1300, false)]);
        assert_eq!(a[1], Add::Bad { kill: true });
        let (a, ..) = run(6, &[(600, 1208, false), (1208, 1300, false)]);
        assert_eq!(a[1], Add::Bad { kill: false });
        // Non-last length not a multiple of 8: rounded down (IPv4),
        // fatal (IPv6).
        let (a, ..) = run(4, &[(0, 601, true)]);
        assert_eq!(
            a[0],
            Add::At(
                0,
                Piece {
                    offset: 0,
                    end: 600,
                    head: true
                }
            )
        );
        let (a, ..) = run(6, &[(0, 601, true)]);
        assert_eq!(a[0], Add::Bad { kill: true });
        // Empty, and past 65535.
        let (a, ..) = run(4, &[(8, 8, false)]);
        assert_eq!(a[0], Add::Bad { kill: true });
        let (a, ..) = run(6, &[(65_528, 65_540, false)]);
        assert_eq!(a[0], Add::Bad { kill: false });
    }
}
