//! The IPFIX exporting process of `flow_monitor`: packs records into
//! messages bounded by the MTU, re-sends templates on a timer (RFC 7011
//! §8.4: over UDP templates are sent periodically, not withdrawn), keeps
//! the data-record sequence number and sends on a non-blocking UDP socket.

use std::io;
use std::net::{SocketAddr, UdpSocket};

use super::ipfix::{FlowRecord, MessageBuilder};

/// Export totals since the NF was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Data records in messages handed to the socket.
    pub records_exported: u64,
    /// Messages handed to the socket.
    pub messages_sent: u64,
    /// Messages the socket refused (their records are lost; the sequence
    /// number still advances so the collector sees the gap).
    pub export_errors: u64,
    /// Template sets sent.
    pub templates_sent: u64,
}

/// Exporter settings.
#[derive(Debug, Clone, Copy)]
pub struct ExportConfig {
    /// Collector address.
    pub collector: SocketAddr,
    /// Observation domain id in every message header.
    pub domain_id: u32,
    /// Path MTU towards the collector; messages stay within it after the
    /// IP and UDP headers.
    pub mtu: u16,
    /// Templates are re-sent when this much time has passed since the last
    /// time (ns).
    pub template_refresh_ns: u64,
}

/// IP + UDP header bytes to keep out of the MTU.
fn overhead(collector: &SocketAddr) -> usize {
    if collector.is_ipv4() {
        20 + 8
    } else {
        40 + 8
    }
}

/// Sends flow records to one collector.
pub struct Exporter {
    socket: UdpSocket,
    msg: MessageBuilder,
    sequence: u32,
    template_refresh_ns: u64,
    last_templates_ns: Option<u64>,
    epoch_offset_ns: u64,
    stats: ExportStats,
}

impl Exporter {
    /// Opens the socket (non-blocking, connected to the collector).
    pub fn new(cfg: &ExportConfig, epoch_offset_ns: u64) -> io::Result<Self> {
        let bind: SocketAddr = if cfg.collector.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal address")
        } else {
            "[::]:0".parse().expect("literal address")
        };
        let socket = UdpSocket::bind(bind)?;
        socket.connect(cfg.collector)?;
        // The exporter runs in the data-plane thread: it must never block.
        socket.set_nonblocking(true)?;
        let limit = usize::from(cfg.mtu).saturating_sub(overhead(&cfg.collector));
        Ok(Exporter {
            socket,
            msg: MessageBuilder::new(limit, cfg.domain_id),
            sequence: 0,
            template_refresh_ns: cfg.template_refresh_ns,
            last_templates_ns: None,
            epoch_offset_ns,
            stats: ExportStats::default(),
        })
    }

    /// Totals so far.
    pub fn stats(&self) -> ExportStats {
        self.stats
    }

    /// The local address the messages come from.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    fn templates_due(&self, now_ns: u64) -> bool {
        self.last_templates_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= self.template_refresh_ns)
    }

    fn start_message(&mut self, now_ns: u64) {
        if self.msg.is_empty() && self.templates_due(now_ns) && self.msg.add_templates() {
            self.last_templates_ns = Some(now_ns);
            self.stats.templates_sent += 1;
        }
    }

    /// Queues a record; sends the current message first if it is full.
    pub fn push(&mut self, r: &FlowRecord, now_ns: u64) {
        self.start_message(now_ns);
        if !self.msg.add_record(r) {
            self.flush(now_ns);
            self.start_message(now_ns);
            // A fresh message always has room: the limit is at least
            // MIN_MESSAGE_LEN (templates + one record).
            let _fits = self.msg.add_record(r);
            debug_assert!(_fits);
        }
    }

    /// Timer work: sends a template-only message when the refresh is due
    /// and nothing else is queued, then sends whatever is queued.
    pub fn tick(&mut self, now_ns: u64) {
        self.start_message(now_ns);
        self.flush(now_ns);
    }

    /// Sends the queued message, if any (one `send` syscall).
    pub fn flush(&mut self, now_ns: u64) {
        if self.msg.is_empty() {
            return;
        }
        let n = self.msg.records();
        let secs = (now_ns.wrapping_add(self.epoch_offset_ns) / 1_000_000_000) as u32;
        let bytes = self.msg.finish(secs, self.sequence);
        match self.socket.send(bytes) {
            Ok(_) => {
                self.stats.messages_sent += 1;
                self.stats.records_exported += u64::from(n);
            }
            Err(_) => self.stats.export_errors += 1,
        }
        self.sequence = self.sequence.wrapping_add(n);
        self.msg.clear();
    }
}
