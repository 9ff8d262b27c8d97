//! The checkpoint file: an NF's state, one part per instance, sealed so a
//! file that is truncated, corrupt, of another NF type or of another state
//! version is refused before any NF sees it.
//!
//! Layout (integers little-endian, byte strings as `u32` length + bytes):
//!
//! | field | size | |
//! |---|---|---|
//! | magic | 8 | `SLUICECK` |
//! | format | u16 | this layout, [`FORMAT`] |
//! | nf type | string | e.g. `firewall` |
//! | state version | u16 | the type's [`NetworkFunction::state_version`] |
//! | nf name | string | the NF it was taken from (informative) |
//! | instances | u32 | then per instance: its name (string), its state (string) |
//! | crc32 | u32 | CRC-32 (IEEE) of every byte before it |
//!
//! An NF has one instance per worker and replica; a checkpoint restores
//! into an NF with the same number of instances, part `i` into instance `i`
//! (same layout: the flows a worker owns are the ones it was given by the
//! same hash).
//!
//! [`NetworkFunction::state_version`]: crate::NetworkFunction::state_version

use std::fmt;

use crate::state::{StateError, StateReader, StateWriter};

/// The file's first bytes.
pub const MAGIC: &[u8; 8] = b"SLUICECK";

/// The layout this code writes and reads.
pub const FORMAT: u16 = 1;

/// One instance's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The instance's name (`fw`, `fw.1`, ...), informative.
    pub instance: String,
    /// Its state, as its type wrote it.
    pub state: Vec<u8>,
}

/// A checkpoint of one NF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The NF's type.
    pub nf_type: String,
    /// The type's state version.
    pub state_version: u16,
    /// The NF it was taken from.
    pub nf: String,
    /// One state per instance, in instance order.
    pub parts: Vec<Part>,
}

/// Why a checkpoint file was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointError {
    /// It does not start with [`MAGIC`].
    NotACheckpoint,
    /// It was written in a layout this code does not read.
    UnsupportedFormat(u16),
    /// It ends early (or a length in it points past its end).
    Truncated,
    /// Its checksum does not match its bytes.
    Corrupt {
        /// The checksum written in the file.
        stored: u32,
        /// The checksum of its bytes.
        computed: u32,
    },
    /// A field is out of range.
    Malformed(String),
    /// It holds another type's state.
    WrongType {
        /// The file's type.
        file: String,
        /// The NF's type.
        nf: String,
    },
    /// It holds another version of the type's state.
    WrongVersion {
        /// The type.
        nf_type: String,
        /// The file's version.
        file: u16,
        /// The version the running NF reads.
        nf: u16,
    },
    /// It holds a different number of instances than the NF has.
    WrongShape {
        /// Instances in the file.
        file: usize,
        /// Instances of the NF.
        nf: usize,
    },
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotACheckpoint => write!(f, "not a sluice checkpoint (no SLUICECK header)"),
            Self::UnsupportedFormat(v) => write!(
                f,
                "checkpoint layout {v} is not readable by this sluice (it reads layout {FORMAT})"
            ),
            Self::Truncated => write!(f, "checkpoint is truncated"),
            Self::Corrupt { stored, computed } => write!(
                f,
                "checkpoint is corrupt: its checksum is {stored:#010x} but its bytes give {computed:#010x}"
            ),
            Self::Malformed(what) => write!(f, "checkpoint is malformed: {what}"),
            Self::WrongType { file, nf } => {
                write!(f, "checkpoint holds a {file} NF's state, not a {nf}'s")
            }
            Self::WrongVersion { nf_type, file, nf } => write!(
                f,
                "checkpoint holds {nf_type} state version {file}; this {nf_type} reads version {nf}"
            ),
            Self::WrongShape { file, nf } => write!(
                f,
                "checkpoint has {file} instance(s) but the NF runs {nf} (workers × replicas must match)"
            ),
        }
    }
}

impl std::error::Error for CheckpointError {}

/// Most bytes a name may take in the file.
const NAME_MAX: usize = 256;

impl Checkpoint {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = StateWriter::new();
        for &b in MAGIC {
            w.u8(b);
        }
        w.u16(FORMAT);
        w.bytes(self.nf_type.as_bytes());
        w.u16(self.state_version);
        w.bytes(self.nf.as_bytes());
        w.len(self.parts.len());
        for p in &self.parts {
            w.bytes(p.instance.as_bytes());
            w.bytes(&p.state);
        }
        let mut bytes = w.into_bytes();
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes
    }

    /// Reads a file; checks its header, checksum and layout (not whether it
    /// fits an NF: [`Self::check_fits`]).
    pub fn decode(bytes: &[u8]) -> Result<Self, CheckpointError> {
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(CheckpointError::NotACheckpoint);
        }
        let Some(body_len) = bytes.len().checked_sub(4) else {
            return Err(CheckpointError::Truncated);
        };
        let mut r = StateReader::new(&bytes[MAGIC.len()..]);
        let format = r.u16().map_err(|_| CheckpointError::Truncated)?;
        if format != FORMAT {
            return Err(CheckpointError::UnsupportedFormat(format));
        }
        if body_len < MAGIC.len() + 2 {
            return Err(CheckpointError::Truncated);
        }
        let (body, tail) = bytes.split_at(body_len);
        let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        let computed = crc32fast::hash(body);
        let after_header = &bytes[MAGIC.len() + 2..];
        if stored != computed {
            // Intact lengths with other bytes: corrupt. Lengths that run
            // past the end, or a body complete but for (part of) its
            // checksum: truncated.
            if Self::read_body(&body[MAGIC.len() + 2..]).is_ok() {
                return Err(CheckpointError::Corrupt { stored, computed });
            }
            return Err(match Self::read_body(after_header) {
                Ok(_) | Err(StateError::Truncated { .. }) => CheckpointError::Truncated,
                Err(StateError::TrailingBytes { count }) if count < 4 => CheckpointError::Truncated,
                Err(_) => CheckpointError::Corrupt { stored, computed },
            });
        }
        Self::read_body(&body[MAGIC.len() + 2..]).map_err(|e| match e {
            StateError::Truncated { .. } => CheckpointError::Truncated,
            other => CheckpointError::Malformed(other.to_string()),
        })
    }

    fn read_body(body: &[u8]) -> Result<Self, StateError> {
        let mut r = StateReader::new(body);
        let nf_type = name(&mut r, "nf type")?;
        let state_version = r.u16()?;
        let nf = name(&mut r, "nf name")?;
        let count = r.len(8)?;
        let mut parts = Vec::with_capacity(count);
        for _ in 0..count {
            let instance = name(&mut r, "instance name")?;
            let state = r.bytes()?.to_vec();
            parts.push(Part { instance, state });
        }
        r.finish()?;
        Ok(Checkpoint {
            nf_type,
            state_version,
            nf,
            parts,
        })
    }

    /// Whether this checkpoint can restore an NF of `nf_type`, whose state
    /// version is `state_version` and which runs `instances` instances.
    pub fn check_fits(
        &self,
        nf_type: &str,
        state_version: u16,
        instances: usize,
    ) -> Result<(), CheckpointError> {
        if self.nf_type != nf_type {
            return Err(CheckpointError::WrongType {
                file: self.nf_type.clone(),
                nf: nf_type.to_owned(),
            });
        }
        if self.state_version != state_version {
            return Err(CheckpointError::WrongVersion {
                nf_type: nf_type.to_owned(),
                file: self.state_version,
                nf: state_version,
            });
        }
        if self.parts.len() != instances {
            return Err(CheckpointError::WrongShape {
                file: self.parts.len(),
                nf: instances,
            });
        }
        Ok(())
    }
}

fn name(r: &mut StateReader<'_>, what: &str) -> Result<String, StateError> {
    let at = r.position();
    let b = r.bytes()?;
    if b.len() > NAME_MAX {
        return Err(r.invalid_at(at, format!("{what} longer than {NAME_MAX} bytes")));
    }
    String::from_utf8(b.to_vec()).map_err(|_| r.invalid_at(at, format!("{what} is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            nf_type: "firewall".into(),
            state_version: 3,
            nf: "fw".into(),
            parts: vec![
                Part {
                    instance: "fw".into(),
                    state: (0..300u32).map(|i| i as u8).collect(),
                },
                Part {
                    instance: "fw.1".into(),
                    state: vec![],
                },
            ],
        }
    }

    #[test]
    fn a_checkpoint_round_trips() {
        let c = sample();
        assert_eq!(Checkpoint::decode(&c.encode()), Ok(c));
    }

    #[test]
    fn every_truncation_is_refused_as_truncated() {
        let bytes = sample().encode();
        for cut in MAGIC.len()..bytes.len() {
            let got = Checkpoint::decode(&bytes[..cut]);
            assert_eq!(got, Err(CheckpointError::Truncated), "cut at {cut}");
        }
        assert_eq!(
            Checkpoint::decode(&bytes[..4]),
            Err(CheckpointError::NotACheckpoint)
        );
    }

    #[test]
    fn every_flipped_bit_is_refused() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(Checkpoint::decode(&b).is_err(), "byte {i} bit {bit}");
            }
        }
    }

    #[test]
    fn a_file_of_another_type_version_or_shape_does_not_fit() {
        let c = sample();
        assert_eq!(c.check_fits("firewall", 3, 2), Ok(()));
        assert!(matches!(
            c.check_fits("nat", 3, 2),
            Err(CheckpointError::WrongType { .. })
        ));
        let e = c.check_fits("firewall", 4, 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "checkpoint holds firewall state version 3; this firewall reads version 4"
        );
        assert!(matches!(
            c.check_fits("firewall", 3, 1),
            Err(CheckpointError::WrongShape { file: 2, nf: 1 })
        ));
    }

    #[test]
    fn another_layout_is_named() {
        let mut b = sample().encode();
        b[8] = 9;
        assert_eq!(
            Checkpoint::decode(&b),
            Err(CheckpointError::UnsupportedFormat(9))
        );
    }

    #[test]
    fn garbage_never_panics() {
        // A cheap deterministic generator: every length to 200, xorshift bytes,
        // with and without the magic in front.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..200 {
            for with_magic in [false, true] {
                let mut b: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                if with_magic && b.len() >= 10 {
                    b[..8].copy_from_slice(MAGIC);
                    b[8..10].copy_from_slice(&FORMAT.to_le_bytes());
                }
                assert!(Checkpoint::decode(&b).is_err());
            }
        }
    }
}
