//! Messages to an NF process on its receive ring: a new config for an NF
//! that takes its configuration live.
//!
//! A message travels in ring order with the packets, so every packet
//! queued before it sees the old config and every packet after it the new
//! one, with no flag to poll and no side channel. Its bytes go into
//! buffers lent from the pool (tagged as message buffers in the ownership
//! table, so a dead NF's are reclaimed and never counted as packets), one
//! ring entry `EVENT_BIT | BLOB_BIT | index` each. The NF hands every buffer
//! back when it has acted on the message, the first carrying its answer.
//!
//! Each buffer's data starts with an 8-byte header: the message id (u32),
//! the buffer's number in the message (u16) and how many there are (u16),
//! little-endian; the payload follows. The answer, written over the first
//! buffer's payload: status (u8: 0 refused, 1 done, 2 done with data),
//! length (u16), then the explanation (UTF-8) or, for status 2, the
//! data's first [`ANSWER_MAX`] bytes at most; the data goes on in the
//! message's next buffers, each filled after its header (its length says
//! how much), so a message of `k` buffers carries an answer of up to
//! [`BlobReader::data_room`] bytes. A larger reply travels in several
//! round trips, as the NF state of `sluice checkpoint` does.

use crate::arena::Arena;
use crate::batch::MAX_BATCH;
use crate::buffer::{PktHandle, DATA_ROOM};
use crate::link::{NfEndpoint, NfLink, Partial, BLOB_BIT, EVENT_BIT};
use crate::pool::{PoolCache, OWNER_PLATFORM};
use crate::ring::RingCorrupt;

const HEADER: usize = 8;
const PAYLOAD: usize = DATA_ROOM - HEADER;

/// Most buffers one message may take (no more than the smallest ring).
pub const MAX_PARTS: usize = 64;

/// Most bytes of one message (≈ 127 KiB).
pub const MAX_BYTES: usize = MAX_PARTS * PAYLOAD;

/// Most bytes of an answer in the message's first buffer.
pub const ANSWER_MAX: usize = PAYLOAD - 3;

/// Payload bytes of one message buffer.
pub const PART_BYTES: usize = PAYLOAD;

/// Answer status bytes.
const REFUSED: u8 = 0;
const DONE: u8 = 1;
const DATA: u8 = 2;

/// What an NF answered to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The message's id.
    pub id: u32,
    /// Whether the NF acted on it.
    pub done: bool,
    /// Its explanation (empty when it answered with data).
    pub text: String,
    /// The data it answered with ([`BlobReader::answer_data`]).
    pub data: Option<Vec<u8>>,
}

/// Why a message was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSent {
    /// Larger than [`MAX_PARTS`] buffers.
    TooLarge,
    /// No room in the ring, the quota or the pool now: try again later.
    NoRoom,
    /// The ring's indices are corrupt.
    Corrupt(RingCorrupt),
}

fn header(b: &[u8]) -> (u32, u16, u16) {
    let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    (
        id,
        u16::from_le_bytes([b[4], b[5]]),
        u16::from_le_bytes([b[6], b[7]]),
    )
}

impl NfLink<'_> {
    /// Sends message `id` with `bytes`; all of it or nothing.
    pub fn send_blob(
        &mut self,
        arena: &Arena,
        cache: &mut PoolCache<'_>,
        id: u32,
        bytes: &[u8],
    ) -> Result<(), NotSent> {
        let parts = bytes.len().div_ceil(PAYLOAD).max(1);
        if parts > MAX_PARTS {
            return Err(NotSent::TooLarge);
        }
        if self.room().map_err(NotSent::Corrupt)? < parts {
            return Err(NotSent::NoRoom);
        }
        let mut handles = Vec::with_capacity(parts);
        for _ in 0..parts {
            match cache.alloc_in(self.domain()) {
                Some(h) => handles.push(h),
                None => {
                    for h in handles {
                        cache.free(h);
                    }
                    return Err(NotSent::NoRoom);
                }
            }
        }
        let mut entries = Vec::with_capacity(parts);
        for (i, mut h) in handles.into_iter().enumerate() {
            let chunk =
                &bytes[(i * PAYLOAD).min(bytes.len())..((i + 1) * PAYLOAD).min(bytes.len())];
            let mut p = arena.pkt(&mut h);
            p.reset(HEADER + chunk.len());
            let d = p.data_mut();
            d[..4].copy_from_slice(&id.to_le_bytes());
            d[4..6].copy_from_slice(&(i as u16).to_le_bytes());
            d[6..8].copy_from_slice(&(parts as u16).to_le_bytes());
            d[HEADER..].copy_from_slice(chunk);
            let raw = h.into_raw();
            cache.pool().set_owner(raw, self.blob_tag);
            entries.push(EVENT_BIT | BLOB_BIT | raw);
        }
        let sent = self.enqueue_raw(&entries).map_err(NotSent::Corrupt)?;
        debug_assert_eq!(
            sent, parts,
            "room() said they fit and we are the only producer"
        );
        self.blobs_out += sent as u32;
        Ok(())
    }

    /// Whether message buffers came back since the last
    /// [`Self::take_blob_answers`] (one comparison: call that only then).
    #[inline]
    pub fn has_blob_answers(&self) -> bool {
        !self.blobs_back.is_empty()
    }

    /// The answers in the message buffers the NF handed back since the last
    /// call (collected by `recv`); frees the buffers.
    pub fn take_blob_answers(&mut self, arena: &Arena, cache: &mut PoolCache<'_>) -> Vec<Answer> {
        let mut answers = Vec::new();
        for raw in std::mem::take(&mut self.blobs_back) {
            let mut h = PktHandle::from_raw_owned(raw);
            {
                let p = arena.pkt(&mut h);
                let d = p.data();
                if d.len() >= HEADER {
                    let (id, index, count) = header(d);
                    if index == 0 && d.len() >= HEADER + 3 {
                        self.data_back = None;
                        let n = u16::from_le_bytes([d[HEADER + 1], d[HEADER + 2]]) as usize;
                        let body = d.get(HEADER + 3..HEADER + 3 + n).unwrap_or(&[]);
                        let status = d[HEADER];
                        if status == DATA && count > 1 {
                            // The rest follows in the next buffers, in order.
                            self.data_back = Some(Partial {
                                id,
                                next: 1,
                                count,
                                data: body.to_vec(),
                            });
                        } else {
                            answers.push(Answer {
                                id,
                                done: status == DONE || status == DATA,
                                text: if status == DATA {
                                    String::new()
                                } else {
                                    String::from_utf8_lossy(body).into_owned()
                                },
                                data: (status == DATA).then(|| body.to_vec()),
                            });
                        }
                    } else if let Some(part) = self
                        .data_back
                        .as_mut()
                        .filter(|part| part.id == id && part.next == index)
                    {
                        part.data.extend_from_slice(&d[HEADER..]);
                        part.next += 1;
                        if part.next == part.count {
                            let part = self.data_back.take().expect("just matched");
                            answers.push(Answer {
                                id,
                                done: true,
                                text: String::new(),
                                data: Some(part.data),
                            });
                        }
                    }
                }
            }
            debug_assert_eq!(cache.pool().owner(raw), Some(OWNER_PLATFORM));
            cache.free(h);
        }
        answers
    }
}

/// The NF's side: puts a message's buffers together, and hands them back
/// with the answer.
#[derive(Default)]
pub struct BlobReader {
    parts: Vec<PktHandle>,
}

impl BlobReader {
    /// Takes one buffer; returns the message id and bytes once all its
    /// buffers are here.
    pub fn push(&mut self, arena: &Arena, mut h: PktHandle) -> Option<(u32, Vec<u8>)> {
        let (id, _, count) = {
            let p = arena.pkt(&mut h);
            let d = p.data();
            if d.len() < HEADER {
                (u32::MAX, 0, 1)
            } else {
                header(d)
            }
        };
        self.parts.push(h);
        if self.parts.len() < usize::from(count.max(1)) {
            return None;
        }
        let mut bytes = Vec::new();
        for h in &mut self.parts {
            let p = arena.pkt(h);
            bytes.extend_from_slice(p.data().get(HEADER..).unwrap_or(&[]));
        }
        Some((id, bytes))
    }

    /// Hands every buffer of the message back with the answer (in the first).
    pub fn answer(
        &mut self,
        arena: &Arena,
        ep: &mut NfEndpoint<'_>,
        done: bool,
        text: &str,
    ) -> Result<(), RingCorrupt> {
        let status = if done { DONE } else { REFUSED };
        self.answer_with(arena, ep, status, text.as_bytes())
    }

    /// Bytes a data answer to the message being answered can hold.
    pub fn data_room(&self) -> usize {
        ANSWER_MAX + self.parts.len().saturating_sub(1) * PAYLOAD
    }

    /// Hands every buffer of the message back with `data` as the answer:
    /// its first [`ANSWER_MAX`] bytes in the first buffer, the rest in the
    /// next ones (at most [`Self::data_room`] bytes; more is cut, so split
    /// larger replies).
    pub fn answer_data(
        &mut self,
        arena: &Arena,
        ep: &mut NfEndpoint<'_>,
        data: &[u8],
    ) -> Result<(), RingCorrupt> {
        let first = data.len().min(ANSWER_MAX);
        let mut rest = &data[first..];
        for h in self.parts.iter_mut().skip(1) {
            let take = rest.len().min(PAYLOAD);
            let mut p = arena.pkt(h);
            // The header (id, index, count) stays as the platform wrote it.
            p.set_len(HEADER + take);
            p.data_mut()[HEADER..].copy_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        self.answer_with(arena, ep, DATA, &data[..first])
    }

    fn answer_with(
        &mut self,
        arena: &Arena,
        ep: &mut NfEndpoint<'_>,
        status: u8,
        body: &[u8],
    ) -> Result<(), RingCorrupt> {
        let body = &body[..body.len().min(ANSWER_MAX)];
        if let Some(first) = self.parts.first_mut() {
            let mut p = arena.pkt(first);
            p.set_len(HEADER + 3 + body.len());
            let d = p.data_mut();
            d[HEADER] = status;
            d[HEADER + 1..HEADER + 3].copy_from_slice(&(body.len() as u16).to_le_bytes());
            d[HEADER + 3..].copy_from_slice(body);
        }
        let entries: Vec<u32> = self
            .parts
            .drain(..)
            .map(|h| EVENT_BIT | BLOB_BIT | h.into_raw())
            .collect();
        // The transmit ring has room for a batch at least; a message is
        // smaller than a ring, so wait for room rather than lose a buffer.
        let mut at = 0;
        while at < entries.len() {
            let n = ep.send_entries(&entries[at..(at + MAX_BATCH).min(entries.len())])?;
            at += n;
            if n == 0 {
                ep.wake_platform();
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::ArenaConfig;
    use crate::link::RxEntry;
    use crate::pool::BufferPool;
    use crate::HandleBatch;

    /// An arena of one NF slot and `buffers` buffers, rings of 64.
    fn arena(buffers: u32) -> Arena {
        arena_of(buffers, 64)
    }

    fn arena_of(buffers: u32, ring_size: u32) -> Arena {
        Arena::create(ArenaConfig {
            buffers,
            ring_size,
            nf_slots: 1,
            workers: 1,
            hugepages: false,
            large_buffers: 0,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn a_message_crosses_in_ring_order_and_its_buffers_come_back_with_the_answer() {
        let a = arena_of(1024, 256);
        let pool = BufferPool::new(a.buffers());
        let mut cache = PoolCache::new(&pool, 32);
        let mut link = NfLink::new(&a, 0);
        let mut nf = NfEndpoint::new(&a, 0, 0);
        let mut before = HandleBatch::new();
        before.push(cache.alloc().unwrap()).unwrap();
        link.send(&pool, &mut before).unwrap();
        let msg: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        link.send_blob(&a, &mut cache, 7, &msg).unwrap();
        assert_eq!(
            link.send_blob(&a, &mut cache, 8, &vec![0; 200_000]),
            Err(NotSent::TooLarge)
        );
        let mut raw = [0u32; 16];
        let n = nf.recv_raw(&mut raw).unwrap();
        assert_eq!(n, 4, "one packet, then three message buffers");
        let mut reader = BlobReader::default();
        let mut got = None;
        let mut packets = HandleBatch::new();
        for &r in &raw[..n] {
            match nf.decode(r) {
                Some(RxEntry::Packet(h)) => {
                    assert!(got.is_none(), "the packet came before the message");
                    packets.push(h).unwrap();
                }
                Some(RxEntry::Blob(h)) => got = reader.push(&a, h).or(got),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(got, Some((7, msg)));
        reader.answer(&a, &mut nf, true, "reconfigured").unwrap();
        nf.send(&mut packets).unwrap();
        let mut out = HandleBatch::new();
        let o = link.recv(&pool, &mut out, 64).unwrap();
        assert_eq!((o.received, o.invalid), (1, 0));
        let answers = link.take_blob_answers(&a, &mut cache);
        assert_eq!(
            answers,
            vec![Answer {
                id: 7,
                done: true,
                text: "reconfigured".into(),
                data: None,
            }]
        );
        out.drain(|h| cache.free(h));
        drop(cache);
        assert_eq!(pool.audit().free, a.buffers());
    }

    #[test]
    fn a_data_answer_carries_its_bytes_back_whole() {
        let a = arena(256);
        let pool = BufferPool::new(a.buffers());
        let mut cache = PoolCache::new(&pool, 32);
        let mut link = NfLink::new(&a, 0);
        let mut nf = NfEndpoint::new(&a, 0, 0);
        let data: Vec<u8> = (0..4 * PAYLOAD).map(|i| (i * 7 + i / 251) as u8).collect();
        let room3 = ANSWER_MAX + 2 * PAYLOAD;
        for (id, parts, len) in [
            (1u32, 1usize, 0usize),
            (2, 1, 5),
            (3, 1, ANSWER_MAX),
            (4, 1, ANSWER_MAX + 50),
            (5, 3, 7),
            (6, 3, ANSWER_MAX + 10),
            (7, 3, room3),
            (8, 3, room3 + 100),
        ] {
            let msg = vec![id as u8; parts * PAYLOAD];
            link.send_blob(&a, &mut cache, id, &msg).unwrap();
            let mut raw = [0u32; 4];
            assert_eq!(nf.recv_raw(&mut raw).unwrap(), parts);
            let mut reader = BlobReader::default();
            let mut got_msg = None;
            for &r in &raw[..parts] {
                let Some(RxEntry::Blob(h)) = nf.decode(r) else {
                    panic!("a message buffer")
                };
                got_msg = reader.push(&a, h);
            }
            assert_eq!(got_msg, Some((id, msg)));
            let room = reader.data_room();
            assert_eq!(room, ANSWER_MAX + (parts - 1) * PAYLOAD);
            reader.answer_data(&a, &mut nf, &data[..len]).unwrap();
            // The buffers come back one receive at a time: the answer is
            // whole only with the last.
            let mut got = Vec::new();
            for _ in 0..parts {
                let mut out = HandleBatch::new();
                link.recv(&pool, &mut out, 1).unwrap();
                assert!(got.is_empty(), "whole only with its last buffer");
                got = link.take_blob_answers(&a, &mut cache);
            }
            let want = &data[..len.min(room)];
            assert_eq!(got.len(), 1, "message {id}");
            assert!(got[0].done && got[0].text.is_empty());
            assert_eq!(got[0].data.as_deref(), Some(want), "{len} bytes asked");
        }
        drop(cache);
        assert_eq!(pool.audit().free, a.buffers());
    }

    #[test]
    fn a_dead_nf_s_message_buffers_are_reclaimed_as_messages() {
        let a = arena(256);
        let pool = BufferPool::new(a.buffers());
        let mut cache = PoolCache::new(&pool, 32);
        let mut link = NfLink::new(&a, 0);
        link.send_blob(&a, &mut cache, 1, b"cfg").unwrap();
        let r = link.reclaim(&mut cache);
        assert_eq!((r.packets, r.messages), (0, 1));
        drop(cache);
        assert_eq!(pool.audit().free, a.buffers());
    }
}
