//! Offloaded packets at the platform's edges: where super-packets are cut
//! into wire segments and partial checksums completed.
//!
//! Ports with `offload: true` hand the platform GSO/GRO super-packets and
//! frames with partial checksums, and take them back as they are. Two
//! places must resolve them into plain frames:
//!
//! * **receive**, when a chain starting at the port has an NF that needs
//!   wire-sized frames ([`FrameNeeds::MtuFrames`], the default): the port
//!   hands the chain segments (software GSO, `sluice_packet::gso`) and
//!   completed checksums, so those NFs never see offload state;
//! * **transmit**, through a port that takes no offloads (a port without
//!   `offload`, `pcap_out`, a sink) when some port of the run has them.
//!
//! Nothing here runs unless some port of the run has `offload: true`: the
//! ordinary packet path is unchanged. On receive, `rx_packets` counts the
//! packets as they enter the chains (segments); on transmit, the segments
//! beyond the first of each super-packet are counted as `gso_segments` and
//! as originated by the platform, which keeps `packets_in +
//! packets_originated = packets_out + drops` exact. Bad offload state (an
//! NF may write any metadata) is a drop named in `offload_drops`.

use std::collections::VecDeque;

use serde::ser::{Serialize, SerializeMap, Serializer};
use sluice_mem::{Arena, HandleBatch, PktHandle, PoolCache, DATA_ROOM, MAX_BATCH};
use sluice_nf::FrameNeeds;
use sluice_nic::{NicError, NicPort};
use sluice_packet::gso::{complete_checksum, segment, GsoError, Segments};

use crate::plan::Plan;

/// Large buffers in the arena when some port has `offload: true`: enough
/// for every port's receive burst and NF rings full of super-packets
/// (512 × 64 KiB = 32 MiB).
pub const LARGE_BUFFERS: u32 = 512;

/// Large buffers the plan needs (0 when no port takes offloads).
pub fn large_buffers(plan: &Plan) -> u32 {
    if plan
        .ports
        .iter()
        .flatten()
        .any(|p| sluice_nic::wants_offload(&p.kind))
    {
        LARGE_BUFFERS
    } else {
        0
    }
}

/// Packets refused for bad offload state, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffloadDrops(pub [u64; GsoError::ALL.len()]);

impl OffloadDrops {
    /// Counts one.
    pub fn add(&mut self, e: GsoError) {
        self.0[e.index()] += 1;
    }

    /// All of them.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

impl std::ops::AddAssign<&OffloadDrops> for OffloadDrops {
    fn add_assign(&mut self, o: &OffloadDrops) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a += b;
        }
    }
}

/// A map of the non-zero reasons, e.g. `{"gso_size_zero": 3}`.
impl Serialize for OffloadDrops {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for e in GsoError::ALL {
            if self.0[e.index()] > 0 {
                m.serialize_entry(e.name(), &self.0[e.index()])?;
            }
        }
        m.end()
    }
}

/// Reads the map written by `Serialize` (unknown reasons are ignored).
impl<'de> serde::Deserialize<'de> for OffloadDrops {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = std::collections::BTreeMap::<String, u64>::deserialize(d)?;
        let mut out = OffloadDrops::default();
        for e in GsoError::ALL {
            if let Some(&v) = m.get(e.name()) {
                out.0[e.index()] = v;
            }
        }
        Ok(out)
    }
}

/// In the OpenAPI document: a map from reason to count.
impl utoipa::PartialSchema for OffloadDrops {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        <std::collections::BTreeMap<String, u64> as utoipa::PartialSchema>::schema()
    }
}

impl utoipa::ToSchema for OffloadDrops {}

/// A port's offload counters (part of its `PortStats`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct OffloadStats {
    /// Super-packets received whole (the NIC's count).
    pub gso_rx: u64,
    /// Super-packets sent whole, for the kernel to segment.
    pub gso_tx: u64,
    /// Super-packets this port cut into segments (receive or transmit).
    pub gso_split: u64,
    /// Segments beyond the first of those cut on transmit: packets the
    /// platform originated.
    pub gso_segments: u64,
    /// Partial checksums completed in software.
    pub checksums_completed: u64,
    /// Packets refused for bad offload state by the platform (cutting,
    /// completing) ...
    pub offload_drops: OffloadDrops,
    /// ... and by the NIC port (a bad virtio-net header on receive, state
    /// an NF corrupted on transmit).
    pub nic_offload_drops: OffloadDrops,
}

impl std::ops::AddAssign<&OffloadStats> for OffloadStats {
    fn add_assign(&mut self, o: &OffloadStats) {
        self.gso_rx += o.gso_rx;
        self.gso_tx += o.gso_tx;
        self.gso_split += o.gso_split;
        self.gso_segments += o.gso_segments;
        self.checksums_completed += o.checksums_completed;
        self.offload_drops += &o.offload_drops;
        self.nic_offload_drops += &o.nic_offload_drops;
    }
}

/// A super-packet being cut: its buffer, the plan and the next segment.
struct Cutting {
    h: PktHandle,
    segs: Segments,
    next: usize,
}

/// A port's offload work: whether it resolves on receive and transmit,
/// and its scratch (allocated once, when the port opens).
#[derive(Default)]
pub struct PortOffload {
    /// Segment and complete checksums as packets enter (a chain from this
    /// port has an NF that needs wire-sized frames).
    pub resolve_rx: bool,
    /// Segment and complete checksums before packets leave (this port
    /// takes no offloads and some port of the run does).
    pub resolve_tx: bool,
    stage: VecDeque<PktHandle>,
    out: Box<HandleBatch>,
    cutting: Option<Cutting>,
}

impl PortOffload {
    fn enable(&mut self) {
        if self.stage.capacity() == 0 {
            self.stage = VecDeque::with_capacity(MAX_BATCH);
        }
    }

    /// Receives up to `max` packets from `port` into `out` with every
    /// super-packet cut and every partial checksum completed; returns how
    /// many.
    pub fn rx(
        &mut self,
        port: &mut dyn NicPort,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
        stats: &mut OffloadStats,
    ) -> Result<usize, NicError> {
        let mut n = 0;
        while n < max && !out.is_full() {
            if let Some(c) = &mut self.cutting {
                let Some(s) = cut_next(arena, cache, c) else {
                    break; // no buffer now: go on next time
                };
                let _ = out.push(s);
                n += 1;
                if c.next == c.segs.count() {
                    if let Some(c) = self.cutting.take() {
                        cache.free(c.h);
                    }
                }
                continue;
            }
            let Some(mut h) = self.stage.pop_front() else {
                port.rx_burst(arena, cache, &mut self.out, max - n)?;
                if self.out.is_empty() {
                    break;
                }
                let stage = &mut self.stage;
                self.out.drain(|h| stage.push_back(h));
                continue;
            };
            match resolve(arena, &mut h, stats) {
                Ok(None) => {
                    let _ = out.push(h);
                    n += 1;
                }
                Ok(Some(segs)) => {
                    stats.gso_split += 1;
                    self.cutting = Some(Cutting { h, segs, next: 0 });
                }
                Err(e) => {
                    stats.offload_drops.add(e);
                    cache.free(h);
                }
            }
        }
        Ok(n)
    }

    /// Transmits `batch` through `send` (the port's plain transmit, which
    /// returns the packets it lost) with super-packets cut and partial
    /// checksums completed; returns the packets lost, bad offload state
    /// included.
    pub fn tx(
        &mut self,
        arena: &Arena,
        batch: &mut HandleBatch,
        cache: &mut PoolCache<'_>,
        stats: &mut OffloadStats,
        mut send: impl FnMut(&mut HandleBatch, &mut PoolCache<'_>) -> u64,
    ) -> u64 {
        let stage = &mut self.stage;
        batch.drain(|h| stage.push_back(h));
        let out = &mut *self.out;
        let mut lost = 0;
        while let Some(mut h) = self.stage.pop_front() {
            if out.is_full() {
                lost += send(out, cache);
            }
            match resolve(arena, &mut h, stats) {
                Ok(None) => {
                    let _ = out.push(h);
                }
                Ok(Some(segs)) => {
                    stats.gso_split += 1;
                    let mut c = Cutting { h, segs, next: 0 };
                    while c.next < c.segs.count() {
                        if out.is_full() {
                            lost += send(out, cache);
                        }
                        let Some(s) = cut_next(arena, cache, &mut c) else {
                            // Out of buffers: the rest of it is lost
                            // (only the super-packet itself was counted).
                            stats.offload_drops.add(GsoError::NoRoom);
                            lost += u64::from(c.next == 0);
                            break;
                        };
                        let _ = out.push(s);
                        stats.gso_segments += u64::from(c.next > 1);
                    }
                    cache.free(c.h);
                }
                Err(e) => {
                    stats.offload_drops.add(e);
                    cache.free(h);
                    lost += 1;
                }
            }
        }
        if !out.is_empty() {
            lost += send(out, cache);
        }
        lost
    }

    /// Whether the port still holds packets (a super-packet being cut, or
    /// received ones waiting for it).
    pub fn holds_packets(&self) -> bool {
        self.cutting.is_some() || !self.stage.is_empty()
    }

    /// Frees what the port still holds (shutdown).
    pub fn release(&mut self, cache: &mut PoolCache<'_>) {
        if let Some(c) = self.cutting.take() {
            cache.free(c.h);
        }
        while let Some(h) = self.stage.pop_front() {
            cache.free(h);
        }
    }
}

/// Whether any packet of `batch` carries offload state.
#[inline]
pub fn any_offloaded(arena: &Arena, batch: &mut HandleBatch) -> bool {
    batch.iter_mut().any(|h| arena.pkt(h).has_offload())
}

/// Makes `h` a plain frame where that needs no new buffers (a partial
/// checksum is completed in place): `Ok(None)`; a super-packet gives the
/// plan to cut it.
fn resolve(
    arena: &Arena,
    h: &mut PktHandle,
    stats: &mut OffloadStats,
) -> Result<Option<Segments>, GsoError> {
    let mut p = arena.pkt(h);
    if !p.has_offload() {
        return Ok(None);
    }
    let o = p.offload();
    if o.is_gso() {
        return segment(p.data(), &o).map(Some);
    }
    complete_checksum(p.data_mut(), &o)?;
    p.clear_offload();
    stats.checksums_completed += 1;
    Ok(None)
}

/// Writes the next segment of `c` into a fresh buffer carrying the
/// super-packet's metadata; `None` when no buffer is free.
fn cut_next(arena: &Arena, cache: &mut PoolCache<'_>, c: &mut Cutting) -> Option<PktHandle> {
    let len = c.segs.len_of(c.next);
    let mut s = if len <= DATA_ROOM {
        cache.alloc()?
    } else {
        cache.alloc_large()?
    };
    let src = arena.pkt(&mut c.h);
    let mut dst = arena.pkt(&mut s);
    dst.reset(0);
    match c.segs.write(src.data(), c.next, dst.room_mut()) {
        Ok(n) => {
            dst.set_len(n);
        }
        Err(_) => {
            // Sized above, so this cannot happen; an empty frame is safe.
            dst.set_len(0);
        }
    }
    dst.set_port_in(src.port_in());
    dst.set_chain(src.chain());
    dst.set_hop(src.hop());
    dst.set_visits(src.visits());
    dst.set_flow_id(src.flow_id());
    dst.set_flow_hash(src.flow_hash());
    dst.set_timestamp_ns(src.timestamp_ns());
    c.next += 1;
    Some(s)
}

/// Decides, per port, where offloaded packets are resolved (see the
/// module docs). `offloads[i]` says whether port `i` takes offloads.
pub fn plan_ports(plan: &Plan, offloads: &[bool]) -> Vec<(bool, bool)> {
    let any = offloads.iter().any(|&o| o);
    let needs_mtu = |i: u16| {
        plan.nf(i)
            .is_none_or(|n| n.nf_type.frames == FrameNeeds::MtuFrames)
    };
    let offloads_at = |p: usize| offloads.get(p).copied().unwrap_or(false);
    (0..plan.ports.len())
        .map(|p| {
            if !any {
                return (false, false);
            }
            let rx = offloads_at(p)
                && plan.chains_in_order().any(|(id, c)| {
                    usize::from(c.from) == p
                        && plan.chain_path(id).is_some_and(|path| {
                            path.iter()
                                .any(|h| plan.hop_nfs(h).iter().any(|&i| needs_mtu(i)))
                        })
                });
            (rx, !offloads_at(p))
        })
        .collect()
}

/// Sets `resolve_rx`/`resolve_tx` of a port's offload state.
pub fn configure(o: &mut PortOffload, (rx, tx): (bool, bool)) {
    o.resolve_rx = rx;
    o.resolve_tx = tx;
    if rx || tx {
        o.enable();
    }
}

#[cfg(test)]
mod tests;
