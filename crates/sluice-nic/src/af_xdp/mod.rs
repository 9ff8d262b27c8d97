//! AF_XDP port: frames move between an interface's queues and the arena
//! through XSK sockets, steered by a five-instruction XDP program.
//!
//! # Layout
//!
//! - `bpf`: the hand-written redirect program, its XSKMAP, and the BPF
//!   link that attaches it (detached by the kernel when sluice dies, even on
//!   SIGKILL).
//! - `xsk`: one socket, its UMEM registration and rings (the syscalls).
//! - `ring`: the producer/consumer protocol on the mapped rings.
//! - `lent`: the handles of the arena buffers a socket lent the kernel.
//! - `port`: [`AfXdpPort`], the [`NicPort`](crate::NicPort) over one socket
//!   per queue.
//!
//! # UMEM: the arena's buffers, shared in place
//!
//! Every socket's UMEM is the arena's buffer region
//! ([`sluice_mem::Arena::dma_region`]), registered in unaligned-chunk mode
//! (the buffers are 2,240 B apart, not a power of two). Frames are never
//! copied by sluice:
//!
//! - **Receive**: the port puts buffers on the fill ring at their first
//!   byte after the metadata; the kernel (or a zero-copy NIC) writes the
//!   frame 256 B further, and an RX descriptor hands the buffer back, which
//!   becomes the packet. The frame's offset comes from the descriptor and is
//!   checked against the buffer like any input.
//! - **Transmit**: a descriptor names the packet's own bytes; the buffer is
//!   freed when the completion ring returns it, not when `tx_burst` returns.
//! - **Accounting**: a buffer the kernel may touch is lent, its handle kept
//!   in `lent` until the kernel gives the buffer back; the gauge
//!   `NicStats::held` counts them. `release` closes the sockets, waits until
//!   the kernel let go of each queue (a probe bind), and only then frees what
//!   is still lent: a buffer the kernel never returned is not lost, and a
//!   buffer a device may still write is never handed out again.
//!
//! Devices without a zero-copy driver (veth, tap, generic XDP) still copy
//! once, in the kernel, straight into the arena buffer. Zero-copy binding is
//! tried only with the arena on huge pages: a zero-copy driver refuses a
//! frame crossing a boundary between pages that are not physically
//! contiguous, and with 4 KiB pages most buffers cross one. Measured with
//! `cargo bench -p sluice-nic --bench af_xdp_rx` (see `docs/benchmarks.md`):
//! `rx_burst` went from ≈ 155 to ≈ 48 ns per frame against the copying port
//! it replaced, side by side on veth.
//!
//! # Packet path cost
//!
//! No allocation and no locks. Syscalls only when the kernel asks for them:
//! the RX wakeup when the fill ring's need-wakeup flag is set (never in copy
//! mode), and the TX `sendto` wakeup, which copy mode needs once per 32
//! frames.

mod attach;
mod bpf;
mod config;
mod lent;
mod port;
mod queue;
mod ring;
mod xsk;

pub use bpf::XdpMode;
pub use config::{AfXdpConfig, XdpModeChoice};
pub use port::AfXdpPort;
pub use xsk::XskBind;
