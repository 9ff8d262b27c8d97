//! `mirror`: appends a copy of every packet to a pcap file (Click's
//! `ToDump`); the packet itself continues unchanged.
//!
//! Building a mirror touches no file: the platform builds every NF to
//! check its config (`sluice validate`, and once before every run), so
//! the build only checks that the file could be written (the path is not
//! a directory; the file, if it exists, is writable; otherwise its
//! directory exists and is writable). The file (classic pcap, nanosecond
//! timestamps, link type Ethernet) is opened when the instance first runs
//! (a process NF: before its sandbox closes, `open_handles`; inline: its
//! first batch, tick or stop): the first instance of a run creates
//! (truncates) it and writes the file header; a restarted instance (a
//! process NF rebuilt after a crash, [`Resolver::restarts`] > 0) appends
//! to it, so the file keeps every instance's records under one header.
//!
//! Records go through a buffer allocated at build time; a `write` syscall
//! happens only when the next record does not fit (one per
//! `buffer_bytes` of capture, not per packet), once a second (`tick`, so
//! the file can be read during a run) and when the NF stops or is
//! dropped, so the packet path neither allocates nor blocks per packet.
//! Every write holds whole records (the buffer is at least one record
//! long), so a crash loses the buffered records but never leaves half a
//! record for the next instance to append to. Timestamps are the packets'
//! ingress times in Unix time. An open or write error is counted and
//! capture stops (the packets still pass).
//!
//! A relative `path` resolves against the spec file's directory, like a
//! `pcap_out` port's ([`ConfigNode::resolve_path`]).
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `path` | file path | required | pcap file to write (relative: to the spec's directory) |
//! | `snaplen` | 14-65535 | `65535` | bytes kept per packet |
//! | `buffer_bytes` | 4096.. | `1048576` | write buffer (at least `16 + snaplen`) |
//!
//! Counters: `captured`, `bytes_written`, `write_errors` (this instance's).
//!
//! One instance only: with `settings.workers` above 1 the spec is refused
//! (per-worker copies would all write the one file).
//!
//! [`Resolver::restarts`]: sluice_nf::Resolver::restarts
//! [`ConfigNode::resolve_path`]: sluice_spec::ConfigNode::resolve_path

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

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

/// Bytes of the pcap file header.
const FILE_HEADER_LEN: usize = 24;
/// Bytes of a record header.
const RECORD_HEADER_LEN: usize = 16;

/// The pcap file header the mirror writes: nanosecond-resolution pcap,
/// version 2.4, link type 1 (Ethernet).
fn file_header(snaplen: u32) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h[4..8].copy_from_slice(&[2, 0, 4, 0]);
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h
}

/// Where the capture file is.
enum Out {
    /// Not opened yet: the instance has not run.
    Pending,
    /// Open; records go to it.
    Open(File),
    /// Opening or writing failed: capture has stopped.
    Failed,
}

/// The mirroring NF.
pub struct Mirror {
    path: PathBuf,
    /// A restarted instance appends to the file instead of creating it.
    append: bool,
    out: Out,
    /// Whole records waiting for the next `write`; its capacity is fixed
    /// at build time and never exceeded.
    buf: Vec<u8>,
    snaplen: u32,
    epoch_offset_ns: u64,
    captured: u64,
    bytes: u64,
    errors: u64,
}

impl Mirror {
    /// A mirror that will write to `path` once it runs: creating the file
    /// or, if `append` (a restarted instance), appending to it. Touches no
    /// file; the buffer holds `buffer_bytes`, at least one whole record.
    pub fn new(path: PathBuf, snaplen: u32, buffer_bytes: usize, append: bool) -> Mirror {
        Mirror {
            path,
            append,
            out: Out::Pending,
            buf: Vec::with_capacity(buffer_bytes.max(RECORD_HEADER_LEN + snaplen as usize)),
            snaplen,
            epoch_offset_ns: crate::flow_monitor::epoch_offset_ns(),
            captured: 0,
            bytes: 0,
            errors: 0,
        }
    }

    /// Opens the file the first time the instance runs; afterwards a
    /// no-op.
    fn ensure_open(&mut self) {
        if !matches!(self.out, Out::Pending) {
            return;
        }
        let header = file_header(self.snaplen);
        match open_capture(&self.path, self.append, &header) {
            Ok((file, write_header)) => {
                if write_header {
                    self.buf.extend_from_slice(&header);
                    self.bytes += FILE_HEADER_LEN as u64;
                }
                self.out = Out::Open(file);
            }
            Err(_) => {
                self.errors += 1;
                self.out = Out::Failed;
            }
        }
    }

    fn write(&mut self, frame: &[u8], ts_ns: u64) {
        if !matches!(self.out, Out::Open(_)) {
            return;
        }
        let cap = frame.len().min(self.snaplen as usize);
        if self.buf.len() + RECORD_HEADER_LEN + cap > self.buf.capacity() {
            self.flush();
            if !matches!(self.out, Out::Open(_)) {
                return;
            }
        }
        let t = ts_ns.wrapping_add(self.epoch_offset_ns);
        let mut hdr = [0u8; RECORD_HEADER_LEN];
        hdr[0..4].copy_from_slice(&((t / 1_000_000_000) as u32).to_le_bytes());
        hdr[4..8].copy_from_slice(&((t % 1_000_000_000) as u32).to_le_bytes());
        hdr[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        hdr[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        // Fits without growing: the buffer was flushed above if needed,
        // and it holds at least one whole record.
        self.buf.extend_from_slice(&hdr);
        self.buf.extend_from_slice(&frame[..cap]);
        self.captured += 1;
        self.bytes += (RECORD_HEADER_LEN + cap) as u64;
    }

    /// Writes out the buffer (whole records only).
    pub fn flush(&mut self) {
        if let Out::Open(file) = &mut self.out {
            if !self.buf.is_empty() && file.write_all(&self.buf).is_err() {
                self.errors += 1;
                self.out = Out::Failed;
            }
        }
        self.buf.clear();
    }
}

/// Opens the capture file: created (truncated) for the first instance,
/// opened for appending for a restarted one. Returns the file and whether
/// the file header still has to be written: always for a new file; for an
/// appended one only if the file is empty or does not start with
/// `header` (then it is not this mirror's capture and starts anew).
fn open_capture(path: &Path, append: bool, header: &[u8]) -> std::io::Result<(File, bool)> {
    if !append {
        return Ok((File::create(path)?, true));
    }
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(path)?;
    let mut head = [0u8; FILE_HEADER_LEN];
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    if got == head.len() && head[..] == *header {
        return Ok((file, false));
    }
    if got > 0 {
        file.set_len(0)?;
    }
    Ok((file, true))
}

impl NetworkFunction for Mirror {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        self.ensure_open();
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

    fn open_handles(&mut self) {
        self.ensure_open();
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some(1_000_000_000)
    }

    /// Once a second the buffer goes to the file, so it can be read live.
    fn tick(&mut self, ctx: &mut Context<'_>) {
        self.ensure_open();
        self.flush();
        self.publish(ctx);
    }

    /// Creates the file even if no packet came (a header-only capture).
    fn stop(&mut self, ctx: &mut Context<'_>) {
        self.ensure_open();
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
    /// Writes out what is buffered; an instance that never ran (built only
    /// to check its config) opens nothing.
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
            "NF {}: mirror writes one pcap file, so it cannot run as {replicas} copies side by side (settings.workers × replicas; they would overwrite each other's records); run it as one",
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
    if cfg.path.is_empty() {
        return Err(ctx.config.error_at_path("path", "path must not be empty"));
    }
    let path = ctx.config.resolve_path(&cfg.path);
    crate::output_file::check_path(&path).map_err(|m| {
        let hint = if Path::new(&cfg.path).is_relative() && !ctx.config.source().is_generated() {
            " (a relative path resolves against the spec file's directory)"
        } else {
            ""
        };
        ctx.config.error_at_path("path", format!("{m}{hint}"))
    })?;
    Ok(Box::new(Mirror::new(
        path,
        cfg.snaplen,
        cfg.buffer_bytes,
        ctx.resolver.restarts() > 0,
    )))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "mirror",
    summary: "copies every packet to a pcap file; the packet continues",
    drop_reasons: &[],
    counters: &["captured", "bytes_written", "write_errors"],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
