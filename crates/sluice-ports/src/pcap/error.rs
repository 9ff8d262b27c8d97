//! Errors of the pcap reader, writer and replay.

use std::fmt;
use std::io;

/// Why reading or writing a pcap file failed.
///
/// Offsets are byte offsets from the start of the file of the record (its
/// 16-byte header) that was bad.
#[derive(Debug)]
#[non_exhaustive]
pub enum PcapError {
    /// Underlying I/O error (other than a short read, which is reported as
    /// one of the truncation variants).
    Io(io::Error),
    /// The file is shorter than the 24-byte file header.
    TruncatedFileHeader {
        /// Bytes that were available.
        got: usize,
    },
    /// The first four bytes are not a libpcap magic number.
    BadMagic(u32),
    /// The file is pcapng (section header block magic), which is not
    /// supported.
    PcapNg,
    /// The file header's major version is not 2.
    UnsupportedVersion {
        /// Major version read.
        major: u16,
        /// Minor version read.
        minor: u16,
    },
    /// The file ends inside a 16-byte record header.
    TruncatedRecordHeader {
        /// Offset of the record.
        offset: u64,
        /// Bytes of the record header that were available.
        got: usize,
    },
    /// The file ends inside a record's captured data.
    TruncatedRecord {
        /// Offset of the record.
        offset: u64,
        /// Captured length announced by the record header.
        expected: u32,
        /// Bytes that were available.
        got: usize,
    },
    /// A record's captured length exceeds [`super::MAX_SNAPLEN`].
    RecordTooLarge {
        /// Offset of the record.
        offset: u64,
        /// Captured length announced by the record header.
        len: u32,
    },
    /// A record's sub-second timestamp field is out of range (≥ 10^6 for
    /// microsecond files, ≥ 10^9 for nanosecond files).
    InvalidTimestamp {
        /// Offset of the record.
        offset: u64,
        /// The sub-second field read.
        fraction: u32,
    },
    /// A timestamp given to the writer does not fit the format's 32-bit
    /// seconds field.
    TimestampOutOfRange(u64),
    /// The file's link type is not one this operation supports (replay needs
    /// Ethernet).
    UnsupportedLinkType(u32),
}

impl fmt::Display for PcapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PcapError::Io(e) => write!(f, "pcap i/o error: {e}"),
            PcapError::TruncatedFileHeader { got } => {
                write!(f, "pcap file header truncated: {got} of 24 bytes")
            }
            PcapError::BadMagic(m) => write!(f, "not a pcap file: bad magic {m:#010x}"),
            PcapError::PcapNg => write!(f, "pcapng files are not supported (classic pcap only)"),
            PcapError::UnsupportedVersion { major, minor } => {
                write!(f, "unsupported pcap version {major}.{minor}")
            }
            PcapError::TruncatedRecordHeader { offset, got } => write!(
                f,
                "pcap record header at offset {offset} truncated: {got} of 16 bytes"
            ),
            PcapError::TruncatedRecord {
                offset,
                expected,
                got,
            } => write!(
                f,
                "pcap record at offset {offset} truncated: {got} of {expected} captured bytes"
            ),
            PcapError::RecordTooLarge { offset, len } => write!(
                f,
                "pcap record at offset {offset} has implausible captured length {len} (max {})",
                super::MAX_SNAPLEN
            ),
            PcapError::InvalidTimestamp { offset, fraction } => write!(
                f,
                "pcap record at offset {offset} has out-of-range sub-second timestamp {fraction}"
            ),
            PcapError::TimestampOutOfRange(ts) => {
                write!(f, "timestamp {ts} ns does not fit pcap's 32-bit seconds")
            }
            PcapError::UnsupportedLinkType(l) => {
                write!(f, "unsupported pcap link type {l} (need 1, Ethernet)")
            }
        }
    }
}

impl PcapError {
    /// Whether the file simply ends inside a record (its header or its
    /// data), as a capture cut short by a full disk or a killed writer
    /// does: the records before it are intact.
    pub fn is_truncated_record(&self) -> bool {
        matches!(
            self,
            PcapError::TruncatedRecordHeader { .. } | PcapError::TruncatedRecord { .. }
        )
    }
}

impl std::error::Error for PcapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PcapError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for PcapError {
    fn from(e: io::Error) -> Self {
        PcapError::Io(e)
    }
}
