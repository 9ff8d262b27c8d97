//! The XDP redirect program, its XSKMAP and its attachment, through the
//! bpf(2) syscall directly (no libbpf, no clang).
//!
//! The program is five eBPF instructions, the equivalent of
//!
//! ```c
//! SEC("xdp") int sluice_xsk(struct xdp_md *ctx) {
//!     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//!
//! so frames of a queue with no socket in the map go on to the kernel stack.
//! It is attached with a BPF link (`BPF_LINK_CREATE`, attach type `BPF_XDP`):
//! the link is owned by its file descriptor, so when sluice exits for any
//! reason — including SIGKILL — the kernel closes the descriptor and detaches
//! the program. A netlink (`IFLA_XDP`) attachment would outlive the process.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, run after the driver built an skb.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver's receive path.
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Offset of `rx_queue_index` in `struct xdp_md` (data, data_end, data_meta,
/// ingress_ifindex, rx_queue_index: five `__u32`).
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    /// dst_reg in the low nibble, src_reg in the high nibble.
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0xf),
        off,
        imm,
    }
}

/// The redirect program with `map_fd` as its XSKMAP.
pub(crate) fn redirect_program(map_fd: i32) -> [Insn; 6] {
    [
        // r2 = *(u32 *)(r1 + 16)           ; ctx->rx_queue_index
        insn(0x61, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = map_fd (ld_imm64, pseudo map fd, patched by the verifier)
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0x00, 0, 0, 0, 0),
        // r3 = XDP_PASS                    ; action when the slot is empty
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // call bpf_redirect_map
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // exit (r0 = the helper's verdict)
        insn(0x95, 0, 0, 0, 0),
    ]
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Calls bpf(2) with `attr`; a non-negative result is a new descriptor (for
/// the commands that create one) or 0.
fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<i32> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union
    // bpf_attr` for `cmd`, and we pass its exact size; the kernel reads at
    // most that many bytes (zero-extending the rest) and writes back only
    // into fields of the same command.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}

fn owned(fd: i32) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful bpf(2) call that creates
    // a descriptor, so it is open and owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn name16(s: &str) -> [u8; 16] {
    let mut n = [0u8; 16];
    let b = s.as_bytes();
    let k = b.len().min(15);
    n[..k].copy_from_slice(&b[..k]);
    n
}

/// Creates an XSKMAP with `entries` slots (one per queue).
pub(crate) fn create_xskmap(entries: u32) -> io::Result<OwnedFd> {
    let mut a = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: name16("sluice_xsks"),
        ..Default::default()
    };
    bpf(BPF_MAP_CREATE, &mut a).map(owned)
}

/// Puts socket `xsk_fd` into slot `queue` of the XSKMAP.
pub(crate) fn xskmap_set(map: &OwnedFd, queue: u32, xsk_fd: i32) -> io::Result<()> {
    let key = queue;
    let value = xsk_fd as u32;
    let mut a = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..Default::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
}

/// Loads the redirect program for `map`. On a verifier rejection the error
/// carries the verifier log.
pub(crate) fn load_redirect_program(map: &OwnedFd) -> Result<OwnedFd, (io::Error, String)> {
    let prog = redirect_program(map.as_raw_fd());
    let license = CString::new("GPL").expect("no NUL");
    let mut log = vec![0u8; 4096];
    let mut a = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: name16("sluice_xsk"),
        expected_attach_type: BPF_XDP,
        ..Default::default()
    };
    match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err((e, String::from_utf8_lossy(&log[..end]).trim().to_string()))
        }
    }
}

/// Where an XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver (`xdpdrv`).
    Native,
    /// Generic XDP on the skb path (`xdpgeneric`), supported by every device.
    Generic,
}

impl XdpMode {
    /// The name `ip link` uses.
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// Attaches `prog` to interface `ifindex` with a BPF link in `mode`; the
/// returned descriptor is the attachment.
pub(crate) fn link_xdp(prog: &OwnedFd, ifindex: u32, mode: XdpMode) -> io::Result<OwnedFd> {
    let mut a = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags: match mode {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Generic => XDP_FLAGS_SKB_MODE,
        },
    };
    bpf(BPF_LINK_CREATE, &mut a).map(owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encodes_like_clang_output() {
        // Bytes as llvm-objdump prints them for the C program above.
        let p = redirect_program(7);
        // SAFETY: Insn is repr(C), 8 bytes, no padding; viewing the array as
        // bytes reads initialised memory only.
        let bytes: &[u8] =
            unsafe { std::slice::from_raw_parts(p.as_ptr().cast::<u8>(), p.len() * 8) };
        let mut want = Vec::new();
        for w in [
            [0x61, 0x12, 0x10, 0, 0, 0, 0, 0],
            [0x18, 0x11, 0, 0, 7, 0, 0, 0],
            [0, 0, 0, 0, 0, 0, 0, 0],
            [0xb7, 0x03, 0, 0, 2, 0, 0, 0],
            [0x85, 0, 0, 0, 51, 0, 0, 0],
            [0x95, 0, 0, 0, 0, 0, 0, 0],
        ] {
            want.extend_from_slice(&w);
        }
        assert_eq!(bytes, &want[..]);
    }
}
