//! Shared packet memory for sluice: the arena, packet buffers and their
//! ownership, descriptor rings, wake words, doorbells and NF control blocks.
//!
//! This crate holds nearly all of sluice's `unsafe` code, in two places:
//! mapping the arena and viewing its regions ([`arena`]), and viewing a batch
//! slot as a handle ([`buffer`]). Everything else is built on atomics and
//! safe slices. The ring, the pool, the wake words and the doorbells are model-checked with loom
//! (`RUSTFLAGS="--cfg loom" cargo test -p sluice-mem --test loom --release`).
#![allow(unsafe_code)]
#![cfg_attr(loom, allow(dead_code, unused_imports))]

#[cfg(not(loom))]
pub mod arena;
pub mod batch;
pub mod buffer;
#[cfg(not(loom))]
pub mod control;
#[cfg(not(loom))]
pub mod crossing;
pub mod doorbell;
#[cfg(not(loom))]
pub mod link;
#[cfg(not(loom))]
pub mod link_blob;
pub mod pool;
pub mod ring;
pub mod sync;
pub mod turn;
pub mod wake;

#[cfg(not(loom))]
pub use arena::{Arena, ArenaConfig, ArenaError, Backing, DmaRegion};
pub use batch::{HandleBatch, HandlesMut, MAX_BATCH};
pub use buffer::{
    Pkt, PktHandle, BUF_STRIDE, DATA_ROOM, DATA_START, HEADROOM, LARGE_DATA_ROOM, LARGE_STRIDE,
    MAX_PKT_LEN, META_SIZE,
};
#[cfg(not(loom))]
pub use control::{ExtCounters, NfControl, NfStats, EXT_COUNTERS, NF_COUNTERS};
#[cfg(not(loom))]
pub use crossing::{cross_into, Crossed};
pub use doorbell::{BellWord, BELLS_PER_WORD};
#[cfg(not(loom))]
pub use link::{
    NfEndpoint, NfLink, Reclaimed, RecvOutcome, RxEntry, BLOB_BIT, EVENT_BIT, SPARE_BIT,
};
#[cfg(not(loom))]
pub use link_blob::{BlobReader, NotSent, ANSWER_MAX};
pub use pool::{Audit, BufferPool, Claim, PoolCache};
pub use ring::{Consumer, Producer, RingCorrupt, RingRef, RingShared};
pub use turn::{Budget, CoreTurn};
pub use wake::WakeWord;
