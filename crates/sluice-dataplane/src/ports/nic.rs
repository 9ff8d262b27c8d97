//! Transmitting on a NIC port: retries while the interface takes nothing,
//! and the port's counters taken from the NIC's: its own around each
//! batch, those only the device or kernel keeps when they are reported.

use sluice_mem::{Arena, HandleBatch, PoolCache};
use sluice_nic::{NicPort, NicStats};

use super::stats::PortStats;
use crate::offload::OffloadDrops;

/// How many times a NIC transmit is retried while the interface takes
/// nothing (a full socket buffer or ring) before the rest of the batch is
/// dropped as `port_tx_error`; each retry yields the CPU once (≈ 1 µs).
const NIC_TX_RETRIES: u32 = 64;

/// Copies a NIC's offload counters (cumulative) into the port's.
fn nic_offload_stats(stats: &mut PortStats, s: &NicStats) {
    stats.offload.gso_rx = s.rx_gso;
    stats.offload.gso_tx = s.tx_gso;
    stats.offload.nic_offload_drops = OffloadDrops(s.offload_errors);
}

/// Sends `batch` on a NIC, retrying what the interface cannot take yet;
/// updates `stats` from the port's own counters (no device read per
/// batch) and returns the frames lost.
pub(super) fn nic_tx(
    port: &mut dyn NicPort,
    stats: &mut PortStats,
    arena: &Arena,
    batch: &mut HandleBatch,
    cache: &mut PoolCache<'_>,
) -> u64 {
    let before = port.counters();
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
    let after: NicStats = port.counters();
    stats.tx_packets += after.tx_packets - before.tx_packets;
    stats.tx_bytes += after.tx_bytes - before.tx_bytes;
    let refused = after.tx_errors - before.tx_errors;
    stats.tx_errors += refused + left;
    refused + left
}

/// Overlays what only the device or the kernel counts on a NIC port's
/// `stats`, read now (at most a millisecond old): drops before the port
/// saw a frame, oversize frames, offload errors, buffers it lent, and the
/// device's own transmit errors on top of those the port refused.
pub(super) fn nic_device_stats(port: &dyn NicPort, stats: &mut PortStats) {
    let d = port.stats();
    stats.rx_dropped = d.rx_dropped;
    stats.rx_oversize = d.rx_oversize;
    stats.held_buffers = d.held;
    stats.tx_errors += d.tx_errors.saturating_sub(port.counters().tx_errors);
    nic_offload_stats(stats, &d);
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_nic::NicError;

    /// A port whose own counters and device counters differ.
    struct Counted {
        own: NicStats,
        device: NicStats,
    }

    impl NicPort for Counted {
        fn kind(&self) -> &'static str {
            "counted"
        }
        fn rx_burst(
            &mut self,
            _: &Arena,
            _: &mut PoolCache<'_>,
            _: &mut HandleBatch,
            _: usize,
        ) -> Result<usize, NicError> {
            Ok(0)
        }
        fn tx_burst(
            &mut self,
            _: &Arena,
            _: &mut PoolCache<'_>,
            _: &mut HandleBatch,
        ) -> Result<usize, NicError> {
            Ok(0)
        }
        fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
            None
        }
        fn stats(&self) -> NicStats {
            self.device
        }
        fn counters(&self) -> NicStats {
            self.own
        }
    }

    /// What only the device counts reaches the report, without the port
    /// transmitting, and reading it again does not count it twice.
    #[test]
    fn device_counters_are_overlaid_on_the_ports_own_once() {
        let port = Counted {
            own: NicStats {
                tx_errors: 2,
                ..NicStats::default()
            },
            device: NicStats {
                rx_dropped: 7,
                rx_oversize: 1,
                tx_errors: 5,
                held: 3,
                rx_gso: 4,
                ..NicStats::default()
            },
        };
        // What `nic_tx` kept: the two frames the port refused.
        let kept = PortStats {
            tx_errors: 2,
            ..PortStats::default()
        };
        for _ in 0..2 {
            let mut s = kept.clone();
            nic_device_stats(&port, &mut s);
            assert_eq!(
                (s.rx_dropped, s.rx_oversize, s.tx_errors, s.held_buffers),
                (7, 1, 5, 3)
            );
            assert_eq!(s.offload.gso_rx, 4);
        }
    }
}
