//! The receive ring. TPACKET_V3: blocks of frames that the kernel fills
//! and hands over whole (when full or after the block timeout), given back
//! once every frame in them is copied out. TPACKET_V2: fixed slots handed
//! over and given back one frame at a time.
#![allow(unsafe_code)]

use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use sluice_packet::gso::VNET_HDR_LEN;

use crate::sys::{check, os_error};
use crate::NicError;

// Offsets inside `tpacket_block_desc` (version, offset_to_priv, then the
// 8-aligned `tpacket_hdr_v1`), from <linux/if_packet.h>.
const BLOCK_STATUS: usize = 8;
const NUM_PKTS: usize = 12;
const FIRST_PKT: usize = 16;

/// One frame in the ring, borrowed until [`RxRing::consume`].
pub(crate) struct Frame<'r> {
    /// The captured bytes (starting at the Ethernet header).
    pub data: &'r [u8],
    /// The frame's length on the wire (more than `data.len()` if truncated).
    pub wire_len: u32,
    /// `tp_status` bits (VLAN_VALID, CSUMNOTREADY, ...).
    pub status: u32,
    /// Stripped VLAN tag (TCI) if `status` has VLAN_VALID.
    pub vlan_tci: u16,
    /// Its TPID if `status` has VLAN_TPID_VALID.
    pub vlan_tpid: u16,
    /// The virtio-net header the kernel wrote right before the frame
    /// (sockets with PACKET_VNET_HDR); `None` if there is no room for one,
    /// which only a corrupt ring gives.
    pub vnet: Option<[u8; VNET_HDR_LEN]>,
}

/// A mapped receive ring.
pub(crate) struct RxRing {
    base: NonNull<u8>,
    block_size: usize,
    blocks: usize,
    /// TPACKET_V2 slot size, or `None` for TPACKET_V3.
    v2_slot: Option<usize>,
    /// The socket has PACKET_VNET_HDR: every frame is preceded by a
    /// virtio-net header.
    vnet: bool,
    /// Block being read.
    cur: usize,
    /// Frames not yet consumed in the current block (0: not opened).
    left: u32,
    /// Offset of the next frame in the current block.
    off: usize,
}

// SAFETY: the mapping is owned by this value alone (no aliases handed out
// beyond borrows of `&mut self`); moving it between threads is fine.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Maps the ring that PACKET_RX_RING configured on `fd`; `v2_slot` is
    /// the slot size of a TPACKET_V2 ring (`None`: TPACKET_V3).
    pub(crate) fn map(
        fd: RawFd,
        block_size: usize,
        blocks: usize,
        v2_slot: Option<usize>,
        vnet: bool,
    ) -> Result<RxRing, NicError> {
        let len = block_size * blocks;
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel
        // checks `len` against the ring it set up. The result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED | libc::MAP_POPULATE,
                fd,
                0,
            )
        };
        let p = if p == libc::MAP_FAILED {
            // MAP_LOCKED fails under a low RLIMIT_MEMLOCK; the ring works
            // unlocked too.
            // SAFETY: as above, without MAP_LOCKED.
            let q = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    fd,
                    0,
                )
            };
            if q == libc::MAP_FAILED {
                return Err(os_error(
                    "cannot map the AF_PACKET receive ring",
                    std::io::Error::last_os_error(),
                ));
            }
            q
        } else {
            p
        };
        let base = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| NicError("mmap returned a null ring".into()))?;
        Ok(RxRing {
            base,
            block_size,
            blocks,
            v2_slot,
            vnet,
            cur: 0,
            left: 0,
            off: 0,
        })
    }

    /// Start of the current V3 block or V2 slot.
    fn block(&self) -> *mut u8 {
        let unit = self.v2_slot.unwrap_or(self.block_size);
        // SAFETY: `cur` is below the number of blocks (V3) or slots (V2,
        // `block_size * blocks / slot`), so the offset stays in the mapping.
        unsafe { self.base.as_ptr().add(self.cur * unit) }
    }

    /// Size of the current unit (block or slot), for bounds checks.
    fn unit(&self) -> usize {
        self.v2_slot.unwrap_or(self.block_size)
    }

    fn status(&self) -> &AtomicU32 {
        self.status_at(BLOCK_STATUS)
    }

    /// The ownership word at `at` in the current unit: V3's `block_status`
    /// or V2's `tp_status`.
    fn status_at(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is 0 or BLOCK_STATUS, a 4-aligned u32 inside the
        // current unit (units are page- or 2 KiB-aligned) that the kernel
        // writes concurrently, so it is only accessed atomically.
        unsafe { &*self.block().add(at).cast::<AtomicU32>() }
    }

    fn read_u32(&self, at: usize) -> u32 {
        debug_assert!(at + 4 <= self.unit());
        // SAFETY: inside the current block, which user space owns while
        // its status has TP_STATUS_USER (checked by the caller).
        unsafe { self.block().add(at).cast::<u32>().read_unaligned() }
    }

    fn read_u16(&self, at: usize) -> u16 {
        debug_assert!(at + 2 <= self.unit());
        // SAFETY: as `read_u32`.
        unsafe { self.block().add(at).cast::<u16>().read_unaligned() }
    }

    /// The virtio-net header before the frame at `start` of the current
    /// unit, whose frame header ends at `hdr_end`: the kernel puts it
    /// between the two.
    fn vnet_before(&self, hdr_end: usize, start: usize) -> Option<[u8; VNET_HDR_LEN]> {
        if !self.vnet || start < hdr_end + VNET_HDR_LEN || start > self.unit() {
            return None;
        }
        let mut h = [0u8; VNET_HDR_LEN];
        // SAFETY: `start - VNET_HDR_LEN..start` lies inside the current
        // unit (checked above), which user space owns while its status has
        // TP_STATUS_USER; `h` is a separate local array.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.block().add(start - VNET_HDR_LEN),
                h.as_mut_ptr(),
                VNET_HDR_LEN,
            )
        };
        Some(h)
    }

    /// The next frame, if the kernel has handed over one.
    pub(crate) fn peek(&mut self) -> Option<Frame<'_>> {
        if let Some(slot) = self.v2_slot {
            return self.peek_v2(slot);
        }
        loop {
            if self.left == 0 {
                if self.status().load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                    return None;
                }
                self.left = self.read_u32(NUM_PKTS);
                self.off = self.read_u32(FIRST_PKT) as usize;
                if self.left == 0 {
                    self.release();
                    continue;
                }
            }
            // tpacket3_hdr: next_offset 0, sec 4, nsec 8, snaplen 12,
            // len 16, status 20, mac 24, net 26, rxhash 28, vlan_tci 32,
            // vlan_tpid 36.
            let off = self.off;
            if off + 48 > self.block_size {
                // A corrupt offset: give the block back rather than read
                // outside it.
                self.release();
                continue;
            }
            let snaplen = self.read_u32(off + 12) as usize;
            let wire_len = self.read_u32(off + 16);
            let status = self.read_u32(off + 20);
            let mac = self.read_u16(off + 24) as usize;
            let vlan_tci = self.read_u32(off + 32) as u16;
            let vlan_tpid = self.read_u16(off + 36);
            let start = off + mac;
            let end = (start + snaplen).min(self.block_size);
            let start = start.min(end);
            let vnet = self.vnet_before(off + 48, start);
            // SAFETY: `start..end` lies inside the current block (clamped
            // above), which we own until `release`; the borrow of `self`
            // keeps the block from being released while `data` lives.
            let data = unsafe { std::slice::from_raw_parts(self.block().add(start), end - start) };
            return Some(Frame {
                data,
                wire_len,
                status,
                vlan_tci,
                vlan_tpid,
                vnet,
            });
        }
    }

    /// TPACKET_V2: the current slot's frame, if the kernel filled it.
    fn peek_v2(&mut self, slot: usize) -> Option<Frame<'_>> {
        // The slot's `tp_status` (offset 0) doubles as its ownership flag.
        if self.status_at(0).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        self.left = 1;
        // tpacket2_hdr: status 0, len 4, snaplen 8, mac 12, net 14, sec 16,
        // nsec 20, vlan_tci 24, vlan_tpid 26.
        let status = self.read_u32(0);
        let wire_len = self.read_u32(4);
        let snaplen = self.read_u32(8) as usize;
        let mac = self.read_u16(12) as usize;
        let vlan_tci = self.read_u16(24);
        let vlan_tpid = self.read_u16(26);
        let end = (mac + snaplen).min(slot);
        let start = mac.min(end);
        // tpacket2_hdr is 32 bytes.
        let vnet = self.vnet_before(32, start);
        // SAFETY: `start..end` lies inside the current slot, which we own
        // while its status has TP_STATUS_USER, until `consume`.
        let data = unsafe { std::slice::from_raw_parts(self.block().add(start), end - start) };
        Some(Frame {
            data,
            wire_len,
            status,
            vlan_tci,
            vlan_tpid,
            vnet,
        })
    }

    /// Moves past the frame last returned by [`peek`](Self::peek); gives
    /// the block (V3) or slot (V2) back to the kernel after its last frame.
    pub(crate) fn consume(&mut self) {
        if let Some(slot) = self.v2_slot {
            if self.left == 1 {
                self.left = 0;
                self.status_at(0)
                    .store(libc::TP_STATUS_KERNEL, Ordering::Release);
                self.cur = (self.cur + 1) % (self.block_size * self.blocks / slot);
            }
            return;
        }
        if self.left == 0 {
            return;
        }
        self.left -= 1;
        if self.left == 0 {
            self.release();
        } else {
            let next = self.read_u32(self.off) as usize;
            self.off += next;
        }
    }

    fn release(&mut self) {
        self.left = 0;
        self.status()
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.blocks;
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `map`; no borrow of
        // it can outlive `self`.
        let _ = check(unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.block_size * self.blocks)
        });
    }
}
