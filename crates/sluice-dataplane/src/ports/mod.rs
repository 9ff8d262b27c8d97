//! Ports as the worker drives them: pull batches from input ports into
//! arena buffers, push batches out of output ports and free the buffers.

use std::fs::File;
use std::io::BufWriter;

use sluice_mem::{Arena, HandleBatch, PoolCache, DATA_ROOM};
use sluice_nic::NicPort;
use sluice_ports::generator::{GeneratorConfig, IpVersionChoice, Protocol, SizeSpec};
use sluice_ports::pcap::{Pacer, PcapReplay};
use sluice_ports::{Generator, PcapWriter, Shard, Sink, SinkConfig, SinkReport};
use sluice_spec::{GeneratorSpec, PortKind};

use crate::offload::{self, OffloadStats, PortOffload};

mod nic;
mod stats;

use nic::{nic_device_stats, nic_tx};
pub use stats::PortStats;

enum PortIo {
    Generator(Box<Generator>),
    Sink(Box<Sink>),
    PcapIn {
        replay: Box<PcapReplay>,
        pacer: Pacer,
    },
    PcapOut(Box<PcapWriter<BufWriter<File>>>),
    Nic {
        port: Box<dyn NicPort>,
        /// A receive error was already reported (report once, not per poll).
        rx_failed: bool,
    },
}

/// A running port.
pub struct PortRt {
    /// Port name.
    pub name: String,
    /// Port kind name.
    pub kind: &'static str,
    /// How a NIC port moves frames ([`NicPort::mode`]).
    pub mode: Option<String>,
    /// Counters.
    pub stats: PortStats,
    /// Not read (`sluice migrate`): frames wait in the interface's queue.
    /// A port on handed-over descriptors opens paused, so its NFs take
    /// their state before its first frame.
    pub paused: bool,
    io: PortIo,
    realtime_offset_ns: u64,
    /// Where this port resolves offloaded packets.
    off: PortOffload,
}

/// A port that cannot be opened.
#[derive(Debug)]
pub struct PortError(pub String);

impl std::fmt::Display for PortError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PortError {}

fn generator_config(g: &GeneratorSpec, duration_ns: Option<u64>, seed: u64) -> GeneratorConfig {
    use sluice_spec::{IpVersionChoice as V, Protocol as P, SizeSpec as S};
    GeneratorConfig {
        flows: g.flows,
        protocol: match g.protocol {
            P::Udp => Protocol::Udp,
            P::Tcp => Protocol::Tcp,
            P::Mixed => Protocol::Mixed,
        },
        ip_version: match g.ip_version {
            V::V4 => IpVersionChoice::V4,
            V::V6 => IpVersionChoice::V6,
            V::Mixed => IpVersionChoice::Mixed,
        },
        size: match g.size {
            S::Fixed(n) => SizeSpec::Fixed(n),
            S::Imix => SizeSpec::Imix,
            S::Datacenter => SizeSpec::Datacenter,
        },
        rate_pps: g.rate_pps,
        count: g.count,
        duration_ns,
        packets_per_flow: g.packets_per_flow,
        src_prefix: g.src_prefix,
        dst_prefix: g.dst_prefix,
        src_ports: (g.src_ports.lo, g.src_ports.hi),
        dst_ports: (g.dst_ports.lo, g.dst_ports.hi),
        seed,
        ..GeneratorConfig::default()
    }
}

fn realtime_offset_ns() -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    wall.saturating_sub(sluice_sys::monotonic_ns())
}

impl PortRt {
    /// Opens port `name` of kind `kind`; generators stop after `duration_ns`
    /// and send the flows of `shard`.
    pub fn open(
        name: &str,
        kind: &PortKind,
        (duration_ns, sink_flows): (Option<u64>, usize),
        shard: Shard,
        arena: &Arena,
    ) -> Result<PortRt, PortError> {
        let err = |m: String| PortError(format!("port {name}: {m}"));
        let io = match kind {
            PortKind::Generator(g) => {
                let cfg = GeneratorConfig {
                    shard,
                    ..generator_config(g, duration_ns, 0x5eed)
                };
                let g = Generator::new(cfg).map_err(|e| err(e.to_string()))?;
                PortIo::Generator(Box::new(g))
            }
            PortKind::Sink(_) => PortIo::Sink(Box::new(Sink::new(SinkConfig {
                flow_capacity: sink_flows.max(1024),
                tcp_capacity: sink_flows.max(1024),
                ..SinkConfig::default()
            }))),
            PortKind::PcapIn(p) => {
                let loops = if p.loops == 0 { None } else { Some(p.loops as u64) };
                let replay = PcapReplay::load(&p.path, loops)
                    .map_err(|e| err(format!("cannot read {}: {e}", p.path.display())))?;
                // As tcpdump and tshark do with a capture cut short: warn,
                // and replay what is intact (sluice-ports does no logging).
                if let Some(why) = replay.truncation() {
                    tracing::warn!(
                        "warning: port {name}: {}: {why}; replaying the {} intact records",
                        p.path.display(),
                        replay.len()
                    );
                }
                let pacer = match p.pace {
                    Some(speed) => Pacer::new(speed),
                    None => Pacer::unpaced(),
                };
                PortIo::PcapIn {
                    replay: Box::new(replay),
                    pacer,
                }
            }
            PortKind::PcapOut(p) => {
                let w = PcapWriter::create(&p.path, p.snaplen)
                    .map_err(|e| err(format!("cannot create {}: {e}", p.path.display())))?;
                PortIo::PcapOut(Box::new(w))
            }
            other => match sluice_nic::open(
                other,
                u16::try_from(shard.count).unwrap_or(u16::MAX),
                arena,
            ) {
                Ok(Some(port)) => PortIo::Nic {
                    port,
                    rx_failed: false,
                },
                Ok(None) => {
                    return Err(err(format!(
                        "port kind `{}` is not supported by this build (supported: generator, sink, pcap_in, pcap_out, af_packet, tap, af_xdp; dpdk needs a build with `--features dpdk`)",
                        other.kind_name()
                    )))
                }
                Err(e) => return Err(err(e.0)),
            },
        };
        let stats = PortStats {
            truncated_records: match &io {
                PortIo::PcapIn { replay, .. } => replay.truncated_records(),
                _ => 0,
            },
            ..PortStats::default()
        };
        let mode = match &io {
            PortIo::Nic { port, .. } => port.mode(),
            _ => None,
        };
        let paused = matches!(&io, PortIo::Nic { port, .. } if port.adopted());
        Ok(PortRt {
            name: name.to_string(),
            kind: kind.kind_name(),
            mode,
            stats,
            paused,
            io,
            realtime_offset_ns: realtime_offset_ns(),
            off: PortOffload::default(),
        })
    }

    /// The descriptors another daemon takes over to run this port on;
    /// empty for a port that cannot move.
    pub fn handover(&self) -> Vec<std::os::fd::RawFd> {
        match &self.io {
            PortIo::Nic { port, .. } => port.handover(),
            _ => Vec::new(),
        }
    }

    /// Whether this port takes offloaded packets as they are (a NIC port
    /// with `offload: true`).
    pub fn offloads(&self) -> bool {
        matches!(&self.io, PortIo::Nic { port, .. } if port.offloads())
    }

    /// Sets where this port resolves offloaded packets
    /// ([`offload::plan_ports`]).
    pub fn set_offload_plan(&mut self, rx_tx: (bool, bool)) {
        offload::configure(&mut self.off, rx_tx);
    }

    /// Frees every buffer the port holds: received frames not delivered
    /// yet (super-packets being cut on receive) and what a NIC lent the
    /// kernel (its I/O stops). Call once, when the port is removed or the
    /// run ends.
    pub fn release_held(&mut self, cache: &mut PoolCache<'_>) {
        self.off.release(cache);
        if let PortIo::Nic { port, .. } = &mut self.io {
            if let Err(e) = port.release(cache) {
                tracing::error!("port {}: {e}", self.name);
            }
        }
    }

    /// The counters as reported: what only a NIC's device or kernel
    /// counts (drops, lent buffers, device errors) is read now, not per
    /// packet batch.
    pub fn report_stats(&self) -> PortStats {
        let mut s = self.stats.clone();
        s.paused = self.paused;
        if let PortIo::Nic { port, .. } = &self.io {
            nic_device_stats(port.as_ref(), &mut s);
        }
        s
    }

    /// Whether this port produces packets.
    pub fn is_input(&self) -> bool {
        matches!(
            self.io,
            PortIo::Generator(_) | PortIo::PcapIn { .. } | PortIo::Nic { .. }
        )
    }

    /// The descriptor a NIC port signals incoming frames on (for an idle
    /// worker to sleep on).
    pub fn rx_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.io {
            PortIo::Nic { port, .. } => port.rx_fd(),
            _ => None,
        }
    }

    /// Whether an input port has nothing more to give.
    pub fn input_done(&self, now_ns: u64) -> bool {
        match &self.io {
            PortIo::Generator(g) => g.is_finished(now_ns),
            PortIo::PcapIn { replay, .. } => replay.peek().is_none(),
            // A live interface is never exhausted.
            PortIo::Nic { .. } => false,
            _ => true,
        }
    }

    /// Receives up to `max` packets into `out`; returns how many.
    #[inline]
    pub fn rx(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        out: &mut HandleBatch,
        max: usize,
        now_ns: u64,
    ) -> usize {
        let max = max.min(sluice_mem::MAX_BATCH - out.len());
        let mut n = 0;
        match &mut self.io {
            PortIo::Generator(g) => {
                let due = g.due(now_ns, max);
                while n < due {
                    let Some(mut h) = cache.alloc() else {
                        self.stats.rx_no_buffer += 1;
                        break;
                    };
                    let mut p = arena.pkt(&mut h);
                    p.reset(0);
                    let len = g.write_next(p.room_mut(), now_ns);
                    if len == 0 {
                        cache.free(h);
                        break;
                    }
                    p.set_len(len);
                    p.set_timestamp_ns(now_ns);
                    self.stats.rx_bytes += len as u64;
                    let _ = out.push(h);
                    n += 1;
                }
            }
            PortIo::PcapIn { replay, pacer } => {
                while n < max {
                    let Some((ts, frame)) = replay.peek() else {
                        break;
                    };
                    if !pacer.is_due(ts, now_ns) {
                        break;
                    }
                    if frame.len() > DATA_ROOM {
                        self.stats.rx_oversize += 1;
                        replay.advance();
                        continue;
                    }
                    let Some(mut h) = cache.alloc() else {
                        self.stats.rx_no_buffer += 1;
                        break;
                    };
                    let mut p = arena.pkt(&mut h);
                    p.reset(frame.len());
                    p.data_mut().copy_from_slice(frame);
                    p.set_timestamp_ns(now_ns);
                    self.stats.rx_bytes += frame.len() as u64;
                    replay.advance();
                    let _ = out.push(h);
                    n += 1;
                }
            }
            PortIo::Nic { port, rx_failed } => {
                let start = out.len();
                let got = if self.off.resolve_rx {
                    let st = &mut self.stats.offload;
                    self.off.rx(port.as_mut(), arena, cache, out, max, st)
                } else {
                    port.rx_burst(arena, cache, out, max)
                };
                match got {
                    Ok(_) => *rx_failed = false,
                    Err(e) if !*rx_failed => {
                        *rx_failed = true;
                        tracing::error!("port {}: {e}", self.name);
                    }
                    Err(_) => {}
                }
                for i in start..out.len() {
                    if let Some(h) = out.get_mut(i) {
                        let mut p = arena.pkt(h);
                        p.set_timestamp_ns(now_ns);
                        self.stats.rx_bytes += p.len() as u64;
                    }
                }
                n = out.len() - start;
            }
            _ => {}
        }
        self.stats.rx_packets += n as u64;
        n
    }

    /// Transmits every packet of `batch` and frees its buffers. Returns
    /// how many a NIC refused or could not take, or were refused for bad
    /// offload state (to count as `port_tx_error` drops).
    #[inline]
    pub fn tx(
        &mut self,
        arena: &Arena,
        batch: &mut HandleBatch,
        cache: &mut PoolCache<'_>,
        now_ns: u64,
    ) -> u64 {
        let wall = self.realtime_offset_ns;
        if self.stats.first_tx_unix_ns == 0 && !batch.is_empty() {
            self.stats.first_tx_unix_ns = now_ns + wall;
        }
        if self.off.resolve_tx && offload::any_offloaded(arena, batch) {
            let (io, stats) = (&mut self.io, &mut self.stats);
            let mut st = OffloadStats::default();
            let lost = self.off.tx(arena, batch, cache, &mut st, |b, cache| {
                tx_plain(io, stats, wall, arena, b, cache, now_ns)
            });
            self.stats.offload += &st;
            return lost;
        }
        tx_plain(
            &mut self.io,
            &mut self.stats,
            wall,
            arena,
            batch,
            cache,
            now_ns,
        )
    }

    /// Flushes buffered output (pcap files), and makes the NIC counters
    /// that [`PortRt::report_stats`] reads next final.
    pub fn flush(&mut self) -> Result<(), PortError> {
        if let PortIo::Nic { .. } = &self.io {
            // A port refreshes slow kernel and device counters at most
            // every millisecond (af_packet's ring drops): wait that out
            // once so the final figures are exact.
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if let PortIo::PcapOut(w) = &mut self.io {
            w.flush()
                .map_err(|e| PortError(format!("port {}: {e}", self.name)))?;
        }
        Ok(())
    }

    /// The sink's measurements, for sink ports.
    pub fn sink_report(&self) -> Option<SinkReport> {
        match &self.io {
            PortIo::Sink(s) => Some(s.report()),
            _ => None,
        }
    }

    /// The sink itself (to merge latency histograms).
    pub fn sink(&self) -> Option<&Sink> {
        match &self.io {
            PortIo::Sink(s) => Some(s),
            _ => None,
        }
    }
}

/// Transmits `batch` as it is (see [`PortRt::tx`]).
fn tx_plain(
    io: &mut PortIo,
    stats: &mut PortStats,
    realtime_offset_ns: u64,
    arena: &Arena,
    batch: &mut HandleBatch,
    cache: &mut PoolCache<'_>,
    now_ns: u64,
) -> u64 {
    if let PortIo::Nic { port, .. } = io {
        return nic_tx(port.as_mut(), stats, arena, batch, cache);
    }
    // Latency ends when the batch leaves, not when the loop pass began:
    // one fresh clock read per batch.
    let now_ns = if matches!(io, PortIo::Sink(_)) {
        sluice_sys::monotonic_ns().max(now_ns)
    } else {
        now_ns
    };
    let wall = now_ns + realtime_offset_ns;
    batch.drain(|mut h| {
        let p = arena.pkt(&mut h);
        let data = p.data();
        stats.tx_packets += 1;
        stats.tx_bytes += data.len() as u64;
        match io {
            PortIo::Sink(s) => s.observe(data, p.timestamp_ns(), now_ns),
            PortIo::PcapOut(w) => stats.tx_errors += u64::from(w.write_packet(wall, data).is_err()),
            _ => {}
        }
        cache.free(h);
    });
    0
}
