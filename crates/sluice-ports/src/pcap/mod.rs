//! Classic libpcap file I/O: reading (both timestamp resolutions, both byte
//! orders), writing (nanosecond resolution, Ethernet link type), in-memory
//! looping replay and inter-packet-gap pacing.
//!
//! # Why hand-written rather than the `pcap-file` crate
//!
//! The classic format is a 24-byte file header plus a 16-byte header per
//! record, about a hundred lines to read and write.  Writing it here keeps
//! the crate dependency-free for this part and gives exactly what the data
//! plane and the tests need: allocation-free lending reads into one reused
//! buffer, a hard cap on the record length taken from the file (a corrupt
//! length can never trigger a huge allocation), error variants that carry
//! the byte offset of the bad record, and a guarantee checked by property
//! tests that no input bytes can make the reader panic.  `pcap-file`'s
//! current line (3.x) is still a release candidate, and pcapng — the main
//! thing it would add — is out of scope here (such files are recognised
//! and rejected with [`PcapError::PcapNg`]).

mod error;
mod pacer;
mod reader;
mod replay;
mod writer;

pub use error::PcapError;
pub use pacer::Pacer;
pub use reader::{PcapHeader, PcapPacket, PcapReader, TsResolution};
pub use replay::PcapReplay;
pub use writer::PcapWriter;

/// Magic number of microsecond-resolution files (as read in file order).
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic number of nanosecond-resolution files (as read in file order).
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// Link type of Ethernet frames (`LINKTYPE_ETHERNET`).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Largest record the reader accepts and the largest snap length the
/// writer uses: libpcap's `MAXIMUM_SNAPLEN` (256 KiB).
pub const MAX_SNAPLEN: u32 = 262_144;
/// Size of the file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Size of each record header.
pub const RECORD_HEADER_LEN: usize = 16;
