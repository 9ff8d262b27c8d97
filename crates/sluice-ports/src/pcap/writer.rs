//! Buffered pcap writer (nanosecond resolution, Ethernet link type).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::{PcapError, LINKTYPE_ETHERNET, MAGIC_NANOS, MAX_SNAPLEN};

/// Writes classic libpcap files: native-endian, nanosecond-resolution magic
/// (`0xa1b23c4d`), version 2.4, link type Ethernet.  `tcpdump`, `tshark`
/// and Wireshark read this format.
///
/// Frames longer than the snap length are truncated (the record keeps the
/// original length).  Writes are buffered: call [`PcapWriter::flush`] (or
/// [`PcapWriter::into_inner`]) and check its result; dropping the writer
/// flushes too but cannot report errors.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    inner: W,
    snaplen: u32,
    packets: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) the file at `path` and writes the file header.
    ///
    /// `snaplen` 0 or above [`MAX_SNAPLEN`] means [`MAX_SNAPLEN`].
    pub fn create(path: impl AsRef<Path>, snaplen: u32) -> Result<Self, PcapError> {
        let file = File::create(path)?;
        Self::new(BufWriter::with_capacity(1 << 16, file), snaplen)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Wraps `inner` and writes the file header to it.
    ///
    /// `snaplen` 0 or above [`MAX_SNAPLEN`] means [`MAX_SNAPLEN`].
    pub fn new(mut inner: W, snaplen: u32) -> Result<Self, PcapError> {
        let snaplen = if snaplen == 0 || snaplen > MAX_SNAPLEN {
            MAX_SNAPLEN
        } else {
            snaplen
        };
        let mut h = [0u8; super::FILE_HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC_NANOS.to_ne_bytes());
        h[4..6].copy_from_slice(&2u16.to_ne_bytes());
        h[6..8].copy_from_slice(&4u16.to_ne_bytes());
        // thiszone (8..12) and sigfigs (12..16) stay 0.
        h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_ne_bytes());
        inner.write_all(&h)?;
        Ok(PcapWriter {
            inner,
            snaplen,
            packets: 0,
        })
    }

    /// The effective snap length.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Records written so far.
    pub fn packets_written(&self) -> u64 {
        self.packets
    }

    /// Appends one frame captured at `timestamp_ns` (nanoseconds since the
    /// epoch the reader should show; `CLOCK_MONOTONIC` values are fine).
    pub fn write_packet(&mut self, timestamp_ns: u64, frame: &[u8]) -> Result<(), PcapError> {
        let secs = u32::try_from(timestamp_ns / 1_000_000_000)
            .map_err(|_| PcapError::TimestampOutOfRange(timestamp_ns))?;
        let nanos = (timestamp_ns % 1_000_000_000) as u32;
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl = orig_len.min(self.snaplen);
        let mut h = [0u8; super::RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&secs.to_ne_bytes());
        h[4..8].copy_from_slice(&nanos.to_ne_bytes());
        h[8..12].copy_from_slice(&incl.to_ne_bytes());
        h[12..16].copy_from_slice(&orig_len.to_ne_bytes());
        self.inner.write_all(&h)?;
        self.inner.write_all(&frame[..incl as usize])?;
        self.packets += 1;
        Ok(())
    }

    /// Flushes buffered records to the underlying writer.
    pub fn flush(&mut self) -> Result<(), PcapError> {
        self.inner.flush()?;
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> Result<W, PcapError> {
        self.inner.flush()?;
        Ok(self.inner)
    }
}
