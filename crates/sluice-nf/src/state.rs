//! An NF's state as bytes: what [`NetworkFunction::checkpoint`] writes and
//! [`NetworkFunction::restore`] reads.
//!
//! A type lays its state out as it likes with a [`StateWriter`]: fixed-width
//! little-endian integers and length-prefixed byte strings, nothing
//! self-describing. A [`StateReader`] reads it back with one contract: every
//! read either returns a value or a [`StateError`] naming the byte offset,
//! so a truncated or corrupt state never panics and never yields a value
//! made of garbage. The type's `state_version` says which layout it writes;
//! the checkpoint file refuses a state of another version before the type
//! sees it ([`crate::checkpoint`]).
//!
//! [`NetworkFunction::checkpoint`]: crate::NetworkFunction::checkpoint
//! [`NetworkFunction::restore`]: crate::NetworkFunction::restore

use std::fmt;

/// Why a state could not be read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError {
    /// The state ends inside a value that starts at this offset.
    Truncated {
        /// Where the value starts.
        at: usize,
    },
    /// A value is out of its range or contradicts another.
    Invalid {
        /// Where the value starts.
        at: usize,
        /// What is wrong with it.
        what: String,
    },
    /// Bytes are left after the whole state was read.
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// The type keeps no state it can export (it has no `state_version`).
    Unsupported,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Truncated { at } => write!(f, "state truncated at byte {at}"),
            StateError::Invalid { at, what } => write!(f, "state invalid at byte {at}: {what}"),
            StateError::TrailingBytes { count } => {
                write!(f, "state has {count} unexpected bytes at its end")
            }
            StateError::Unsupported => write!(f, "this NF type keeps no state to restore"),
        }
    }
}

impl std::error::Error for StateError {}

/// Writes a state: fixed-width little-endian values, in the order the
/// type's [`StateReader`] code reads them.
#[derive(Debug, Default)]
pub struct StateWriter {
    bytes: Vec<u8>,
}

impl StateWriter {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a byte.
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    /// Appends bytes as they are (a fixed-size field, e.g. an address:
    /// read back with [`StateReader::array`]).
    pub fn raw(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }

    /// Appends a count of items that follow (a `u32`).
    pub fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }

    /// Appends a byte string with its length.
    pub fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.bytes.extend_from_slice(b);
    }

    /// Bytes written so far.
    pub fn written(&self) -> usize {
        self.bytes.len()
    }

    /// The state.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Reads a state written by a [`StateWriter`].
#[derive(Debug)]
pub struct StateReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> StateReader<'a> {
    /// A reader over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        StateReader { bytes, at: 0 }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], StateError> {
        let end = self.at.checked_add(N).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or(StateError::Truncated { at: self.at })?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.bytes[self.at..end]);
        self.at = end;
        Ok(out)
    }

    /// Reads a byte.
    pub fn u8(&mut self) -> Result<u8, StateError> {
        Ok(self.take::<1>()?[0])
    }

    /// Reads a `u16`.
    pub fn u16(&mut self) -> Result<u16, StateError> {
        Ok(u16::from_le_bytes(self.take()?))
    }

    /// Reads a `u32`.
    pub fn u32(&mut self) -> Result<u32, StateError> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    /// Reads a `u64`.
    pub fn u64(&mut self) -> Result<u64, StateError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    /// Reads `N` bytes written by [`StateWriter::raw`].
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], StateError> {
        self.take()
    }

    /// Reads a bool written as a byte (0 or 1; anything else is invalid).
    pub fn bool(&mut self) -> Result<bool, StateError> {
        let at = self.at;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.invalid_at(at, format!("{v} is not a bool"))),
        }
    }

    /// Reads a count of items that follow, each at least `item_bytes`
    /// long: a count the remaining bytes cannot hold is refused here, so a
    /// corrupt count never makes the caller reserve gigabytes.
    pub fn len(&mut self, item_bytes: usize) -> Result<usize, StateError> {
        let at = self.at;
        let n = self.u32()? as usize;
        if n.saturating_mul(item_bytes.max(1)) > self.remaining() {
            return Err(StateError::Truncated { at });
        }
        Ok(n)
    }

    /// Reads a byte string written by [`StateWriter::bytes`].
    pub fn bytes(&mut self) -> Result<&'a [u8], StateError> {
        let n = self.len(1)?;
        let out = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(out)
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// Where the next read starts.
    pub fn position(&self) -> usize {
        self.at
    }

    /// An [`StateError::Invalid`] at the current position.
    pub fn invalid(&self, what: impl Into<String>) -> StateError {
        self.invalid_at(self.at, what)
    }

    /// An [`StateError::Invalid`] at `at`.
    pub fn invalid_at(&self, at: usize, what: impl Into<String>) -> StateError {
        StateError::Invalid {
            at,
            what: what.into(),
        }
    }

    /// Ends the read: every byte must have been read.
    pub fn finish(self) -> Result<(), StateError> {
        match self.remaining() {
            0 => Ok(()),
            count => Err(StateError::TrailingBytes { count }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_in_order() {
        let mut w = StateWriter::new();
        w.u8(7);
        w.u16(0xbeef);
        w.u32(0xdead_beef);
        w.u64(u64::MAX - 1);
        w.bytes(b"conntrack");
        w.raw(&[9, 8, 7]);
        w.u8(1);
        let bytes = w.into_bytes();
        let mut r = StateReader::new(&bytes);
        assert_eq!(r.u8(), Ok(7));
        assert_eq!(r.u16(), Ok(0xbeef));
        assert_eq!(r.u32(), Ok(0xdead_beef));
        assert_eq!(r.u64(), Ok(u64::MAX - 1));
        assert_eq!(r.bytes(), Ok(&b"conntrack"[..]));
        assert_eq!(r.array::<3>(), Ok([9, 8, 7]));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic() {
        let mut w = StateWriter::new();
        w.u32(3);
        w.bytes(&[1, 2, 3, 4, 5]);
        w.u64(9);
        let bytes = w.into_bytes();
        for cut in 0..bytes.len() {
            let mut r = StateReader::new(&bytes[..cut]);
            let got = r
                .u32()
                .and_then(|_| r.bytes().map(|_| ()))
                .and_then(|_| r.u64());
            assert!(
                matches!(got, Err(StateError::Truncated { .. })),
                "cut at {cut}: {got:?}"
            );
        }
    }

    #[test]
    fn a_count_larger_than_the_bytes_left_is_refused_before_any_allocation() {
        let mut w = StateWriter::new();
        w.u32(u32::MAX);
        let bytes = w.into_bytes();
        assert_eq!(
            StateReader::new(&bytes).len(16),
            Err(StateError::Truncated { at: 0 })
        );
    }

    #[test]
    fn trailing_bytes_and_bad_bools_are_named() {
        let mut r = StateReader::new(&[2, 0]);
        assert!(matches!(r.bool(), Err(StateError::Invalid { at: 0, .. })));
        let r = StateReader::new(&[0, 0]);
        assert_eq!(r.finish(), Err(StateError::TrailingBytes { count: 2 }));
    }
}
