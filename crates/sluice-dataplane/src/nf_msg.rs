//! What the platform says to a process NF on its message channel
//! (`sluice_mem::link_blob`), and the NF side of the state messages.
//!
//! Every message starts with a kind byte:
//!
//! | kind | payload | answer |
//! |---|---|---|
//! | 0 config | a recipe (postcard) | done, or refused with why |
//! | 1 checkpoint | offset u32, padding | data: total u32, then the state's bytes from offset |
//! | 2 restore | offset u32, total u32, chunk | done (`more` until the last chunk), or refused |
//!
//! A data answer fills the buffers of the message it answers, so a
//! checkpoint request is padded to [`CHECKPOINT_PARTS`] buffers (about
//! 127 KiB of state per answer), and a state travels in chunks, one round
//! trip each. A checkpoint at offset 0 takes a snapshot
//! the later chunks are cut from, so the state read is the NF's at one
//! instant between two batches, whatever the packets after it change. A
//! restore is applied when its last chunk arrives, by the type's
//! all-or-nothing `restore`; a chunk out of order discards what came
//! before and is refused.

use sluice_mem::link_blob::PART_BYTES;
use sluice_nf::{NetworkFunction, StateWriter};

const CONFIG: u8 = 0;
const CHECKPOINT: u8 = 1;
const RESTORE: u8 = 2;

/// Buffers a checkpoint request takes, for its answer to fill: as many as
/// a message may (about 127 KiB of state per round trip; a round trip
/// costs a wake-up on each side, so fewer, larger ones are faster). The
/// request waits for that much room in the NF's ring.
pub const CHECKPOINT_PARTS: usize = sluice_mem::link_blob::MAX_PARTS;

/// Most bytes of one NF instance's state (a bound, so a corrupt total
/// never makes an NF reserve more).
pub const STATE_MAX: usize = 256 << 20;

/// A message to a process NF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NfMsg<'a> {
    /// Take this recipe's config (`NetworkFunction::reconfigure`).
    Config(&'a [u8]),
    /// Send the state's bytes from `offset`.
    Checkpoint {
        /// Where this chunk starts.
        offset: u32,
    },
    /// Part of a state to restore.
    Restore {
        /// Where this chunk starts.
        offset: u32,
        /// The state's length.
        total: u32,
        /// The bytes.
        chunk: &'a [u8],
    },
}

impl NfMsg<'_> {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            NfMsg::Config(recipe) => [&[CONFIG][..], recipe].concat(),
            NfMsg::Checkpoint { offset } => {
                // Padded: the answer is written into the request's buffers.
                let mut b = vec![0u8; CHECKPOINT_PARTS * PART_BYTES];
                b[0] = CHECKPOINT;
                b[1..5].copy_from_slice(&offset.to_le_bytes());
                b
            }
            NfMsg::Restore {
                offset,
                total,
                chunk,
            } => {
                let mut b = vec![RESTORE];
                b.extend_from_slice(&offset.to_le_bytes());
                b.extend_from_slice(&total.to_le_bytes());
                b.extend_from_slice(chunk);
                b
            }
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Reads a message; `None` for one this code does not know.
pub fn decode(bytes: &[u8]) -> Option<NfMsg<'_>> {
    let (&kind, rest) = bytes.split_first()?;
    match kind {
        CONFIG => Some(NfMsg::Config(rest)),
        CHECKPOINT if rest.len() >= 4 => Some(NfMsg::Checkpoint {
            offset: u32_at(rest, 0)?,
        }),
        RESTORE if rest.len() >= 8 => Some(NfMsg::Restore {
            offset: u32_at(rest, 0)?,
            total: u32_at(rest, 4)?,
            chunk: &rest[8..],
        }),
        _ => None,
    }
}

/// How the NF answers a state message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateAnswer {
    /// Acted on it (or refused), with a word on why.
    Text(bool, String),
    /// A checkpoint chunk: the total, then the bytes.
    Data(Vec<u8>),
}

/// The NF side of checkpoint and restore: the snapshot being read out and
/// the state being put together.
#[derive(Default)]
pub struct StateSide {
    snapshot: Vec<u8>,
    incoming: Vec<u8>,
}

impl StateSide {
    /// A checkpoint chunk from `offset` (offset 0 takes a new snapshot),
    /// for an answer of at most `room` bytes.
    pub fn checkpoint(
        &mut self,
        nf: &dyn NetworkFunction,
        offset: u32,
        room: usize,
    ) -> StateAnswer {
        if nf.state_version().is_none() {
            return StateAnswer::Text(false, "this NF type keeps no state to checkpoint".into());
        }
        if offset == 0 {
            let mut w = StateWriter::new();
            nf.checkpoint(&mut w);
            self.snapshot = w.into_bytes();
        }
        let total = self.snapshot.len();
        if total > STATE_MAX {
            return StateAnswer::Text(false, format!("state of {total} bytes is too large"));
        }
        let from = (offset as usize).min(total);
        let to = (from + room.saturating_sub(4).max(1)).min(total);
        let mut data = Vec::with_capacity(4 + to - from);
        data.extend_from_slice(&(total as u32).to_le_bytes());
        data.extend_from_slice(&self.snapshot[from..to]);
        if to == total {
            // The last chunk: the snapshot is no longer needed.
            self.snapshot = Vec::new();
        }
        StateAnswer::Data(data)
    }

    /// A restore chunk; the last one restores the whole state.
    pub fn restore(
        &mut self,
        nf: &mut dyn NetworkFunction,
        offset: u32,
        total: u32,
        chunk: &[u8],
    ) -> StateAnswer {
        let (offset, total) = (offset as usize, total as usize);
        if offset == 0 {
            self.incoming.clear();
        }
        if offset != self.incoming.len() || offset + chunk.len() > total || total > STATE_MAX {
            self.incoming = Vec::new();
            return StateAnswer::Text(false, "state chunk out of order".into());
        }
        self.incoming.extend_from_slice(chunk);
        if self.incoming.len() < total {
            return StateAnswer::Text(true, "more".into());
        }
        let state = std::mem::take(&mut self.incoming);
        match nf.restore(&state) {
            Ok(()) => StateAnswer::Text(true, "restored".into()),
            Err(e) => StateAnswer::Text(false, e.to_string()),
        }
    }
}

/// Reads a checkpoint answer: the state's total length and this chunk.
pub fn read_chunk(data: &[u8]) -> Option<(u32, &[u8])> {
    Some((u32_at(data, 0)?, &data[4..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_nf::{Batch, Context, StateError, StateReader};

    /// Room of a one-buffer answer.
    const ROOM: usize = sluice_mem::ANSWER_MAX;

    /// Keeps a list of numbers as its state.
    #[derive(Default)]
    struct Numbers(Vec<u64>);

    impl NetworkFunction for Numbers {
        fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
        fn state_version(&self) -> Option<u16> {
            Some(1)
        }
        fn checkpoint(&self, out: &mut StateWriter) {
            out.len(self.0.len());
            self.0.iter().for_each(|&n| out.u64(n));
        }
        fn restore(&mut self, state: &[u8]) -> Result<(), StateError> {
            let mut r = StateReader::new(state);
            let n = r.len(8)?;
            let v = (0..n).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
            r.finish()?;
            self.0 = v;
            Ok(())
        }
    }

    #[test]
    fn messages_round_trip_and_garbage_is_unknown() {
        let chunk = [9u8; 40];
        for m in [
            NfMsg::Config(b"recipe"),
            NfMsg::Checkpoint { offset: 77 },
            NfMsg::Restore {
                offset: 5,
                total: 45,
                chunk: &chunk,
            },
        ] {
            assert_eq!(decode(&m.encode()), Some(m));
        }
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[CHECKPOINT, 1, 2]), None);
        assert_eq!(
            decode(&[CHECKPOINT, 1, 0, 0, 0, 9]),
            Some(NfMsg::Checkpoint { offset: 1 })
        );
        assert_eq!(decode(&[RESTORE, 1, 2, 3, 4, 5]), None);
        assert_eq!(decode(&[7, 0, 0]), None);
    }

    /// Reads a whole state chunk by chunk, as the worker does.
    fn read_out(side: &mut StateSide, nf: &dyn NetworkFunction) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let StateAnswer::Data(d) = side.checkpoint(nf, out.len() as u32, ROOM) else {
                panic!("data")
            };
            let (total, chunk) = read_chunk(&d).unwrap();
            out.extend_from_slice(chunk);
            if out.len() == total as usize {
                return out;
            }
        }
    }

    #[test]
    fn a_large_state_crosses_in_chunks_from_one_snapshot() {
        let mut nf = Numbers((0..2000).collect());
        let mut side = StateSide::default();
        // The first chunk fixes the snapshot: a change after it is not seen.
        let StateAnswer::Data(first) = side.checkpoint(&nf, 0, ROOM) else {
            panic!()
        };
        nf.0.push(12345);
        let mut state = read_chunk(&first).unwrap().1.to_vec();
        while let StateAnswer::Data(d) = side.checkpoint(&nf, state.len() as u32, ROOM) {
            let (total, chunk) = read_chunk(&d).unwrap();
            state.extend_from_slice(chunk);
            if state.len() == total as usize {
                break;
            }
        }
        assert_eq!(state.len(), 4 + 2000 * 8);
        assert!(state.len() > 3 * ROOM, "took several chunks");

        let mut fresh = Numbers::default();
        let mut at = 0;
        for chunk in state.chunks(1000) {
            let a = side.restore(&mut fresh, at as u32, state.len() as u32, chunk);
            at += chunk.len();
            let want = if at < state.len() { "more" } else { "restored" };
            assert_eq!(a, StateAnswer::Text(true, want.into()));
        }
        assert_eq!(fresh.0, (0..2000).collect::<Vec<_>>());
        assert_eq!(read_out(&mut side, &fresh), state);
    }

    #[test]
    fn a_chunk_out_of_order_or_a_bad_state_leaves_the_nf_untouched() {
        let mut nf = Numbers(vec![1, 2, 3]);
        let mut side = StateSide::default();
        let a = side.restore(&mut nf, 8, 16, &[0; 8]);
        assert!(matches!(a, StateAnswer::Text(false, _)));
        let a = side.restore(&mut nf, 0, 4, &[9, 0, 0, 0]);
        assert!(matches!(a, StateAnswer::Text(false, ref why) if why.contains("truncated")));
        assert_eq!(nf.0, vec![1, 2, 3]);
        assert!(matches!(
            side.checkpoint(&NoState, 0, ROOM),
            StateAnswer::Text(false, _)
        ));
    }

    struct NoState;
    impl NetworkFunction for NoState {
        fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
    }
}
