//! Packet buffers: layout, owned handles and the typed view of one buffer.
//!
//! Every buffer is `BUF_STRIDE` bytes in the arena:
//!
//! ```text
//! | metadata 64 B | headroom 128 B | data room 2048 B |
//! ```
//!
//! The metadata is plain bytes read and written at fixed offsets with
//! `from_ne_bytes`/`to_ne_bytes` on a fixed-size array, so it compiles to
//! single loads and stores with no bounds checks and no `unsafe`. Because an
//! untrusted NF may have written any metadata, every accessor that turns
//! metadata into a range clamps it: a bad `data_off`/`len` yields a short or
//! empty packet, never an out-of-bounds access; the platform additionally
//! checks [`Pkt::meta_is_sane`] when it takes a buffer back from an NF.

/// Bytes of per-packet metadata at the start of every buffer.
pub const META_SIZE: usize = 64;
/// Bytes of headroom before the default packet start (room to push headers).
pub const HEADROOM: usize = 128;
/// Bytes of packet data room after the headroom.
pub const DATA_ROOM: usize = 2048;
/// Distance between consecutive buffers in the arena (a multiple of 64).
pub const BUF_STRIDE: usize = META_SIZE + HEADROOM + DATA_ROOM;
/// Default offset of the first packet byte within its buffer.
pub const DATA_START: usize = META_SIZE + HEADROOM;

const OFF_DATA_OFF: usize = 0;
const OFF_LEN: usize = 2;
const OFF_PORT_IN: usize = 4;
const OFF_CHAIN: usize = 6;
const OFF_HOP: usize = 8;
const OFF_VISITS: usize = 10;
const OFF_VERDICT: usize = 12;
const OFF_FLOW_ID: usize = 16;
const OFF_FLOW_HASH: usize = 20;
const OFF_TIMESTAMP: usize = 24;
/// Offset and size of the scratch area NFs may use to annotate a packet for
/// later NFs in the chain (Click's "annotations").
const OFF_SCRATCH: usize = 32;
/// Bytes of NF scratch space in the metadata.
pub const SCRATCH_SIZE: usize = META_SIZE - OFF_SCRATCH;

/// Exclusive ownership of one packet buffer.
///
/// Not `Clone`/`Copy`: holding a `PktHandle` is what entitles code to a
/// mutable view of the buffer. Handles are created only by the buffer pool,
/// by the platform after it validated a handle returned by an NF, and by the
/// NF-side ring endpoint (which trusts the platform as the sole issuer).
#[derive(Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct PktHandle(u32);

impl PktHandle {
    /// Wraps a raw index; callers must guarantee the index is owned by no one else.
    pub(crate) fn from_raw_owned(raw: u32) -> Self {
        PktHandle(raw)
    }

    /// Views an owned slot of a [`HandleBatch`](crate::HandleBatch) as a handle.
    pub(crate) fn from_slot(slot: &mut u32) -> &mut PktHandle {
        // SAFETY: PktHandle is #[repr(transparent)] over u32, so the layouts
        // are identical, and the returned borrow inherits the slot's borrow.
        unsafe { &mut *(slot as *mut u32).cast::<PktHandle>() }
    }

    /// The buffer index.
    pub fn index(&self) -> u32 {
        self.0
    }

    /// Gives up ownership, returning the raw index (to put into a ring).
    pub fn into_raw(self) -> u32 {
        self.0
    }
}

/// Mutable view of one owned buffer: metadata accessors plus the packet bytes.
pub struct Pkt<'a> {
    b: &'a mut [u8; BUF_STRIDE],
}

macro_rules! meta_field {
    ($get:ident, $set:ident, $ty:ty, $off:expr, $doc:literal) => {
        #[doc = concat!("Metadata: ", $doc)]
        #[inline]
        pub fn $get(&self) -> $ty {
            const N: usize = std::mem::size_of::<$ty>();
            let mut raw = [0u8; N];
            raw.copy_from_slice(&self.b[$off..$off + N]);
            <$ty>::from_ne_bytes(raw)
        }
        #[doc = concat!("Sets metadata: ", $doc)]
        #[inline]
        pub fn $set(&mut self, v: $ty) {
            const N: usize = std::mem::size_of::<$ty>();
            self.b[$off..$off + N].copy_from_slice(&v.to_ne_bytes());
        }
    };
}

impl<'a> Pkt<'a> {
    /// Views a whole buffer.
    pub fn new(b: &'a mut [u8; BUF_STRIDE]) -> Self {
        Pkt { b }
    }

    meta_field!(
        data_off,
        set_data_off,
        u16,
        OFF_DATA_OFF,
        "offset of the first packet byte in the buffer."
    );
    meta_field!(len, set_len_raw, u16, OFF_LEN, "packet length in bytes.");
    meta_field!(
        port_in,
        set_port_in,
        u16,
        OFF_PORT_IN,
        "index of the ingress port."
    );
    meta_field!(
        chain,
        set_chain,
        u16,
        OFF_CHAIN,
        "index of the chain the packet travels."
    );
    meta_field!(
        hop,
        set_hop,
        u16,
        OFF_HOP,
        "position in the chain (index of the NF being visited)."
    );
    meta_field!(
        visits,
        set_visits,
        u16,
        OFF_VISITS,
        "NF visits so far (loop guard)."
    );
    meta_field!(
        verdict_raw,
        set_verdict_raw,
        u32,
        OFF_VERDICT,
        "encoded verdict of the last NF."
    );
    meta_field!(
        flow_id,
        set_flow_id,
        u32,
        OFF_FLOW_ID,
        "flow-table slot of the packet's flow."
    );
    meta_field!(
        flow_hash,
        set_flow_hash,
        u32,
        OFF_FLOW_HASH,
        "symmetric hash of the 5-tuple."
    );
    meta_field!(
        timestamp_ns,
        set_timestamp_ns,
        u64,
        OFF_TIMESTAMP,
        "ingress time, CLOCK_MONOTONIC ns."
    );

    /// Whether the packet has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resets the metadata for a fresh packet of `len` bytes at the default offset.
    #[inline]
    pub fn reset(&mut self, len: usize) {
        self.b[..META_SIZE].fill(0);
        self.set_data_off(DATA_START as u16);
        self.set_len_raw(len.min(DATA_ROOM) as u16);
    }

    /// The byte range of the packet, clamped into the buffer.
    ///
    /// Sane metadata (the only kind the platform and the SDK write) is
    /// checked with two compares and used as it is; anything else takes
    /// the clamp, which gives the same range for sane metadata. Every NF
    /// reads its packets through this (`Packet::data`), so the common case
    /// is kept short: 7–9 instructions with the loads, where the clamp
    /// took ≈ 12 (callgrind; bench: sluice-nfs firewall/process_100k).
    #[inline]
    fn range(&self) -> std::ops::Range<usize> {
        let (start, end) = self.raw_range();
        if start >= META_SIZE && end <= BUF_STRIDE {
            start..end
        } else {
            Self::clamped(start, end - start)
        }
    }

    /// The packet's start and end as the metadata gives them (unchecked:
    /// [`Pkt::range`] checks them).
    #[inline(always)]
    fn raw_range(&self) -> (usize, usize) {
        let start = self.data_off() as usize;
        (start, start + self.len() as usize)
    }

    /// The clamp of [`Pkt::range`]: the start into
    /// `META_SIZE..=BUF_STRIDE`, the end to the buffer's end.
    #[cold]
    #[inline(never)]
    fn clamped(data_off: usize, len: usize) -> std::ops::Range<usize> {
        let start = data_off.clamp(META_SIZE, BUF_STRIDE);
        let end = (start + len).min(BUF_STRIDE);
        start..end
    }

    /// Whether the metadata describes a range inside the buffer (false only
    /// if an NF wrote garbage).
    pub fn meta_is_sane(&self) -> bool {
        let start = self.data_off() as usize;
        start >= META_SIZE && start + self.len() as usize <= BUF_STRIDE
    }

    /// The packet bytes: `&b[range()]`, written out so that the common
    /// case (sane metadata) slices with no check beyond `range`'s two.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let (start, end) = self.raw_range();
        if start >= META_SIZE && end <= BUF_STRIDE {
            // Within the buffer, so this slice needs no further check.
            return &self.b[start..end];
        }
        &self.b[Self::clamped(start, end - start)]
    }

    /// The packet bytes, mutable (as [`Pkt::data`]).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (start, end) = self.raw_range();
        if start >= META_SIZE && end <= BUF_STRIDE {
            return &mut self.b[start..end];
        }
        &mut self.b[Self::clamped(start, end - start)]
    }

    /// The whole room after the packet start (to write a new packet), and
    /// sets the length afterwards with [`set_len`](Self::set_len).
    pub fn room_mut(&mut self) -> &mut [u8] {
        let start = self.range().start;
        &mut self.b[start..]
    }

    /// Sets the packet length, clamped to the room after the packet start;
    /// returns the length actually set.
    pub fn set_len(&mut self, len: usize) -> usize {
        let room = BUF_STRIDE - self.range().start;
        let len = len.min(room);
        self.set_len_raw(len as u16);
        len
    }

    /// Grows the packet at the front by `n` bytes (into the headroom) and
    /// returns the new front bytes, or `None` if the headroom is too small.
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        let r = self.range();
        if r.start < META_SIZE + n {
            return None;
        }
        let start = r.start - n;
        self.set_data_off(start as u16);
        self.set_len_raw((r.end - start) as u16);
        Some(&mut self.b[start..start + n])
    }

    /// Removes `n` bytes from the front of the packet (e.g. a decapsulated
    /// header); `None` if the packet is shorter than `n`.
    pub fn pull_front(&mut self, n: usize) -> Option<()> {
        let r = self.range();
        if r.len() < n {
            return None;
        }
        self.set_data_off((r.start + n) as u16);
        self.set_len_raw((r.len() - n) as u16);
        Some(())
    }

    /// NF scratch space carried with the packet along the chain.
    pub fn scratch(&mut self) -> &mut [u8; SCRATCH_SIZE] {
        let s = &mut self.b[OFF_SCRATCH..META_SIZE];
        s.try_into().expect("scratch is SCRATCH_SIZE bytes")
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_layout_is_cache_aligned() {
        assert_eq!(BUF_STRIDE % 64, 0);
        let mut raw = Box::new([0u8; BUF_STRIDE]);
        let mut p = Pkt::new(&mut raw);
        p.reset(60);
        p.set_flow_id(7);
        p.set_timestamp_ns(u64::MAX - 3);
        p.set_verdict_raw(0xdead_beef);
        assert_eq!(p.len(), 60);
        assert_eq!(p.data_off() as usize, DATA_START);
        assert_eq!(p.flow_id(), 7);
        assert_eq!(p.timestamp_ns(), u64::MAX - 3);
        assert_eq!(p.verdict_raw(), 0xdead_beef);
        assert_eq!(p.data().len(), 60);
    }

    #[test]
    fn push_and_pull_front_move_the_start() {
        let mut raw = Box::new([0u8; BUF_STRIDE]);
        let mut p = Pkt::new(&mut raw);
        p.reset(10);
        p.data_mut().copy_from_slice(&[1; 10]);
        p.push_front(4).unwrap().copy_from_slice(&[9; 4]);
        assert_eq!(p.data(), &[9, 9, 9, 9, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
        p.pull_front(4).unwrap();
        assert_eq!(p.data(), &[1; 10]);
        assert!(p.push_front(HEADROOM + 1).is_none());
        assert!(p.pull_front(11).is_none());
    }

    /// The sane-metadata shortcut of `range`, `data` and `data_mut` gives
    /// exactly the clamp of every offset and length (the clamp as it was
    /// before the shortcut).
    #[test]
    fn range_is_the_clamp_for_any_metadata() {
        let mut raw = Box::new([0u8; BUF_STRIDE]);
        let at = raw.as_ptr() as usize;
        let mut p = Pkt::new(&mut raw);
        let (offs, lens): (Vec<u16>, Vec<u16>) = if cfg!(miri) {
            // Miri runs this ~1000 times slower: around the bounds only.
            let near = |xs: &[u16]| -> Vec<u16> {
                xs.iter()
                    .flat_map(|&x| x.saturating_sub(2)..=x.saturating_add(2))
                    .collect()
            };
            (
                near(&[0, 64, 2176, 2240, u16::MAX]),
                near(&[0, 2176, 2240, u16::MAX]),
            )
        } else {
            (
                (0..=u16::MAX)
                    .filter(|o| *o < 2400 || o % 97 == 0 || *o > u16::MAX - 80)
                    .collect(),
                (0..=u16::MAX)
                    .filter(|l| {
                        *l < 80 || l % 251 == 0 || (2000..2300).contains(l) || *l > u16::MAX - 80
                    })
                    .collect(),
            )
        };
        for off in offs {
            for &len in &lens {
                p.set_data_off(off);
                p.set_len_raw(len);
                let start = (off as usize).clamp(META_SIZE, BUF_STRIDE);
                let end = (start + len as usize).min(BUF_STRIDE);
                assert_eq!(p.range(), start..end, "data_off {off} len {len}");
                let d = p.data();
                assert_eq!((d.as_ptr() as usize - at, d.len()), (start, end - start));
                let d = p.data_mut();
                assert_eq!((d.as_ptr() as usize - at, d.len()), (start, end - start));
            }
        }
    }

    #[test]
    fn garbage_metadata_never_reaches_outside_the_buffer() {
        let mut raw = Box::new([0u8; BUF_STRIDE]);
        let mut p = Pkt::new(&mut raw);
        for (off, len) in [(0u16, 100u16), (u16::MAX, u16::MAX), (2000, 9000), (63, 1)] {
            p.set_data_off(off);
            p.set_len_raw(len);
            assert!(!p.meta_is_sane());
            let r = p.range();
            assert!(r.start >= META_SIZE && r.end <= BUF_STRIDE);
            let _ = p.data_mut();
            let _ = p.push_front(8);
        }
    }
}
