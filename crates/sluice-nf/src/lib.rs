//! The sluice NF SDK: write a network function once, run it inline or as
//! an isolated process.
//!
//! An NF implements [`NetworkFunction`]: it receives a [`Batch`] of packets
//! and gives each a [`Verdict`] (next hop, a named NF, a port, or drop with a
//! [`DropReason`]); it may keep per-flow state and release it in
//! [`NetworkFunction::flow_end`]. An [`NfType`] describes how to build it from
//! its spec config. See `docs/writing-an-nf.md` for a worked example.

pub mod batch;
pub mod checkpoint;
pub mod context;
pub mod drop_reason;
pub mod graph;
pub mod harness;
pub mod name;
pub mod nf;
pub mod owned;
pub mod packet;
pub mod runtime;
pub mod state;
pub mod state_check;
pub mod verdict;

pub use batch::{Batch, PacketsMut};
pub use context::{Context, NO_CHAIN};
pub use drop_reason::DropReason;
pub use name::NfName;
pub use nf::{
    downcast, BuildContext, BuildFn, FrameNeeds, IngressPort, NetworkFunction, NfType, Resolver,
};
pub use owned::{OwnedPacket, PacketIo};
pub use packet::Packet;
pub use state::{StateError, StateReader, StateWriter};
pub use verdict::{NfId, PortId, Verdict};

/// Most packets in one batch, and most packets one NF call may emit.
pub use sluice_mem::MAX_BATCH;
