//! The `offload: true` side of a tap: frames with virtio-net headers, read
//! with `readv` (header, an ordinary buffer's room, the overflow area) and
//! written with `writev` (header, frame).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::RawFd;

use sluice_mem::{Arena, PktHandle, PoolCache, DATA_ROOM};
use sluice_packet::gso::{Offload, VNET_HDR_LEN};

use super::TapPort;

/// Receives one frame with its virtio-net header into `room` (an
/// ordinary buffer's) and the overflow area; returns the frame length.
fn read_vnet(
    fd: RawFd,
    hdr: &mut [u8; VNET_HDR_LEN],
    room: &mut [u8],
    overflow: &mut [u8],
) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: room.as_mut_ptr().cast(),
            iov_len: room.len(),
        },
        libc::iovec {
            iov_base: overflow.as_mut_ptr().cast(),
            iov_len: overflow.len(),
        },
    ];
    // SAFETY: three iovecs over live, writable, disjoint buffers of the
    // lengths given, alive across the call.
    let r = unsafe { libc::readv(fd, iov.as_ptr(), 3) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r as usize).saturating_sub(VNET_HDR_LEN))
}

impl TapPort {
    /// Reads one frame with its virtio-net header into `h` (an ordinary
    /// buffer) or, when it spills over, into a large buffer; `Ok(None)`
    /// when the frame was refused and counted. `h` is freed unless
    /// returned.
    pub(super) fn rx_vnet(
        &mut self,
        fd: RawFd,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        mut h: PktHandle,
    ) -> io::Result<Option<PktHandle>> {
        let Some(overflow) = self.overflow.as_deref_mut() else {
            cache.free(h);
            return Ok(None);
        };
        let mut hdr = [0u8; VNET_HDR_LEN];
        let mut p = arena.pkt(&mut h);
        p.reset(0);
        let room = p.room_mut();
        let room_len = room.len().min(DATA_ROOM);
        let len = match read_vnet(fd, &mut hdr, &mut room[..room_len], overflow) {
            Ok(len) => len,
            Err(e) => {
                cache.free(h);
                return Err(e);
            }
        };
        let refuse = |h, cache: &mut PoolCache<'_>| {
            cache.free(h);
            Ok(None)
        };
        if len == 0 {
            return refuse(h, cache);
        }
        if len >= room_len + overflow.len() {
            // Filled everything: the frame may have been cut.
            self.stats.rx_oversize += 1;
            return refuse(h, cache);
        }
        let o = match Offload::from_vnet(&hdr, len) {
            Ok(o) => o,
            Err(e) => {
                self.stats.offload_error(e);
                return refuse(h, cache);
            }
        };
        let mut h = if len <= room_len {
            p.set_len(len);
            h
        } else {
            let Some(mut big) = cache.alloc_large() else {
                // No large buffer free (or none configured): dropped.
                self.stats.rx_oversize += 1;
                return refuse(h, cache);
            };
            let mut q = arena.pkt(&mut big);
            q.reset(0);
            let dst = q.room_mut();
            dst[..room_len].copy_from_slice(&p.room_mut()[..room_len]);
            dst[room_len..len].copy_from_slice(&overflow[..len - room_len]);
            q.set_len(len);
            cache.free(h);
            big
        };
        let mut p = arena.pkt(&mut h);
        p.set_offload(&o);
        self.stats.rx_gso += u64::from(o.is_gso());
        self.stats.rx_bytes += len as u64;
        Ok(Some(h))
    }
}

pub(super) fn write_vnet(fd: RawFd, hdr: &[u8; VNET_HDR_LEN], frame: &[u8]) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: frame.as_ptr() as *mut libc::c_void,
            iov_len: frame.len(),
        },
    ];
    // SAFETY: two iovecs over live, readable buffers of the lengths given;
    // writev only reads them.
    let r = unsafe { libc::writev(fd, iov.as_ptr(), 2) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}
