//! AF_XDP port: frames move between an interface's queues and the arena
//! through XSK sockets, steered by a five-instruction XDP program.
//!
//! # Layout
//!
//! - `bpf`: the hand-written redirect program, its XSKMAP, and the BPF
//!   link that attaches it (detached by the kernel when sluice dies, even on
//!   SIGKILL).
//! - `xsk`: one socket with its UMEM and rings (the syscalls).
//! - `ring`: the producer/consumer protocol on the mapped rings.
//! - `port`: [`AfXdpPort`], the [`NicPort`](crate::NicPort) over one socket
//!   per queue.
//!
//! # UMEM: a separate area with one copy at the boundary
//!
//! The UMEM is a private 2 KiB-chunk area per queue, and each frame is copied
//! once between it and an arena buffer. Making the arena itself the UMEM
//! (zero copy between NIC and NFs) was measured and rejected for now:
//!
//! - The copy is cheap next to the whole receive path. Measured with
//!   `cargo bench -p sluice-nic --bench af_xdp_rx` on veth (medians, under
//!   load on a 2-core VM; table in `docs/architecture.md`, "NIC ports"): the
//!   64 B copy costs 13–21 ns, a quarter to a third of `rx_burst`'s 58–66 ns
//!   per frame, but 1.4–1.7 % of the ≈ 1 µs of CPU a frame costs end to end
//!   (the kernel's veth transmit, XDP redirect and its own copy into the
//!   UMEM dominate). Zero copy would not move the bottleneck.
//! - On every device without an AF_XDP zero-copy driver — veth, tap, virtio
//!   without the right feature set, all generic-mode XDP — the kernel copies
//!   the frame into the UMEM anyway, so arena-as-UMEM saves one of two copies.
//! - The arena's 2240 B buffer stride is not a power of two, so it needs
//!   `XDP_UMEM_UNALIGNED_CHUNK_FLAG` (and drivers' zero-copy support for
//!   unaligned mode is patchier), plus an arena API that exposes the
//!   page-aligned buffer region for `XDP_UMEM_REG` (today `sluice-mem` keeps
//!   its base private).
//! - Buffers on the fill ring and TX frames awaiting completion would be
//!   owned by the kernel, outside the pool's accounting: the `NicPort`
//!   contract (buffers freed when `tx_burst` returns) would have to change to
//!   free on completion, and every queue would pin `2 × ring_size` arena
//!   buffers.
//!
//! Arena-as-UMEM is worth revisiting for NICs with zero-copy drivers, where
//! the copy is the only one left; the change is described in
//! `docs/architecture.md`.
//!
//! # Packet path cost
//!
//! No allocation and no locks. Syscalls only when the kernel asks for them:
//! the RX wakeup when the fill ring's need-wakeup flag is set (never in copy
//! mode), and the TX `sendto` wakeup, which copy mode needs once per 32
//! frames.

mod bpf;
mod config;
mod port;
mod ring;
mod xsk;

pub use bpf::XdpMode;
pub use config::{AfXdpConfig, XdpModeChoice};
pub use port::AfXdpPort;
pub use xsk::XskBind;
