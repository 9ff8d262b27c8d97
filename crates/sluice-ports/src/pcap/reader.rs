//! Streaming pcap reader.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::{
    PcapError, FILE_HEADER_LEN, MAGIC_MICROS, MAGIC_NANOS, MAX_SNAPLEN, RECORD_HEADER_LEN,
};

/// Resolution of the record timestamps of a pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsResolution {
    /// Microseconds (magic `0xa1b2c3d4`).
    Micros,
    /// Nanoseconds (magic `0xa1b23c4d`).
    Nanos,
}

/// The decoded 24-byte pcap file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapHeader {
    /// Major version (always 2 for accepted files).
    pub version_major: u16,
    /// Minor version (normally 4).
    pub version_minor: u16,
    /// Snap length announced by the file.
    pub snaplen: u32,
    /// Link type (1 = Ethernet).
    pub linktype: u32,
    /// Timestamp resolution.
    pub resolution: TsResolution,
    /// Whether the file is big-endian.
    pub big_endian: bool,
}

/// One record, borrowed from the reader's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcapPacket<'a> {
    /// Capture timestamp in nanoseconds since the epoch of the file.
    pub timestamp_ns: u64,
    /// Original length of the packet on the wire (may exceed `data.len()`
    /// when the capture was truncated to the snap length).
    pub orig_len: u32,
    /// Captured bytes.
    pub data: &'a [u8],
}

/// Streaming reader of classic pcap files.
///
/// [`PcapReader::next_packet`] lends each record from one reused buffer (no
/// allocation per packet once the buffer has grown to the largest record);
/// the [`Iterator`] impl yields owned `(timestamp_ns, bytes)` pairs for
/// convenience.  Malformed input gives a [`PcapError`], never a panic, and
/// after the first error the reader stays finished.
#[derive(Debug)]
pub struct PcapReader<R> {
    inner: R,
    header: PcapHeader,
    buf: Vec<u8>,
    offset: u64,
    done: bool,
}

impl PcapReader<BufReader<File>> {
    /// Opens the pcap file at `path` and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        let file = File::open(path)?;
        Self::new(BufReader::with_capacity(1 << 16, file))
    }
}

/// Reads into `buf` until it is full or EOF; returns the bytes read.
fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> PcapReader<R> {
    /// Wraps `inner` and reads and validates the file header.
    pub fn new(mut inner: R) -> Result<Self, PcapError> {
        let mut h = [0u8; FILE_HEADER_LEN];
        let got = read_full(&mut inner, &mut h)?;
        if got < 4 {
            return Err(PcapError::TruncatedFileHeader { got });
        }
        let magic_be = u32::from_be_bytes([h[0], h[1], h[2], h[3]]);
        let (big_endian, resolution) = match (magic_be, magic_be.swap_bytes()) {
            (MAGIC_MICROS, _) => (true, TsResolution::Micros),
            (MAGIC_NANOS, _) => (true, TsResolution::Nanos),
            (_, MAGIC_MICROS) => (false, TsResolution::Micros),
            (_, MAGIC_NANOS) => (false, TsResolution::Nanos),
            (0x0a0d_0d0a, _) => return Err(PcapError::PcapNg),
            _ => return Err(PcapError::BadMagic(magic_be)),
        };
        if got < FILE_HEADER_LEN {
            return Err(PcapError::TruncatedFileHeader { got });
        }
        let u16_at = |i: usize| {
            let b = [h[i], h[i + 1]];
            if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let u32_at = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let header = PcapHeader {
            version_major: u16_at(4),
            version_minor: u16_at(6),
            snaplen: u32_at(16),
            // The upper bits of the link-type field carry FCS information
            // (pcap-linktype(7)); the link type proper is the low 28 bits.
            linktype: u32_at(20) & 0x0fff_ffff,
            resolution,
            big_endian,
        };
        if header.version_major != 2 {
            return Err(PcapError::UnsupportedVersion {
                major: header.version_major,
                minor: header.version_minor,
            });
        }
        Ok(PcapReader {
            inner,
            header,
            buf: Vec::new(),
            offset: FILE_HEADER_LEN as u64,
            done: false,
        })
    }

    /// The file header.
    pub fn header(&self) -> &PcapHeader {
        &self.header
    }

    /// Reads the next record: `Ok(None)` at a clean end of file (the file
    /// ends exactly at a record boundary).
    pub fn next_packet(&mut self) -> Result<Option<PcapPacket<'_>>, PcapError> {
        if self.done {
            return Ok(None);
        }
        match self.read_record() {
            Ok(Some((timestamp_ns, orig_len, len))) => Ok(Some(PcapPacket {
                timestamp_ns,
                orig_len,
                data: &self.buf[..len],
            })),
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Reads one record into `self.buf`: (timestamp, orig_len, captured len).
    fn read_record(&mut self) -> Result<Option<(u64, u32, usize)>, PcapError> {
        let offset = self.offset;
        let mut h = [0u8; RECORD_HEADER_LEN];
        let got = read_full(&mut self.inner, &mut h)?;
        if got == 0 {
            return Ok(None);
        }
        if got < RECORD_HEADER_LEN {
            return Err(PcapError::TruncatedRecordHeader { offset, got });
        }
        let be = self.header.big_endian;
        let u32_at = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if be {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (secs, frac, incl_len, orig_len) = (u32_at(0), u32_at(4), u32_at(8), u32_at(12));
        let frac_ns = match self.header.resolution {
            TsResolution::Micros if frac < 1_000_000 => u64::from(frac) * 1_000,
            TsResolution::Nanos if frac < 1_000_000_000 => u64::from(frac),
            _ => {
                return Err(PcapError::InvalidTimestamp {
                    offset,
                    fraction: frac,
                })
            }
        };
        if incl_len > MAX_SNAPLEN {
            return Err(PcapError::RecordTooLarge {
                offset,
                len: incl_len,
            });
        }
        let len = incl_len as usize;
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        let got = read_full(&mut self.inner, &mut self.buf[..len])?;
        if got < len {
            return Err(PcapError::TruncatedRecord {
                offset,
                expected: incl_len,
                got,
            });
        }
        self.offset += (RECORD_HEADER_LEN + len) as u64;
        let ts = u64::from(secs) * 1_000_000_000 + frac_ns;
        Ok(Some((ts, orig_len, len)))
    }

    /// Returns the wrapped reader.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read + Seek> PcapReader<R> {
    /// Seeks back to the first record, e.g. to replay the file in a loop.
    pub fn rewind(&mut self) -> Result<(), PcapError> {
        self.inner.seek(SeekFrom::Start(FILE_HEADER_LEN as u64))?;
        self.offset = FILE_HEADER_LEN as u64;
        self.done = false;
        Ok(())
    }
}

impl<R: Read> Iterator for PcapReader<R> {
    /// `(timestamp_ns, captured bytes)`.
    type Item = Result<(u64, Vec<u8>), PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_packet() {
            Ok(Some(p)) => Some(Ok((p.timestamp_ns, p.data.to_vec()))),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl<R: Read> std::iter::FusedIterator for PcapReader<R> {}
