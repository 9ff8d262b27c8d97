//! Packet buffers: layout, owned handles and the typed view of one buffer.
//!
//! Every ordinary buffer is `BUF_STRIDE` bytes in the arena:
//!
//! ```text
//! | metadata 64 B | headroom 128 B | data room 2048 B |
//! ```
//!
//! Large buffers (`LARGE_STRIDE`, for GSO/GRO super-packets of up to
//! 64 KiB) have the same metadata and headroom and a data room of
//! `LARGE_DATA_ROOM`; a [`Pkt`] views either kind the same way.
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
/// Bytes of packet data room of a large buffer: a 64 KiB IP super-packet
/// with its Ethernet header and a VLAN tag (`len` is 16 bits, so a packet
/// is at most 65 535 bytes whatever the room).
pub const LARGE_DATA_ROOM: usize = 65_536;
/// Distance between consecutive large buffers (a multiple of 64).
pub const LARGE_STRIDE: usize = META_SIZE + HEADROOM + LARGE_DATA_ROOM;
/// Longest packet any buffer holds (the `len` field's range).
pub const MAX_PKT_LEN: usize = u16::MAX as usize;

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
/// Offload state (see `sluice_packet::gso::Offload`): GSO type, checksum
/// flags, GSO size, checksum start and offset.
const OFF_GSO_TYPE: usize = 56;
const OFF_CSUM_FLAGS: usize = 57;
const OFF_GSO_SIZE: usize = 58;
const OFF_CSUM_START: usize = 60;
const OFF_CSUM_OFFSET: usize = 62;
/// Bytes of NF scratch space in the metadata.
pub const SCRATCH_SIZE: usize = OFF_GSO_TYPE - OFF_SCRATCH;

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

/// Mutable view of one owned buffer, ordinary or large: metadata
/// accessors plus the packet bytes.
///
/// The metadata is a fixed-size array, so its accessors need no bounds
/// check; `room` is the rest of the buffer (headroom and data room), whose
/// length is the buffer's kind. Offsets in the metadata (`data_off`) count
/// from the buffer's start, metadata included, as they always have.
pub struct Pkt<'a> {
    meta: &'a mut [u8; META_SIZE],
    room: &'a mut [u8],
}

macro_rules! meta_field {
    ($get:ident, $set:ident, $ty:ty, $off:expr, $doc:literal) => {
        #[doc = concat!("Metadata: ", $doc)]
        #[inline]
        pub fn $get(&self) -> $ty {
            const N: usize = std::mem::size_of::<$ty>();
            let mut raw = [0u8; N];
            raw.copy_from_slice(&self.meta[$off..$off + N]);
            <$ty>::from_ne_bytes(raw)
        }
        #[doc = concat!("Sets metadata: ", $doc)]
        #[inline]
        pub fn $set(&mut self, v: $ty) {
            const N: usize = std::mem::size_of::<$ty>();
            self.meta[$off..$off + N].copy_from_slice(&v.to_ne_bytes());
        }
    };
}

impl<'a> Pkt<'a> {
    /// Views a whole ordinary buffer.
    #[inline]
    pub fn new(b: &'a mut [u8; BUF_STRIDE]) -> Self {
        Self::over(b)
    }

    /// Views a whole buffer of any kind (`b` is the buffer from its first
    /// metadata byte to its last data byte).
    ///
    /// # Panics
    /// If `b` is shorter than an ordinary buffer.
    #[inline]
    pub fn over(b: &'a mut [u8]) -> Self {
        assert!(
            b.len() >= BUF_STRIDE,
            "a buffer is at least BUF_STRIDE bytes"
        );
        let (meta, room) = b.split_at_mut(META_SIZE);
        let meta: &mut [u8; META_SIZE] = meta.try_into().expect("split at META_SIZE");
        Pkt { meta, room }
    }

    /// Bytes of the whole buffer (`BUF_STRIDE` or `LARGE_STRIDE`).
    #[inline(always)]
    pub fn capacity(&self) -> usize {
        META_SIZE + self.room.len()
    }

    /// Whether this is a large buffer.
    #[inline]
    pub fn is_large(&self) -> bool {
        self.room.len() > BUF_STRIDE - META_SIZE
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
    meta_field!(
        gso_type,
        set_gso_type,
        u8,
        OFF_GSO_TYPE,
        "GSO type of a super-packet (virtio-net `gso_type`; 0: none)."
    );
    meta_field!(
        csum_flags,
        set_csum_flags,
        u8,
        OFF_CSUM_FLAGS,
        "checksum offload flags (virtio-net `flags`: 1 partial, 2 verified)."
    );
    meta_field!(
        gso_size,
        set_gso_size,
        u16,
        OFF_GSO_SIZE,
        "payload bytes per segment of a super-packet."
    );
    meta_field!(
        csum_start,
        set_csum_start,
        u16,
        OFF_CSUM_START,
        "start of a partial checksum's range, from the packet start."
    );
    meta_field!(
        csum_offset,
        set_csum_offset,
        u16,
        OFF_CSUM_OFFSET,
        "checksum field of a partial checksum, from `csum_start`."
    );

    /// Whether the packet has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resets the metadata for a fresh packet of `len` bytes at the default
    /// offset (no offloads).
    #[inline]
    pub fn reset(&mut self, len: usize) {
        self.meta.fill(0);
        self.set_data_off(DATA_START as u16);
        let room = self.capacity() - DATA_START;
        self.set_len_raw(len.min(room).min(MAX_PKT_LEN) as u16);
    }

    /// Resets the metadata for a fresh packet of `len` bytes starting at
    /// byte `data_off` of the buffer (where a device wrote it), no
    /// offloads. False, with nothing changed, when that range is not
    /// inside the buffer's room.
    #[inline]
    pub fn reset_at(&mut self, data_off: usize, len: usize) -> bool {
        let fits = data_off >= META_SIZE
            && data_off.saturating_add(len) <= self.capacity()
            && len <= MAX_PKT_LEN;
        if fits {
            self.meta.fill(0);
            self.set_data_off(data_off as u16);
            self.set_len_raw(len as u16);
        }
        fits
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
        if start >= META_SIZE && end <= self.capacity() {
            start..end
        } else {
            Self::clamped(start, end - start, self.capacity())
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
    /// `META_SIZE..=capacity`, the end to the buffer's end.
    #[cold]
    #[inline(never)]
    fn clamped(data_off: usize, len: usize, capacity: usize) -> std::ops::Range<usize> {
        let start = data_off.clamp(META_SIZE, capacity);
        let end = (start + len).min(capacity);
        start..end
    }

    /// Copies this packet into `dst` (another buffer): the metadata as it
    /// is, and the packet bytes at the same offset, nothing of the rest of
    /// the room. False (and `dst` untouched) when the packet does not fit
    /// there (a super-packet into an ordinary buffer).
    ///
    /// This is how a packet crosses into another trust domain: its bytes
    /// move, its handle does not.
    pub fn copy_to(&self, dst: &mut Pkt<'_>) -> bool {
        let r = self.range();
        if r.end > dst.capacity() {
            return false;
        }
        dst.meta.copy_from_slice(self.meta);
        // Clamped metadata (garbage an NF wrote) is copied clamped.
        dst.set_data_off(r.start as u16);
        dst.set_len_raw(r.len() as u16);
        let at = r.start - META_SIZE..r.end - META_SIZE;
        dst.room[at.clone()].copy_from_slice(&self.room[at]);
        true
    }

    /// Whether the metadata describes a range inside the buffer (false only
    /// if an NF wrote garbage).
    pub fn meta_is_sane(&self) -> bool {
        let start = self.data_off() as usize;
        start >= META_SIZE && start + self.len() as usize <= self.capacity()
    }

    /// The packet bytes: `&b[range()]`, written out so that the common
    /// case (sane metadata) slices with no check beyond `range`'s two.
    #[inline]
    pub fn data(&self) -> &[u8] {
        let (start, end) = self.raw_range();
        if start >= META_SIZE && end <= self.capacity() {
            // Within the room, so this slice needs no further check.
            return &self.room[start - META_SIZE..end - META_SIZE];
        }
        let r = Self::clamped(start, end - start, self.capacity());
        &self.room[r.start - META_SIZE..r.end - META_SIZE]
    }

    /// The packet bytes, mutable (as [`Pkt::data`]).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        let (start, end) = self.raw_range();
        if start >= META_SIZE && end <= self.capacity() {
            return &mut self.room[start - META_SIZE..end - META_SIZE];
        }
        let r = Self::clamped(start, end - start, self.capacity());
        &mut self.room[r.start - META_SIZE..r.end - META_SIZE]
    }

    /// The whole room after the packet start (to write a new packet), and
    /// sets the length afterwards with [`set_len`](Self::set_len).
    pub fn room_mut(&mut self) -> &mut [u8] {
        let start = self.range().start;
        &mut self.room[start - META_SIZE..]
    }

    /// Sets the packet length, clamped to the room after the packet start
    /// and to [`MAX_PKT_LEN`]; returns the length actually set.
    pub fn set_len(&mut self, len: usize) -> usize {
        let room = self.capacity() - self.range().start;
        let len = len.min(room).min(MAX_PKT_LEN);
        self.set_len_raw(len as u16);
        len
    }

    /// Grows the packet at the front by `n` bytes (into the headroom) and
    /// returns the new front bytes, or `None` if the headroom is too small
    /// (or the packet would exceed [`MAX_PKT_LEN`]).
    pub fn push_front(&mut self, n: usize) -> Option<&mut [u8]> {
        let r = self.range();
        if r.start < META_SIZE + n || r.len() + n > MAX_PKT_LEN {
            return None;
        }
        let start = r.start - n;
        self.set_data_off(start as u16);
        self.set_len_raw((r.end - start) as u16);
        Some(&mut self.room[start - META_SIZE..start - META_SIZE + n])
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
        let s = &mut self.meta[OFF_SCRATCH..OFF_GSO_TYPE];
        s.try_into().expect("scratch is SCRATCH_SIZE bytes")
    }

    /// The offload state (GSO super-packet, partial checksum), as an NF may
    /// have left it: check it (`Offload::check`) before acting on it.
    #[inline]
    pub fn offload(&self) -> sluice_packet::gso::Offload {
        sluice_packet::gso::Offload {
            gso_type: self.gso_type(),
            flags: self.csum_flags(),
            gso_size: self.gso_size(),
            csum_start: self.csum_start(),
            csum_offset: self.csum_offset(),
        }
    }

    /// Sets the offload state.
    #[inline]
    pub fn set_offload(&mut self, o: &sluice_packet::gso::Offload) {
        self.set_gso_type(o.gso_type);
        self.set_csum_flags(o.flags);
        self.set_gso_size(o.gso_size);
        self.set_csum_start(o.csum_start);
        self.set_csum_offset(o.csum_offset);
    }

    /// Clears the offload state (a plain frame with complete checksums).
    #[inline]
    pub fn clear_offload(&mut self) {
        self.meta[OFF_GSO_TYPE..META_SIZE].fill(0);
    }

    /// Whether the packet carries offload state (a super-packet or a
    /// partial checksum): one load of the two flag bytes.
    #[inline]
    pub fn has_offload(&self) -> bool {
        self.gso_type() != 0 || self.csum_flags() & 1 != 0
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
    fn reset_at_takes_a_range_inside_the_room_and_refuses_the_rest() {
        let mut raw = Box::new([0xaau8; BUF_STRIDE]);
        let mut p = Pkt::new(&mut raw);
        p.set_flow_id(9);
        assert!(p.reset_at(320, 60));
        assert_eq!((p.data_off(), p.len(), p.flow_id()), (320, 60, 0));
        assert_eq!(p.data().as_ptr(), p.room[320 - META_SIZE..].as_ptr());
        // The whole room after the start, and one byte too many.
        assert!(p.reset_at(320, BUF_STRIDE - 320));
        assert!(!p.reset_at(320, BUF_STRIDE - 319));
        assert!(!p.reset_at(META_SIZE - 1, 1), "inside the metadata");
        assert!(!p.reset_at(usize::MAX, 1));
        assert_eq!(
            (p.data_off() as usize, p.len() as usize),
            (320, BUF_STRIDE - 320)
        );
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
    fn large_buffers_hold_64k_and_clamp_to_their_own_end() {
        let mut raw = vec![0u8; LARGE_STRIDE];
        let at = raw.as_ptr() as usize;
        let mut p = Pkt::over(&mut raw);
        assert!(p.is_large());
        p.reset(100_000);
        assert_eq!(p.len() as usize, MAX_PKT_LEN);
        assert_eq!(p.set_len(70_000), MAX_PKT_LEN);
        assert_eq!(p.data().len(), MAX_PKT_LEN);
        assert!(p.push_front(4).is_none(), "would pass 65 535 bytes");
        p.set_len(60_000);
        assert!(p.push_front(4).is_some());
        p.set_data_off(u16::MAX);
        p.set_len_raw(u16::MAX);
        assert!(!p.meta_is_sane());
        let d = p.data();
        let start = u16::MAX as usize;
        assert_eq!(
            (d.as_ptr() as usize - at, d.len()),
            (start, LARGE_STRIDE - start)
        );
        // An ordinary buffer never reaches that far.
        let mut small = Box::new([0u8; BUF_STRIDE]);
        let mut q = Pkt::new(&mut small);
        assert!(!q.is_large());
        q.reset(100_000);
        assert_eq!(q.len() as usize, DATA_ROOM);
    }

    #[test]
    fn offload_state_lives_in_metadata_and_reset_clears_it() {
        let mut raw = Box::new([0u8; BUF_STRIDE]);
        let mut p = Pkt::new(&mut raw);
        p.reset(60);
        assert!(!p.has_offload());
        p.scratch().fill(0xff);
        assert!(
            !p.has_offload(),
            "scratch does not overlap the offload state"
        );
        p.set_gso_type(1);
        p.set_gso_size(1448);
        p.set_csum_flags(1);
        p.set_csum_start(34);
        p.set_csum_offset(16);
        assert!(p.has_offload());
        assert_eq!(
            (p.gso_size(), p.csum_start(), p.csum_offset()),
            (1448, 34, 16)
        );
        p.clear_offload();
        assert!(!p.has_offload());
        assert_eq!(p.scratch(), &[0xff; SCRATCH_SIZE]);
        p.set_csum_flags(1);
        p.reset(60);
        assert!(!p.has_offload());
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
