//! `mirror`: appends a copy of every packet to a pcap file (Click's
//! `ToDump`); the packet itself continues unchanged.
//!
//! The file (classic pcap, nanosecond timestamps, link type Ethernet) is
//! created at build time. Records go through a buffer allocated at build
//! time; a `write` syscall happens only when it is full (one per
//! `buffer_bytes` of capture, not per packet), once a second (`tick`, so
//! the file can be read during a run) and when the NF stops or is dropped,
//! so the packet path neither allocates nor blocks per packet.
//! Timestamps are the packets' ingress times in Unix time. A write error
//! is counted and capture stops (the packets still pass).
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `path` | file path | required | pcap file to write (truncated) |
//! | `snaplen` | 14-65535 | `65535` | bytes kept per packet |
//! | `buffer_bytes` | 4096.. | `1048576` | write buffer |
//!
//! Counters: `captured`, `bytes_written`, `write_errors`.
//!
//! One instance only: with `settings.workers` above 1 the spec is refused
//! (per-worker copies would all write the one file).

use std::fs::File;
use std::io::{BufWriter, Write};

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, NetworkFunction, NfType};
use sluice_spec::SpecError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    path: String,
    #[serde(default = "d_snap")]
    snaplen: u32,
    #[serde(default = "d_buf")]
    buffer_bytes: usize,
}

fn d_snap() -> u32 {
    65535
}
fn d_buf() -> usize {
    1 << 20
}

/// The mirroring NF.
pub struct Mirror {
    out: Option<BufWriter<File>>,
    snaplen: u32,
    epoch_offset_ns: u64,
    captured: u64,
    bytes: u64,
    errors: u64,
}

impl Mirror {
    /// A mirror writing to `path`.
    pub fn create(path: &str, snaplen: u32, buffer_bytes: usize) -> std::io::Result<Mirror> {
        let mut out = BufWriter::with_capacity(buffer_bytes, File::create(path)?);
        // Nanosecond-resolution pcap, version 2.4, link type 1 (Ethernet).
        out.write_all(&0xa1b2_3c4du32.to_le_bytes())?;
        out.write_all(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0])?;
        out.write_all(&snaplen.to_le_bytes())?;
        out.write_all(&1u32.to_le_bytes())?;
        Ok(Mirror {
            out: Some(out),
            snaplen,
            epoch_offset_ns: crate::flow_monitor::epoch_offset_ns(),
            captured: 0,
            bytes: 24,
            errors: 0,
        })
    }

    fn write(&mut self, frame: &[u8], ts_ns: u64) {
        let Some(out) = self.out.as_mut() else { return };
        let cap = frame.len().min(self.snaplen as usize);
        let t = ts_ns.wrapping_add(self.epoch_offset_ns);
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        hdr[4..8].copy_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        hdr[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        hdr[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        let r = out
            .write_all(&hdr)
            .and_then(|_| out.write_all(&frame[..cap]));
        match r {
            Ok(()) => {
                self.captured += 1;
                self.bytes += 16 + cap as u64;
            }
            Err(_) => {
                self.errors += 1;
                self.out = None;
            }
        }
    }

    /// Writes out the buffer.
    pub fn flush(&mut self) {
        if let Some(out) = self.out.as_mut() {
            if out.flush().is_err() {
                self.errors += 1;
                self.out = None;
            }
        }
    }
}

impl NetworkFunction for Mirror {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        let now = ctx.now_ns();
        batch.for_each(|p| {
            let ts = match p.timestamp_ns() {
                0 => now,
                t => t,
            };
            self.write(p.data(), ts);
        });
        self.publish(ctx);
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some(1_000_000_000)
    }

    /// Once a second the buffer goes to the file, so it can be read live.
    fn tick(&mut self, ctx: &mut Context<'_>) {
        self.flush();
        self.publish(ctx);
    }

    fn stop(&mut self, ctx: &mut Context<'_>) {
        self.flush();
        self.publish(ctx);
    }
}

impl Mirror {
    fn publish(&self, ctx: &mut Context<'_>) {
        ctx.set_gauge(0, self.captured);
        ctx.set_gauge(1, self.bytes);
        ctx.set_gauge(2, self.errors);
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.flush();
    }
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    let cfg: Config = ctx.config.deserialize()?;
    let replicas = ctx.resolver.replicas();
    if replicas > 1 {
        // Each copy would create (truncate) the same file and write it
        // from offset 0 through its own descriptor: the copies overwrite
        // each other's records, while the counters add them all up.
        return Err(ctx.config.error(format!(
            "NF {}: mirror writes one pcap file, so it cannot run as {replicas} per-worker copies (they would overwrite each other's records); set settings.workers: 1",
            ctx.name
        )));
    }
    if !(14..=65535).contains(&cfg.snaplen) {
        return Err(ctx
            .config
            .error_at_path("snaplen", "snaplen must be 14-65535"));
    }
    if cfg.buffer_bytes < 4096 {
        return Err(ctx
            .config
            .error_at_path("buffer_bytes", "buffer_bytes must be at least 4096"));
    }
    let m = Mirror::create(&cfg.path, cfg.snaplen, cfg.buffer_bytes).map_err(|e| {
        ctx.config
            .error_at_path("path", format!("cannot create `{}`: {e}", cfg.path))
    })?;
    Ok(Box::new(m))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "mirror",
    summary: "copies every packet to a pcap file; the packet continues",
    drop_reasons: &[],
    counters: &["captured", "bytes_written", "write_errors"],
    build,
};
