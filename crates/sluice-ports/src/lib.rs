//! Traffic ports for sluice: a fast synthetic traffic generator, a
//! measuring sink, and pcap file I/O.
//!
//! The data plane owns packet buffers (in shared memory) and calls into this
//! crate with plain byte slices; nothing here knows about the arena, and
//! nothing here uses `unsafe`.
//!
//! * [`generator`]: pre-built per-flow frame templates, patched per packet
//!   with RFC 1624 incremental checksum updates ([`Generator`]).
//! * [`sink`]: packet/byte counters, an HDR latency histogram and per-flow
//!   ordering checks ([`Sink`]).
//! * [`stamp`]: the 24-byte measurement [`Stamp`] the generator puts at the
//!   start of every payload that has room for it, and the sink reads back.
//! * [`pcap`]: classic libpcap reader/writer and a replay [`pcap::Pacer`].

pub mod generator;
pub mod pcap;
pub mod sink;
pub mod stamp;

mod rng;

pub use generator::{
    ConfigError, Generator, GeneratorConfig, GeneratorStats, IpVersionChoice, Protocol, Shard,
    SizeSpec,
};
pub use pcap::{Pacer, PcapError, PcapReader, PcapReplay, PcapWriter};
pub use sink::{LatencySummary, Sink, SinkConfig, SinkReport};
pub use stamp::Stamp;
