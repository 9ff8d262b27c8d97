//! In-memory looping replay of a pcap file.

use std::io::Read;
use std::path::Path;

use super::{PcapError, PcapReader, LINKTYPE_ETHERNET};

/// A pcap file loaded into memory (one contiguous byte buffer plus an
/// index) and replayed `loops` times.
///
/// A file that ends inside its last record (a capture cut short) is
/// loaded up to that record, as tcpdump and tshark read it: the cut
/// record is left out and reported by [`PcapReplay::truncated_records`]
/// and [`PcapReplay::truncation`] for the caller to warn about (this crate
/// does no logging). Any other corruption refuses the file.
///
/// Timestamps are rebased so the first record is at 0, and each further
/// loop is shifted by the capture's span plus its mean inter-packet gap, so
/// timestamps keep increasing across loops and a [`super::Pacer`] needs no
/// special case at the wrap.
#[derive(Debug, Clone)]
pub struct PcapReplay {
    data: Vec<u8>,
    /// `(rebased timestamp, offset into data, length)`.
    index: Vec<(u64, usize, usize)>,
    loops: Option<u64>,
    loop_no: u64,
    pos: usize,
    period_ns: u64,
    /// Why the last record was left out, if the file ends inside it.
    truncation: Option<String>,
}

impl PcapReplay {
    /// Loads the Ethernet pcap file at `path`, to be replayed `loops` times
    /// (`None` = forever; `Some(0)` yields nothing).
    pub fn load(path: impl AsRef<Path>, loops: Option<u64>) -> Result<Self, PcapError> {
        Self::from_reader(PcapReader::open(path)?, loops)
    }

    /// Loads every record of `reader`, which must be of link type Ethernet.
    pub fn from_reader<R: Read>(
        mut reader: PcapReader<R>,
        loops: Option<u64>,
    ) -> Result<Self, PcapError> {
        if reader.header().linktype != LINKTYPE_ETHERNET {
            return Err(PcapError::UnsupportedLinkType(reader.header().linktype));
        }
        let mut data = Vec::new();
        let mut index = Vec::new();
        let mut first = None;
        let mut last = 0;
        let mut truncation = None;
        loop {
            let p = match reader.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                // Only the end of the file can be cut short: every record
                // before it was read whole.
                Err(e) if e.is_truncated_record() => {
                    truncation = Some(e.to_string());
                    break;
                }
                Err(e) => return Err(e),
            };
            let t0 = *first.get_or_insert(p.timestamp_ns);
            let ts = p.timestamp_ns.saturating_sub(t0);
            last = last.max(ts);
            index.push((ts, data.len(), p.data.len()));
            data.extend_from_slice(p.data);
        }
        let gaps = index.len().saturating_sub(1) as u64;
        let period_ns = last + last.checked_div(gaps).unwrap_or(0);
        Ok(PcapReplay {
            data,
            index,
            loops,
            loop_no: 0,
            pos: 0,
            period_ns,
            truncation,
        })
    }

    /// Records left out because the file ends inside them: 1 for a file
    /// cut short in its last record, else 0.
    pub fn truncated_records(&self) -> u64 {
        u64::from(self.truncation.is_some())
    }

    /// What was cut short, e.g. `pcap record at offset 1846 truncated: 41
    /// of 42 captured bytes`; `None` for a whole file.
    pub fn truncation(&self) -> Option<&str> {
        self.truncation.as_deref()
    }

    /// Records in one pass over the file.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True if the file holds no records.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Loops completed so far.
    pub fn loops_done(&self) -> u64 {
        self.loop_no
    }

    /// Timestamp and bytes of the next frame without consuming it; `None`
    /// when all loops are done.
    pub fn peek(&self) -> Option<(u64, &[u8])> {
        if self.index.is_empty() || self.loops.is_some_and(|l| self.loop_no >= l) {
            return None;
        }
        let (ts, off, len) = self.index[self.pos];
        let shift = self.loop_no.saturating_mul(self.period_ns);
        Some((ts.saturating_add(shift), &self.data[off..off + len]))
    }

    /// Consumes the frame [`PcapReplay::peek`] would return.
    pub fn advance(&mut self) {
        if self.peek().is_none() {
            return;
        }
        self.pos += 1;
        if self.pos == self.index.len() {
            self.pos = 0;
            self.loop_no += 1;
        }
    }

    /// Returns the next `(timestamp_ns, frame)` and advances past it.
    pub fn next_frame(&mut self) -> Option<(u64, &[u8])> {
        let (ts, off, len) = {
            let (ts, f) = self.peek()?;
            let (_, off, len) = self.index[self.pos];
            debug_assert_eq!(f.len(), len);
            (ts, off, len)
        };
        self.advance();
        Some((ts, &self.data[off..off + len]))
    }
}
