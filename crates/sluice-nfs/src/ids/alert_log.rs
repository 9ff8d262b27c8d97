//! The bounded alert log: one JSON object per line.
//!
//! The packet path only appends a fixed-size record to a buffer sized at
//! build time (no allocation, no syscall); [`AlertLog::flush`] formats and
//! writes the buffered records with one `write` and runs at batch end when
//! the buffer is half full or a second has passed, from `tick`, and when
//! the NF stops. The file never grows past `max_bytes`: records that do
//! not fit, or that arrive while the buffer is full, are counted as
//! `alert_log_dropped` instead.
//!
//! The file is opened at the first flush, not when the NF is built (a
//! build has no side effects, `crate::output_file`): the first instance of
//! a run creates it, a restarted instance appends to it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;

/// One alert waiting to be written.
#[derive(Debug, Clone, Copy)]
pub struct AlertRecord {
    /// Packet timestamp (CLOCK_MONOTONIC ns, as every sluice timestamp).
    pub ts_ns: u64,
    /// Index of the rule in evaluation order.
    pub rule: u32,
    /// The packet was dropped (IPS mode, `drop` rule).
    pub dropped: bool,
    /// Matched across a segment boundary.
    pub stream: bool,
    /// IP protocol.
    pub proto: u8,
    /// Source address.
    pub src: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port.
    pub dst_port: u16,
}

/// What the log needs of each rule, prepared at build time.
#[derive(Debug, Clone)]
pub struct RuleMeta {
    /// `sid`.
    pub sid: u32,
    /// `rev`.
    pub rev: u32,
    /// `msg`, already escaped for a JSON string.
    pub msg_json: String,
    /// `classtype`, JSON-escaped (empty if none).
    pub classtype_json: String,
    /// The rule's action keyword.
    pub action: &'static str,
}

/// Escapes `s` for the inside of a JSON string.
pub fn json_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Where an alert log goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFile {
    /// The file.
    pub path: PathBuf,
    /// Append to it (a restarted instance) instead of starting it anew.
    pub append: bool,
}

#[derive(Debug)]
enum Out {
    /// No log configured.
    None,
    /// Not opened yet.
    Pending(LogFile),
    Open(File),
    /// Opening or writing failed: alerts are counted as dropped.
    Failed,
}

/// A buffered, size-bounded alert log (or none).
#[derive(Debug)]
pub struct AlertLog {
    out: Out,
    pending: Vec<AlertRecord>,
    line: Vec<u8>,
    written: u64,
    max_bytes: u64,
    /// Records not written (buffer full or size bound reached), not yet
    /// reported.
    dropped: u64,
    last_flush_ns: u64,
}

/// Flush at batch end after this long even if the buffer is not half full.
pub const FLUSH_INTERVAL_NS: u64 = 1_000_000_000;

impl AlertLog {
    /// A log writing to `file` (or discarding, if `None`), buffering up to
    /// `buffer` records, never growing the file past `max_bytes`.
    pub fn new(file: Option<LogFile>, buffer: usize, max_bytes: u64) -> AlertLog {
        AlertLog {
            pending: Vec::with_capacity(if file.is_some() { buffer } else { 0 }),
            line: Vec::with_capacity(if file.is_some() { 64 * 1024 } else { 0 }),
            out: file.map_or(Out::None, Out::Pending),
            written: 0,
            max_bytes,
            dropped: 0,
            last_flush_ns: 0,
        }
    }

    /// Buffers one alert (packet path: no allocation, no syscall).
    #[inline]
    pub fn record(&mut self, r: AlertRecord) {
        if matches!(self.out, Out::None) {
            return;
        }
        if self.pending.len() < self.pending.capacity() && !matches!(self.out, Out::Failed) {
            self.pending.push(r);
        } else {
            self.dropped += 1;
        }
    }

    /// Whether a flush is due at the end of a batch.
    #[inline]
    pub fn flush_due(&mut self, now_ns: u64) -> bool {
        if self.last_flush_ns == 0 {
            // The interval counts from the first batch.
            self.last_flush_ns = now_ns;
        }
        !self.pending.is_empty()
            && (self.pending.len() * 2 >= self.pending.capacity()
                || now_ns.saturating_sub(self.last_flush_ns) >= FLUSH_INTERVAL_NS)
    }

    /// Takes the count of records lost since the last call.
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }

    /// Writes the buffered records (one `write`). A write error disables
    /// the log (the rest is counted as dropped): the data path must go on.
    pub fn flush(&mut self, meta: &[RuleMeta], now_ns: u64) {
        self.last_flush_ns = now_ns;
        if self.pending.is_empty() {
            return;
        }
        self.open();
        let Out::Open(file) = &mut self.out else {
            self.dropped += self.pending.len() as u64;
            self.pending.clear();
            return;
        };
        self.line.clear();
        for r in self.pending.drain(..) {
            let Some(m) = meta.get(r.rule as usize) else {
                continue;
            };
            let start = self.line.len();
            let action = if r.dropped { "drop" } else { m.action };
            let proto = match r.proto {
                6 => "tcp",
                17 => "udp",
                1 => "icmp",
                58 => "icmpv6",
                _ => "ip",
            };
            // Writing into a Vec cannot fail.
            let _ = writeln!(
                self.line,
                "{{\"ts_ns\":{},\"sid\":{},\"rev\":{},\"msg\":\"{}\",\"classtype\":\"{}\",\"action\":\"{}\",\"stream\":{},\"proto\":\"{}\",\"src\":\"{}\",\"src_port\":{},\"dst\":\"{}\",\"dst_port\":{}}}",
                r.ts_ns, m.sid, m.rev, m.msg_json, m.classtype_json, action, r.stream, proto,
                r.src, r.src_port, r.dst, r.dst_port
            );
            if self.written + self.line.len() as u64 > self.max_bytes {
                self.line.truncate(start);
                self.dropped += 1;
            }
        }
        if self.line.is_empty() {
            return;
        }
        match file.write_all(&self.line) {
            Ok(()) => self.written += self.line.len() as u64,
            Err(_) => {
                self.dropped += self.line.iter().filter(|b| **b == b'\n').count() as u64;
                self.out = Out::Failed;
            }
        }
    }

    /// Opens a pending log: created (truncated) by the first instance of a
    /// run, appended to by a restarted one (whose size bound then counts
    /// what is already there). Called at the first flush, or earlier by a
    /// process NF before its sandbox closes.
    pub fn open(&mut self) {
        let Out::Pending(target) = &self.out else {
            return;
        };
        let opened = if target.append {
            OpenOptions::new()
                .append(true)
                .create(true)
                .open(&target.path)
                .and_then(|f| Ok((f.metadata()?.len(), f)))
        } else {
            File::create(&target.path).map(|f| (0, f))
        };
        self.out = match opened {
            Ok((len, f)) => {
                self.written = len;
                Out::Open(f)
            }
            Err(_) => Out::Failed,
        };
    }

    /// Forgets buffered records (reset).
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}
