//! The packet view an NF works with.

use sluice_mem::Pkt;
use sluice_packet::gso::Offload;
use sluice_packet::parse::{parse, Headers};
use sluice_packet::ParseError;

use crate::drop_reason::DropReason;
use crate::verdict::Verdict;

/// One packet of a batch: its bytes, its metadata and its verdict.
pub struct Packet<'a> {
    pkt: Pkt<'a>,
}

impl<'a> Packet<'a> {
    pub(crate) fn new(pkt: Pkt<'a>) -> Self {
        Packet { pkt }
    }

    /// The frame bytes (starting at the Ethernet header).
    #[inline]
    pub fn data(&self) -> &[u8] {
        self.pkt.data()
    }

    /// The frame bytes, mutable (for in-place rewrites).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.pkt.data_mut()
    }

    /// Parses the headers (no checksum verification).
    #[inline]
    pub fn headers(&self) -> Result<Headers, ParseError> {
        parse(self.pkt.data())
    }

    /// The flow-table id of this packet's flow (stable for the flow's life;
    /// both directions share it).
    #[inline]
    pub fn flow_id(&self) -> u32 {
        self.pkt.flow_id()
    }

    /// Symmetric 5-tuple hash.
    #[inline]
    pub fn flow_hash(&self) -> u32 {
        self.pkt.flow_hash()
    }

    /// Index of the ingress port.
    #[inline]
    pub fn port_in(&self) -> u16 {
        self.pkt.port_in()
    }

    /// Ingress timestamp (CLOCK_MONOTONIC ns).
    #[inline]
    pub fn timestamp_ns(&self) -> u64 {
        self.pkt.timestamp_ns()
    }

    /// The packet's offload state: a GSO super-packet (`is_gso`, with its
    /// `gso_size`) and/or a partial checksum (`needs_csum`). Only NFs
    /// declaring [`FrameNeeds::SuperPackets`](crate::FrameNeeds) ever see
    /// anything but [`Offload::NONE`].
    #[inline]
    pub fn offload(&self) -> Offload {
        self.pkt.offload()
    }

    /// Whether the packet's checksums need no verification: it came from
    /// the local stack with a partial checksum (virtio-net `NEEDS_CSUM`,
    /// Linux `CHECKSUM_PARTIAL`) or its receiver already verified them
    /// (`DATA_VALID`, `CHECKSUM_UNNECESSARY`). Linux's `skb_csum_unnecessary`
    /// is true for both, and conntrack then skips its checksum check.
    #[inline]
    pub fn csum_trusted(&self) -> bool {
        self.pkt.csum_flags() != 0
    }

    /// The current verdict (`Next` unless this NF changed it).
    #[inline]
    pub fn verdict(&self) -> Verdict {
        Verdict::decode(self.pkt.verdict_raw()).unwrap_or(Verdict::Next)
    }

    /// Sets the verdict.
    #[inline]
    pub fn set_verdict(&mut self, v: Verdict) {
        self.pkt.set_verdict_raw(v.encode());
    }

    /// Drops the packet under `reason`.
    #[inline]
    pub fn drop_with(&mut self, reason: DropReason) {
        self.set_verdict(Verdict::Drop(reason));
    }

    /// Drops the packet as malformed.
    #[inline]
    pub fn drop_malformed(&mut self, e: ParseError) {
        self.drop_with(DropReason::malformed(e));
    }

    /// Copies bytes and metadata (chain position, flow, ingress port,
    /// timestamp, headroom) into `dst`.
    pub(crate) fn copy_into(&self, dst: &mut Pkt<'_>) {
        let src = &self.pkt;
        dst.reset(0);
        dst.set_data_off(src.data_off());
        let len = dst.set_len(src.len() as usize);
        dst.data_mut()[..len].copy_from_slice(&src.data()[..len]);
        dst.set_port_in(src.port_in());
        dst.set_chain(src.chain());
        dst.set_hop(src.hop());
        dst.set_visits(src.visits());
        dst.set_flow_id(src.flow_id());
        dst.set_flow_hash(src.flow_hash());
        dst.set_timestamp_ns(src.timestamp_ns());
        dst.set_offload(&src.offload());
    }

    /// Full buffer-level access (headroom push/pull, length, scratch space).
    #[inline]
    pub fn raw(&mut self) -> &mut Pkt<'a> {
        &mut self.pkt
    }
}
