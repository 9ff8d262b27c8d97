//! Transmitting on a NIC port: retries while the interface takes nothing,
//! and the port's counters taken from the NIC's.

use sluice_mem::{Arena, HandleBatch, PoolCache};
use sluice_nic::{NicPort, NicStats};

use super::stats::PortStats;
use crate::offload::OffloadDrops;

/// How many times a NIC transmit is retried while the interface takes
/// nothing (a full socket buffer or ring) before the rest of the batch is
/// dropped as `port_tx_error`; each retry yields the CPU once (≈ 1 µs).
const NIC_TX_RETRIES: u32 = 64;

/// Copies a NIC's offload counters (cumulative) into the port's.
pub(super) fn nic_offload_stats(stats: &mut PortStats, s: &NicStats) {
    stats.offload.gso_rx = s.rx_gso;
    stats.offload.gso_tx = s.tx_gso;
    stats.offload.nic_offload_drops = OffloadDrops(s.offload_errors);
}

/// Sends `batch` on a NIC, retrying what the interface cannot take yet;
/// updates `stats` from the port's counters and returns the frames lost.
pub(super) fn nic_tx(
    port: &mut dyn NicPort,
    stats: &mut PortStats,
    arena: &Arena,
    batch: &mut HandleBatch,
    cache: &mut PoolCache<'_>,
) -> u64 {
    let before = port.stats();
    let mut stalls = 0;
    while !batch.is_empty() {
        match port.tx_burst(arena, cache, batch) {
            Ok(0) if stalls < NIC_TX_RETRIES => {
                stalls += 1;
                sluice_sys::yield_now();
            }
            Ok(0) | Err(_) => break,
            Ok(_) => stalls = 0,
        }
    }
    let left = batch.len() as u64;
    batch.drain(|h| cache.free(h));
    let after: NicStats = port.stats();
    stats.tx_packets += after.tx_packets - before.tx_packets;
    stats.tx_bytes += after.tx_bytes - before.tx_bytes;
    let refused = after.tx_errors - before.tx_errors;
    stats.tx_errors += refused + left;
    stats.rx_dropped = after.rx_dropped;
    stats.rx_oversize = after.rx_oversize;
    nic_offload_stats(stats, &after);
    refused + left
}
