//! Ports: where traffic enters and leaves the platform.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::config_node::ConfigNode;
use crate::location::Location;
use crate::net::PortRange;

/// A named port (`ports[i]`).
#[derive(Clone, Debug, PartialEq)]
pub struct PortSpec {
    /// Unique name (`[a-z0-9_-]{1,32}`, unique across ports, NFs and chains).
    pub name: String,
    /// What kind of port, with its kind-specific settings.
    pub kind: PortKind,
    /// Where the port was declared ([`Location::GENERATED`] if built by code).
    pub location: Location,
}

impl PortSpec {
    /// A port built by code (generated location).
    pub fn new(name: impl Into<String>, kind: PortKind) -> PortSpec {
        PortSpec {
            name: name.into(),
            kind,
            location: Location::GENERATED,
        }
    }
}

/// The kind of a port and its settings (`kind:` selects the variant).
#[derive(Clone, Debug, PartialEq)]
pub enum PortKind {
    /// Synthetic traffic source (`generator`).
    Generator(GeneratorSpec),
    /// Traffic sink that counts and checks packets (`sink`).
    Sink(SinkSpec),
    /// Replays a pcap file (`pcap_in`).
    PcapIn(PcapInSpec),
    /// Writes packets to a pcap file (`pcap_out`).
    PcapOut(PcapOutSpec),
    /// AF_XDP socket on a NIC (`af_xdp`).
    AfXdp(NicSpec),
    /// AF_PACKET socket on a NIC (`af_packet`).
    AfPacket(NicSpec),
    /// TAP device sluice creates (`tap`).
    Tap(NicSpec),
    /// DPDK port (`dpdk`).
    Dpdk(NicSpec),
}

impl PortKind {
    /// Every kind name accepted in `kind:`, in documentation order.
    pub const NAMES: [&'static str; 8] = [
        "generator",
        "sink",
        "pcap_in",
        "pcap_out",
        "af_xdp",
        "af_packet",
        "tap",
        "dpdk",
    ];

    /// The `kind:` name of this port kind.
    pub fn kind_name(&self) -> &'static str {
        match self {
            PortKind::Generator(_) => "generator",
            PortKind::Sink(_) => "sink",
            PortKind::PcapIn(_) => "pcap_in",
            PortKind::PcapOut(_) => "pcap_out",
            PortKind::AfXdp(_) => "af_xdp",
            PortKind::AfPacket(_) => "af_packet",
            PortKind::Tap(_) => "tap",
            PortKind::Dpdk(_) => "dpdk",
        }
    }

    /// Whether traffic can enter through this port (usable as a chain's `from`).
    pub fn is_input(&self) -> bool {
        !matches!(self, PortKind::Sink(_) | PortKind::PcapOut(_))
    }

    /// Whether traffic can leave through this port (usable as a chain's `to`).
    pub fn is_output(&self) -> bool {
        !matches!(self, PortKind::Generator(_) | PortKind::PcapIn(_))
    }

    /// Whether this is a NIC kind (`af_xdp`, `af_packet`, `tap`, `dpdk`;
    /// the name predates their runtime support).
    pub fn is_reserved(&self) -> bool {
        self.nic().is_some()
    }

    /// The settings of the NIC kinds.
    pub fn nic(&self) -> Option<&NicSpec> {
        match self {
            PortKind::AfXdp(n) | PortKind::AfPacket(n) | PortKind::Tap(n) | PortKind::Dpdk(n) => {
                Some(n)
            }
            _ => None,
        }
    }
}

impl fmt::Display for PortKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind_name())
    }
}

/// Settings of a `generator` port.
#[derive(Clone, Debug, PartialEq)]
pub struct GeneratorSpec {
    /// Concurrent flows (`flows`, 1..=1000000, default 64).
    pub flows: u32,
    /// L4 protocol (`protocol`, default `udp`).
    pub protocol: Protocol,
    /// IP version (`ip_version`, default 4).
    pub ip_version: IpVersionChoice,
    /// Frame sizes (`size`, default 64).
    pub size: SizeSpec,
    /// Packets per second (`rate_pps`); `None` = as fast as possible.
    pub rate_pps: Option<u64>,
    /// Total packets to send (`count`); `None` (or `count: 0`) = unlimited.
    pub count: Option<u64>,
    /// TCP: packets from SYN to FIN before the flow closes and a new one
    /// opens (`packets_per_flow`, at least 3, default 1000).
    pub packets_per_flow: u32,
    /// Source addresses (`src_prefix`). Default `10.0.0.0/16`, or `fd00::/64`
    /// with `ip_version: 6`.
    pub src_prefix: IpNet,
    /// Destination addresses (`dst_prefix`). Default `10.1.0.0/16`, or
    /// `fd01::/64` with `ip_version: 6`.
    pub dst_prefix: IpNet,
    /// Source ports (`src_ports`, default `1024-65535`).
    pub src_ports: PortRange,
    /// Destination ports (`dst_ports`, default `80`).
    pub dst_ports: PortRange,
}

impl GeneratorSpec {
    /// The default `src_prefix` for an IP version choice.
    pub fn default_src_prefix(ip_version: IpVersionChoice) -> IpNet {
        match ip_version {
            IpVersionChoice::V6 => IpNet::V6(
                Ipv6Net::new(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0), 64).unwrap_or_default(),
            ),
            _ => IpNet::V4(Ipv4Net::new(Ipv4Addr::new(10, 0, 0, 0), 16).unwrap_or_default()),
        }
    }

    /// The default `dst_prefix` for an IP version choice.
    pub fn default_dst_prefix(ip_version: IpVersionChoice) -> IpNet {
        match ip_version {
            IpVersionChoice::V6 => IpNet::V6(
                Ipv6Net::new(Ipv6Addr::new(0xfd01, 0, 0, 0, 0, 0, 0, 0), 64).unwrap_or_default(),
            ),
            _ => IpNet::V4(Ipv4Net::new(Ipv4Addr::new(10, 1, 0, 0), 16).unwrap_or_default()),
        }
    }

    /// The (source, destination) prefixes to use for packets of IP version
    /// `v6 ? 6 : 4`. With `ip_version: mixed` the prefixes are IPv4 and the
    /// IPv6 flows embed them in `64:ff9b::/96` (RFC 6052), e.g. `10.0.0.0/16`
    /// becomes `64:ff9b::a00:0/112`. Otherwise the configured prefixes are
    /// returned as they are.
    pub fn prefixes_for(&self, v6: bool) -> (IpNet, IpNet) {
        let embed = |net: IpNet| match net {
            IpNet::V4(v4) if v6 => {
                let mut octets = [0u8; 16];
                octets[..4].copy_from_slice(&[0x00, 0x64, 0xff, 0x9b]);
                octets[12..].copy_from_slice(&v4.network().octets());
                Ipv6Net::new(Ipv6Addr::from(octets), 96 + v4.prefix_len())
                    .map(IpNet::V6)
                    .unwrap_or(net)
            }
            other => other,
        };
        (embed(self.src_prefix), embed(self.dst_prefix))
    }
}

impl Default for GeneratorSpec {
    fn default() -> Self {
        GeneratorSpec {
            flows: 64,
            protocol: Protocol::Udp,
            ip_version: IpVersionChoice::V4,
            size: SizeSpec::Fixed(64),
            rate_pps: None,
            count: None,
            packets_per_flow: 1000,
            src_prefix: GeneratorSpec::default_src_prefix(IpVersionChoice::V4),
            dst_prefix: GeneratorSpec::default_dst_prefix(IpVersionChoice::V4),
            src_ports: PortRange {
                lo: 1024,
                hi: 65_535,
            },
            dst_ports: PortRange::single(80),
        }
    }
}

/// Generator L4 protocol (`protocol`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// UDP datagrams (`udp`).
    #[default]
    Udp,
    /// TCP flows with SYN, data and FIN (`tcp`).
    Tcp,
    /// Half UDP, half TCP flows (`mixed`).
    Mixed,
}

spec_names!(Protocol {
    Udp = "udp",
    Tcp = "tcp",
    Mixed = "mixed",
});

/// Generator IP version (`ip_version`: `4`, `6` or `mixed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IpVersionChoice {
    /// IPv4 only (`4`).
    #[default]
    V4,
    /// IPv6 only (`6`).
    V6,
    /// Half IPv4, half IPv6 flows (`mixed`); see [`GeneratorSpec::prefixes_for`].
    Mixed,
}

/// Generator frame sizes (`size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SizeSpec {
    /// Every frame has this many bytes (60..=2048).
    Fixed(u16),
    /// Simple IMIX: 64, 570 and 1518 byte frames in the ratio 7:4:1 (`imix`).
    Imix,
    /// Bimodal data-center mix around 200 and 1400 bytes (`datacenter`).
    Datacenter,
}

impl Default for SizeSpec {
    fn default() -> Self {
        SizeSpec::Fixed(64)
    }
}

/// Settings of a `sink` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkSpec {
    /// Check per-flow packet order (`check_order`, default true).
    pub check_order: bool,
}

impl Default for SinkSpec {
    fn default() -> Self {
        SinkSpec { check_order: true }
    }
}

/// Settings of a `pcap_in` port.
#[derive(Clone, Debug, PartialEq)]
pub struct PcapInSpec {
    /// The trace file (`path`), already resolved against the spec file's
    /// directory. Must exist when the spec is loaded.
    pub path: PathBuf,
    /// Replay speed (`pace`): `None` = as fast as possible (`pace: false`,
    /// the default); `Some(1.0)` = original timing (`pace: true`);
    /// `Some(f)` = `f` times faster than recorded (`pace: f`, `f > 0`).
    pub pace: Option<f64>,
    /// Times to replay the file (`loops`, default 1; 0 = forever).
    pub loops: u32,
}

/// Settings of a `pcap_out` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcapOutSpec {
    /// The file to write (`path`), already resolved against the spec file's
    /// directory. Its parent directory must exist.
    pub path: PathBuf,
    /// Bytes kept per packet (`snaplen`, 1..=262144, default 65535).
    pub snaplen: u32,
}

/// Settings of the NIC kinds (`af_xdp`, `af_packet`, `tap`, `dpdk`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NicSpec {
    /// Network interface (`interface`), required and non-empty.
    pub interface: String,
    /// Every other key of the port (kind-specific options such as
    /// `queues`), kept as a located mapping that `sluice-nic` decodes.
    pub options: ConfigNode,
}
