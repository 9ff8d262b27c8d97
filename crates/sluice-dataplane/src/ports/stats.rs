//! The counters of one port, as the report and the metrics give them.

use serde::Serialize;

use crate::offload::OffloadStats;

/// Counters of one port.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct PortStats {
    /// Packets received (input ports).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets transmitted (output ports).
    pub tx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Transmit failures (e.g. a pcap write error).
    pub tx_errors: u64,
    /// Input frames dropped for not fitting a buffer.
    pub rx_oversize: u64,
    /// Input frames not read because the buffer pool was empty.
    pub rx_no_buffer: u64,
    /// Buffers the port has lent the kernel now (a gauge: an AF_XDP
    /// port's fill rings and frames in flight); they come back when the
    /// port closes.
    #[serde(default)]
    pub held_buffers: u64,
    /// Frames the kernel or device dropped before sluice saw them (NIC
    /// ports: a full receive ring).
    pub rx_dropped: u64,
    /// `pcap_in`: records left out because the file ends inside them (a
    /// capture cut short; the intact records before it are replayed).
    pub truncated_records: u64,
    /// Super-packets and partial checksums (see [`crate::offload`]).
    #[serde(flatten)]
    pub offload: OffloadStats,
    /// When the port first transmitted, ns since the Unix epoch (0: never):
    /// how long a new chain took to carry traffic (`sluice bench deploy`).
    #[serde(default)]
    pub first_tx_unix_ns: u64,
    /// The port is not read (a move to another daemon is under way,
    /// `sluice migrate`): frames wait in its interface.
    #[serde(default)]
    pub paused: bool,
}

/// Adds another copy's counters (the same port run by several workers).
/// Next to the struct so a new counter cannot be left out of the sum.
impl std::ops::AddAssign<&PortStats> for PortStats {
    fn add_assign(&mut self, t: &PortStats) {
        self.rx_packets += t.rx_packets;
        self.rx_bytes += t.rx_bytes;
        self.tx_packets += t.tx_packets;
        self.tx_bytes += t.tx_bytes;
        self.tx_errors += t.tx_errors;
        self.rx_oversize += t.rx_oversize;
        self.rx_no_buffer += t.rx_no_buffer;
        self.held_buffers += t.held_buffers;
        self.rx_dropped += t.rx_dropped;
        self.truncated_records += t.truncated_records;
        self.offload += &t.offload;
        self.paused |= t.paused;
        // The earliest of the copies that transmitted at all.
        self.first_tx_unix_ns = match (self.first_tx_unix_ns, t.first_tx_unix_ns) {
            (0, b) => b,
            (a, 0) => a,
            (a, b) => a.min(b),
        };
    }
}
