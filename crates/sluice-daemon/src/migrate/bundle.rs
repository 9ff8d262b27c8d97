//! The states of a move, as `pause` answers them and `resume` takes them
//! (`application/octet-stream`).
//!
//! Binary, because they are on the clock: every millisecond spent
//! encoding them is one more that frames wait in the taps, and base64 in
//! JSON cost about 3 ms for a firewall's 620 KB. Layout, little-endian:
//!
//! ```text
//! "SLUICEMV"  magic (8 bytes)
//! drain_us    u64: how long the packets already read took to leave the NFs
//! taken_us    u64: how long the checkpoints took
//! count       u32: checkpoint files that follow
//! count × (length u32, a checkpoint file of that length)
//! ```
//!
//! Each checkpoint file is sealed and names its NF
//! (`sluice_nf::checkpoint`); the bundle only frames them.

use sluice_nf::checkpoint::Checkpoint;

const MAGIC: &[u8; 8] = b"SLUICEMV";
const HEADER: usize = 8 + 8 + 8 + 4;

/// A move's states.
#[derive(Debug, Default, PartialEq)]
pub struct Bundle {
    /// How long the packets already read took to leave the NFs, µs.
    pub drain_us: u64,
    /// How long the checkpoints took, µs.
    pub taken_us: u64,
    /// One per NF that keeps state.
    pub states: Vec<Checkpoint>,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

impl Bundle {
    /// The bytes.
    pub fn encode(&self) -> Vec<u8> {
        let files: Vec<Vec<u8>> = self.states.iter().map(Checkpoint::encode).collect();
        let mut out = Vec::with_capacity(HEADER + files.iter().map(|f| 4 + f.len()).sum::<usize>());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.drain_us.to_le_bytes());
        out.extend_from_slice(&self.taken_us.to_le_bytes());
        out.extend_from_slice(&(files.len() as u32).to_le_bytes());
        for f in files {
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(&f);
        }
        out
    }

    /// Reads a bundle whole, or says what is wrong with it.
    pub fn decode(b: &[u8]) -> Result<Bundle, String> {
        if b.get(..8) != Some(MAGIC.as_slice()) {
            return Err("not the states of a move (no SLUICEMV magic)".into());
        }
        let truncated = || "the states of the move are truncated".to_string();
        let drain_us = u64_at(b, 8).ok_or_else(truncated)?;
        let taken_us = u64_at(b, 16).ok_or_else(truncated)?;
        let count = u32_at(b, 24).ok_or_else(truncated)?;
        let mut at = HEADER;
        let mut states = Vec::new();
        for i in 0..count {
            let len = u32_at(b, at).ok_or_else(truncated)? as usize;
            let file = b.get(at + 4..at + 4 + len).ok_or_else(truncated)?;
            let c = Checkpoint::decode(file)
                .map_err(|e| format!("state {i} of the move is not a checkpoint: {e}"))?;
            states.push(c);
            at += 4 + len;
        }
        if at != b.len() {
            return Err(format!(
                "{} bytes after the last state of the move",
                b.len() - at
            ));
        }
        Ok(Bundle {
            drain_us,
            taken_us,
            states,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_nf::checkpoint::Part;

    fn sample() -> Bundle {
        let ck = |nf: &str, bytes: &[u8]| Checkpoint {
            nf_type: "firewall".into(),
            state_version: 1,
            nf: nf.into(),
            parts: vec![Part {
                instance: format!("{nf}/worker0"),
                state: bytes.to_vec(),
            }],
        };
        Bundle {
            drain_us: 7,
            taken_us: 1234,
            states: vec![ck("fw", &[1, 2, 3]), ck("fw2", &[])],
        }
    }

    #[test]
    fn a_bundle_reads_back_whole() {
        let b = sample();
        assert_eq!(Bundle::decode(&b.encode()).unwrap(), b);
        let empty = Bundle::default();
        assert_eq!(Bundle::decode(&empty.encode()).unwrap(), empty);
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_refused_or_harmless() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            assert!(Bundle::decode(&bytes[..n]).is_err(), "cut at {n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Bundle::decode(&longer)
            .unwrap_err()
            .contains("1 bytes after"));
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            // The timings are not checked; anything else is.
            match Bundle::decode(&b) {
                Ok(got) => assert!((8..24).contains(&i), "byte {i}: {got:?}"),
                Err(e) => assert!(!e.is_empty()),
            }
        }
    }
}
