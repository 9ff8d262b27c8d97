//! The measurement stamp carried at the start of generated payloads.

/// Measurement stamp written at the start of the L4 payload of every
/// generated frame that has room for it ([`Stamp::LEN`] bytes).
///
/// Wire layout (all big-endian, every field at an even offset so the
/// generator can patch the L4 checksum word-wise):
///
/// | offset | size | field                                  |
/// |-------:|-----:|----------------------------------------|
/// | 0      | 4    | magic `0x534c4345` (`"SLCE"`)           |
/// | 4      | 4    | flow index                             |
/// | 8      | 8    | per-flow sequence number (from 0)      |
/// | 16     | 8    | send timestamp, ns (`CLOCK_MONOTONIC`) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// Index of the generator flow (slot) that sent the frame.
    pub flow: u32,
    /// Per-flow sequence number, counting from 0, never reset by TCP
    /// connection churn.
    pub seq: u64,
    /// Send timestamp in nanoseconds, as passed by the caller.
    pub timestamp_ns: u64,
}

impl Stamp {
    /// Magic number at the start of every stamp: ASCII `"SLCE"`.
    pub const MAGIC: u32 = 0x534c_4345;
    /// Encoded length in bytes.
    pub const LEN: usize = 24;

    /// Writes the stamp into the first [`Stamp::LEN`] bytes of `buf`.
    ///
    /// Returns `false` (and writes nothing) if `buf` is too short.
    #[inline]
    pub fn write(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..Self::LEN) else {
            return false;
        };
        b[0..4].copy_from_slice(&Self::MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&self.flow.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..24].copy_from_slice(&self.timestamp_ns.to_be_bytes());
        true
    }

    /// Reads a stamp from the start of `buf`: `None` if `buf` is shorter
    /// than [`Stamp::LEN`] or does not start with [`Stamp::MAGIC`].
    #[inline]
    pub fn read(buf: &[u8]) -> Option<Stamp> {
        let b: &[u8; Self::LEN] = buf.get(..Self::LEN)?.try_into().ok()?;
        if u32::from_be_bytes([b[0], b[1], b[2], b[3]]) != Self::MAGIC {
            return None;
        }
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[8..16]);
        let seq = u64::from_be_bytes(w);
        w.copy_from_slice(&b[16..24]);
        Some(Stamp {
            flow: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            seq,
            timestamp_ns: u64::from_be_bytes(w),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_layout() {
        let s = Stamp {
            flow: 0x0102_0304,
            seq: 0x1122_3344_5566_7788,
            timestamp_ns: 42,
        };
        let mut buf = [0u8; 30];
        assert!(s.write(&mut buf));
        assert_eq!(&buf[..4], b"SLCE");
        assert_eq!(&buf[4..8], &[1, 2, 3, 4]);
        assert_eq!(Stamp::read(&buf), Some(s));
        assert_eq!(Stamp::read(&buf[..23]), None);
        buf[0] = b'X';
        assert_eq!(Stamp::read(&buf), None);
        let mut short = [0u8; 23];
        assert!(!s.write(&mut short));
        assert_eq!(short, [0u8; 23]);
    }
}
