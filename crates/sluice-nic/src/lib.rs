//! Network interface ports: the contract every real-I/O port implements.
//!
//! A NIC port moves frames between a Linux (or DPDK) interface and arena
//! buffers. The worker owns the buffers; a port only fills buffers it was
//! given on receive and consumes buffers it was handed on transmit, so
//! buffer accounting stays with the platform's pool.

pub mod af_xdp;
#[cfg(feature = "dpdk")]
pub mod dpdk;

use std::os::fd::RawFd;

use sluice_mem::{Arena, HandleBatch, PoolCache};
use sluice_spec::{PortKind, SpecError};

pub mod af_packet;
pub mod handover;
pub mod options;
mod sampled;
mod sys;
pub mod tap;

pub use af_packet::AfPacketPort;
pub use options::{AfPacketOptions, TapOptions};
pub use sys::{has_net_caps, wait_readable};
pub use tap::TapPort;

/// Counters of one NIC port, comparable with the kernel's interface counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames received into buffers.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames the kernel or device reported dropped before we saw them.
    pub rx_dropped: u64,
    /// Frames received but discarded for not fitting a buffer.
    pub rx_oversize: u64,
    /// Frames handed to the interface.
    pub tx_packets: u64,
    /// Bytes handed to the interface.
    pub tx_bytes: u64,
    /// Frames the interface refused (counted, then freed).
    pub tx_errors: u64,
    /// Arena buffers the port has lent the kernel or device now (a gauge):
    /// an AF_XDP fill ring's, frames sent and not yet completed. They are
    /// the platform's in a buffer audit, and come back on
    /// [`NicPort::release`].
    pub held: u64,
    /// GSO/GRO super-packets received whole (ports with `offload: true`).
    pub rx_gso: u64,
    /// Super-packets handed to the interface whole, for it to segment.
    pub tx_gso: u64,
    /// Frames refused for bad offload state, by
    /// [`GsoError::index`](sluice_packet::gso::GsoError::index): a
    /// malformed virtio-net header or `gso_size` on receive, a super-packet
    /// no buffer can hold, offload state an NF corrupted on transmit.
    pub offload_errors: [u64; 7],
}

impl NicStats {
    /// Counts a frame refused for `e`.
    pub fn offload_error(&mut self, e: sluice_packet::gso::GsoError) {
        self.offload_errors[e.index()] += 1;
    }
}

/// An error opening or running a NIC port. The message says what to do.
#[derive(Debug)]
pub struct NicError(pub String);

impl std::fmt::Display for NicError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NicError {}

/// A running NIC port, driven by one worker thread.
pub trait NicPort: Send {
    /// The spec kind name (`af_packet`, `tap`, `af_xdp`, `dpdk`).
    fn kind(&self) -> &'static str;

    /// Receives up to `max` frames into buffers allocated from `cache`,
    /// appending their handles to `out` with data offset, length and ingress
    /// port already set by the caller's conventions (the caller sets
    /// `port_in`, flow and timestamp). Returns how many were appended; never
    /// blocks.
    fn rx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
    ) -> Result<usize, NicError>;

    /// Transmits frames from the front of `batch`. Every buffer sent (or
    /// refused and counted in `tx_errors`) is removed from `batch`: freed
    /// to `cache` now, or, by a port that sends in place (AF_XDP), when the
    /// device is done with it (counted in [`NicStats::held`] meanwhile).
    /// Buffers left in `batch` could not be queued now (ring full) and
    /// should be retried. Returns how many were removed.
    fn tx_burst(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        batch: &mut HandleBatch,
    ) -> Result<usize, NicError>;

    /// Whether the port takes offloaded packets as they are (GSO
    /// super-packets, partial checksums) and hands them to the kernel with
    /// a virtio-net header. Ports that do not get plain frames only: the
    /// platform segments and completes checksums before `tx_burst`.
    fn offloads(&self) -> bool {
        false
    }

    /// A descriptor that becomes readable when frames arrive (for an idle
    /// worker to sleep on), if the port has one.
    fn rx_fd(&self) -> Option<RawFd>;

    /// Current counters: the port's own and those only the device or the
    /// kernel keeps (drops before the port saw a frame, device transmit
    /// errors), the latter at most a millisecond old. A system call or
    /// driver call at most once a millisecond: for reports.
    fn stats(&self) -> NicStats;

    /// The counters the port keeps itself, read without asking the device
    /// or the kernel: what the platform reads around every transmit
    /// batch. Default: [`NicPort::stats`] (for ports whose counters are
    /// all their own).
    fn counters(&self) -> NicStats {
        self.stats()
    }

    /// How the port moves frames, for the run report (`ports[].mode`):
    /// whether frames are copied between the device and arena buffers,
    /// and by whom. `None` for kinds where that is not a choice.
    fn mode(&self) -> Option<String> {
        None
    }

    /// Stops the port's I/O and frees every buffer it holds to `cache`
    /// (see [`NicStats::held`]); call once, before dropping the port.
    /// Afterwards it receives and sends nothing. A port dropped without
    /// it keeps its held buffers out of the pool for good, which is safe:
    /// a device may still write them.
    ///
    /// # Errors
    /// The kernel did not let go in time; the buffers it may still write
    /// stay held and counted.
    fn release(&mut self, _cache: &mut PoolCache<'_>) -> Result<(), NicError> {
        Ok(())
    }

    /// The descriptors another daemon takes over to run this port on
    /// (`sluice migrate`, [`handover`]); empty for a port that cannot move.
    fn handover(&self) -> Vec<RawFd> {
        Vec::new()
    }

    /// Whether this port runs on descriptors another daemon handed over.
    fn adopted(&self) -> bool {
        false
    }
}

/// Checks the kind-specific keys of a NIC port kind this crate runs (a
/// located spec error for a bad key); other kinds pass.
pub fn check_options(kind: &PortKind) -> Result<(), SpecError> {
    match kind {
        PortKind::AfPacket(n) => AfPacketOptions::from_node(&n.options).map(|_| ()),
        PortKind::Tap(n) => TapOptions::from_node(&n.options).map(|_| ()),
        PortKind::AfXdp(n) => af_xdp::AfXdpConfig::from_spec(n).map(|_| ()),
        #[cfg(feature = "dpdk")]
        PortKind::Dpdk(n) => dpdk::DpdkConfig::from_spec(n).map(|_| ()),
        _ => Ok(()),
    }
}

/// Whether a port of this kind asks for offloads (`offload: true` on an
/// `af_packet` or `tap` port), so the run needs large buffers.
pub fn wants_offload(kind: &PortKind) -> bool {
    match kind {
        PortKind::AfPacket(n) => AfPacketOptions::from_node(&n.options).is_ok_and(|o| o.offload),
        PortKind::Tap(n) => TapOptions::from_node(&n.options).is_ok_and(|o| o.offload),
        _ => false,
    }
}

/// Opens a NIC port of a kind this crate runs; `Ok(None)` for other kinds
/// (and for `dpdk` when built without the `dpdk` feature).
///
/// `workers` is how many platform workers each open their own copy of the
/// port (`settings.workers`). Only `af_packet` can be shared that way:
/// every copy joins the same `PACKET_FANOUT_HASH` group, whose hash is
/// symmetric, so both directions of a flow reach the same worker provided
/// every port's copies are opened in worker order. `arena` is the
/// platform's: an AF_XDP port shares its buffers with the kernel.
pub fn open(
    kind: &PortKind,
    workers: u16,
    arena: &Arena,
) -> Result<Option<Box<dyn NicPort>>, NicError> {
    let bad = |e: SpecError| NicError(e.to_string());
    Ok(Some(match kind {
        PortKind::AfPacket(n) => {
            let o = AfPacketOptions::from_node(&n.options).map_err(bad)?;
            Box::new(AfPacketPort::open(&n.interface, &o, workers)?)
        }
        PortKind::Tap(n) => {
            let o = TapOptions::from_node(&n.options).map_err(bad)?;
            Box::new(TapPort::open(&n.interface, &o)?)
        }
        PortKind::AfXdp(n) => {
            let cfg = af_xdp::AfXdpConfig::from_spec(n).map_err(bad)?;
            Box::new(af_xdp::AfXdpPort::open(&cfg, arena)?)
        }
        #[cfg(feature = "dpdk")]
        PortKind::Dpdk(n) => {
            let cfg = dpdk::DpdkConfig::from_spec(n).map_err(bad)?;
            Box::new(dpdk::DpdkPort::open(&cfg)?)
        }
        _ => return Ok(None),
    }))
}
