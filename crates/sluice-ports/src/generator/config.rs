//! Generator configuration and its validation errors.

use std::fmt;

use ipnet::IpNet;
use sluice_packet::MacAddr;

/// Largest frame the generator writes; the data plane's buffers are at
/// least this large.
pub const MAX_FRAME_LEN: usize = 2048;

/// Transport protocol of the generated flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Long-lived UDP flows.
    Udp,
    /// TCP connections: SYN, data, FIN, then a new connection (churn).
    Tcp,
    /// Alternating per flow: even flow indices UDP, odd ones TCP.
    Mixed,
}

/// IP version of the generated flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersionChoice {
    /// IPv4 only.
    V4,
    /// IPv6 only.
    V6,
    /// Alternating per flow (see [`GeneratorConfig`] for how the addresses
    /// of the IPv6 flows are derived).
    Mixed,
}

/// Frame size distribution.  Sizes are frame lengths *without* the 4-byte
/// Ethernet FCS, i.e. the number of bytes written into the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizeSpec {
    /// Every frame has this length, raised if needed to the headers plus a
    /// full [`crate::Stamp`] (66 B for IPv4/UDP, 78 B for IPv4/TCP, 86 B
    /// for IPv6/UDP, 98 B for IPv6/TCP), so fixed-size traffic is always
    /// stamped.  At most [`MAX_FRAME_LEN`].
    Fixed(u16),
    /// Simple IMIX: 7:4:1 of 64, 570 and 1518-byte frames *on the wire*
    /// (with FCS), i.e. 60, 566 and 1514 bytes written, so the largest
    /// class is exactly a 1500-byte MTU packet.  A class smaller than the
    /// headers is raised to the header length; frames without room for a
    /// stamp carry none.  See [`IMIX_FRAME_LENS`].
    Imix,
    /// Datacenter-like bimodal mix: 50 % small frames around 200 B and
    /// 50 % large frames around 1400 B, each spread over four sizes for a
    /// little jitter.  See [`DATACENTER_FRAME_LENS`].
    Datacenter,
}

/// Frame lengths (without FCS) and weights of [`SizeSpec::Imix`].
pub const IMIX_FRAME_LENS: [(u16, u32); 3] = [(60, 7), (566, 4), (1514, 1)];

/// Frame lengths (without FCS) of [`SizeSpec::Datacenter`], all equally
/// likely: four around 200 B and four around 1400 B.
pub const DATACENTER_FRAME_LENS: [u16; 8] = [184, 196, 208, 220, 1376, 1392, 1408, 1424];

/// Traffic generator configuration.
///
/// Addresses: each flow's source and destination hosts are drawn from
/// `src_prefix` / `dst_prefix` (deterministically from `seed`).  IPv4
/// flows need IPv4 prefixes and IPv6 flows IPv6 prefixes, except that with
/// [`IpVersionChoice::Mixed`] and IPv4 prefixes the IPv6 flows use the
/// drawn IPv4 hosts embedded in the well-known NAT64 prefix `64:ff9b::/96`
/// (RFC 6052).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorConfig {
    /// Number of concurrent flows (flow slots), at least 1.  Packets are
    /// sent round-robin over the flows.
    pub flows: u32,
    /// Transport protocol.
    pub protocol: Protocol,
    /// IP version.
    pub ip_version: IpVersionChoice,
    /// Frame size distribution.
    pub size: SizeSpec,
    /// Packets per second, `None` = unlimited (see [`super::Generator::due`]).
    pub rate_pps: Option<u64>,
    /// Stop after this many packets.
    pub count: Option<u64>,
    /// Stop this many ns after the first call to `due`/`write_next`.
    pub duration_ns: Option<u64>,
    /// Packets per TCP connection including its SYN and FIN (values below
    /// 2 other than 0 are raised to 2); `0` = TCP connections never close.
    /// UDP flows are long-lived regardless.
    pub packets_per_flow: u32,
    /// Prefix the source hosts are drawn from.
    pub src_prefix: IpNet,
    /// Prefix the destination hosts are drawn from.
    pub dst_prefix: IpNet,
    /// Inclusive source port range.
    pub src_ports: (u16, u16),
    /// Inclusive destination port range.
    pub dst_ports: (u16, u16),
    /// Seed of every random choice (tuples, ISNs, size classes).
    pub seed: u64,
    /// Added to the flow index written in each [`crate::Stamp`], so several
    /// generators (one per worker) feeding one sink have distinct flow ids.
    pub flow_id_base: u32,
    /// Which share of the flows this generator sends when several workers
    /// each run one (RSS-style sharding; see [`Shard`]).
    pub shard: Shard,
    /// Source MAC address of every frame.
    pub src_mac: MacAddr,
    /// Destination MAC address of every frame.
    pub dst_mac: MacAddr,
}

impl Default for GeneratorConfig {
    /// 1024 UDP/IPv4 flows of 64-byte frames (raised to 66 for the stamp)
    /// from 10.0.0.0/16 to 10.1.0.0/16, unlimited rate and count,
    /// 16 packets per TCP connection, locally administered MACs.
    fn default() -> Self {
        GeneratorConfig {
            flows: 1024,
            protocol: Protocol::Udp,
            ip_version: IpVersionChoice::V4,
            size: SizeSpec::Fixed(64),
            rate_pps: None,
            count: None,
            duration_ns: None,
            packets_per_flow: 16,
            src_prefix: "10.0.0.0/16".parse().expect("valid literal"),
            dst_prefix: "10.1.0.0/16".parse().expect("valid literal"),
            src_ports: (1024, 65535),
            dst_ports: (1, 1023),
            seed: 0x5eed,
            flow_id_base: 0,
            shard: Shard::WHOLE,
            src_mac: MacAddr::new(0x02, 0, 0, 0, 0, 0x01),
            dst_mac: MacAddr::new(0x02, 0, 0, 0, 0, 0x02),
        }
    }
}

/// One of `count` generators that together send the flows of one
/// configuration: shard `index` sends flow slots `i` with
/// `i % count == index` (the same 5-tuples and stamps as the unsharded
/// generator would send), and its share of `rate_pps` and `count`
/// in proportion to its flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This shard, `0..count`.
    pub index: u32,
    /// Number of shards, at least 1 and at most `flows`.
    pub count: u32,
}

impl Shard {
    /// The unsharded generator.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// Flow slots of shards `0..k` out of `flows`.
    fn flows_before(self, k: u32, flows: u32) -> u64 {
        // Slots i < flows with i % count < k.
        let (q, r) = (flows / self.count, flows % self.count);
        u64::from(q) * u64::from(k) + u64::from(r.min(k))
    }

    /// Whether flow slot `i` belongs to this shard.
    pub fn owns(self, i: u32) -> bool {
        i % self.count == self.index
    }

    /// This shard's part of a total (rate, packet count) shared in
    /// proportion to flows; the parts of all shards add up to `total`.
    pub fn part_of(self, total: u64, flows: u32) -> u64 {
        let f = u64::from(flows.max(1));
        let lo = self.flows_before(self.index, flows);
        let hi = self.flows_before(self.index + 1, flows);
        let at = |n: u64| (u128::from(total) * u128::from(n) / u128::from(f)) as u64;
        at(hi) - at(lo)
    }
}

/// Why a [`GeneratorConfig`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `flows` is 0.
    NoFlows,
    /// `rate_pps` is `Some(0)`.
    ZeroRate,
    /// A port range has `lo > hi`.
    BadPortRange {
        /// Which range (`"src_ports"` or `"dst_ports"`).
        which: &'static str,
    },
    /// A prefix's address family cannot serve the requested IP version.
    PrefixFamily {
        /// Which prefix (`"src_prefix"` or `"dst_prefix"`).
        which: &'static str,
        /// What was needed.
        need: &'static str,
    },
    /// A fixed frame size above [`MAX_FRAME_LEN`].
    FrameTooLarge(u16),
    /// Not enough distinct 5-tuples in the prefixes and port ranges for
    /// the requested number of flows.
    TooManyFlows {
        /// Flows requested.
        flows: u32,
    },
    /// A shard index out of range, or more shards than flows (a shard
    /// would send nothing).
    BadShard(Shard),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NoFlows => write!(f, "generator needs at least one flow"),
            ConfigError::ZeroRate => {
                write!(f, "rate_pps must be positive (use None for unlimited)")
            }
            ConfigError::BadPortRange { which } => write!(f, "{which}: low port above high port"),
            ConfigError::PrefixFamily { which, need } => write!(f, "{which} must be {need}"),
            ConfigError::FrameTooLarge(n) => {
                write!(f, "fixed frame size {n} exceeds {MAX_FRAME_LEN} bytes")
            }
            ConfigError::TooManyFlows { flows } => write!(
                f,
                "cannot draw {flows} distinct 5-tuples from the configured prefixes and ports"
            ),
            ConfigError::BadShard(s) => write!(
                f,
                "shard {} of {} is invalid (needs index < count <= flows)",
                s.index, s.count
            ),
        }
    }
}

impl std::error::Error for ConfigError {}
