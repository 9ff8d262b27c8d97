//! The extra keys of the kernel port kinds (everything besides `name`,
//! `kind` and `interface`), decoded and checked when the spec is compiled
//! so a typo fails as a located spec error before anything opens.

use serde::Deserialize;
use sluice_spec::{ConfigNode, SpecError};

/// Most sockets (or tap queues) one port may open.
pub const MAX_QUEUES: u16 = 16;

/// How a PACKET_FANOUT group spreads frames over the port's sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FanoutMode {
    /// By flow hash (both directions of a flow land on one socket).
    #[default]
    Hash,
    /// Round robin.
    Lb,
    /// By the CPU that received the frame.
    Cpu,
}

/// Which TPACKET ring layout an `af_packet` port receives with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum RingVersion {
    /// TPACKET_V3: blocks of variable-size frames, handed over per block
    /// (fewest wake-ups; a lone frame waits up to `block_timeout_ms`).
    #[default]
    V3,
    /// TPACKET_V2: fixed 2 KiB slots handed over per frame (lowest latency).
    V2,
}

/// Settings of an `af_packet` port.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AfPacketOptions {
    /// Sockets in one PACKET_FANOUT group (`queues`, 1..=16, default 1).
    pub queues: u16,
    /// Fanout mode when `queues > 1` (`fanout`: hash, lb, cpu; default hash).
    pub fanout: FanoutMode,
    /// Fanout group id (`fanout_group`); default derived from the process
    /// id and interface, unique on the host.
    pub fanout_group: Option<u16>,
    /// Receive frames addressed to other hosts (`promiscuous`, default true:
    /// a bump in the wire forwards everything).
    pub promiscuous: bool,
    /// Bytes per receive-ring block (`block_size`, a power of two from
    /// 4096 to 4 MiB, default 256 KiB).
    pub block_size: u32,
    /// Blocks in the receive ring (`blocks`, 2..=1024, default 16, or
    /// [`OFFLOAD_BLOCKS`] with `offload: true`).
    pub blocks: u32,
    /// How long the kernel may keep a partly filled block before handing
    /// it over (`block_timeout_ms`, 1..=1000, default 1). This bounds the
    /// latency a lone packet sees.
    pub block_timeout_ms: u32,
    /// Send without the interface's queueing discipline
    /// (`qdisc_bypass`, default false).
    pub qdisc_bypass: bool,
    /// Receive ring layout (`ring`: v3 or v2, default v3).
    pub ring: RingVersion,
    /// Exchange virtio-net headers with the kernel (`PACKET_VNET_HDR`,
    /// `offload`, default false): GSO/GRO super-packets of up to 64 KiB
    /// and frames with partial checksums are received whole with their
    /// offload state, and sent back out as such for the kernel to segment.
    pub offload: bool,
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            queues: 1,
            fanout: FanoutMode::Hash,
            fanout_group: None,
            promiscuous: true,
            block_size: 256 * 1024,
            blocks: 16,
            block_timeout_ms: 1,
            qdisc_bypass: false,
            ring: RingVersion::V3,
            offload: false,
        }
    }
}

/// Settings of a `tap` port.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TapOptions {
    /// Queues of a multi-queue tap (`queues`, 1..=16, default 1).
    pub queues: u16,
    /// Exchange virtio-net headers with the kernel (`IFF_VNET_HDR` and
    /// `TUNSETOFFLOAD` for checksum and TCP segmentation offload;
    /// `offload`, default false): the host stack then sends sluice
    /// super-packets of up to 64 KiB and takes them back unsegmented.
    pub offload: bool,
}

impl Default for TapOptions {
    fn default() -> Self {
        TapOptions {
            queues: 1,
            offload: false,
        }
    }
}

fn decode<T: for<'de> Deserialize<'de> + Default>(node: &ConfigNode) -> Result<T, SpecError> {
    if node.is_null() || node.as_map().is_some_and(|m| m.is_empty()) {
        return Ok(T::default());
    }
    node.deserialize()
}

fn check_queues(node: &ConfigNode, queues: u16) -> Result<(), SpecError> {
    if !(1..=MAX_QUEUES).contains(&queues) {
        return Err(node.error_at_path(
            "queues",
            format!("queues must be between 1 and {MAX_QUEUES}, not {queues}"),
        ));
    }
    Ok(())
}

/// Default receive-ring blocks with `offload: true`: 16 MiB of 256 KiB
/// blocks, room for ≈ 250 super-packets. The default 4 MiB holds ≈ 60, and
/// a worker that loses its core for a few milliseconds under a 10 Gbit/s
/// TCP stream then drops whole super-packets (measured: 10–50 ring drops
/// and 300–2200 retransmissions in 4 s with 4 MiB, none and 4–6 with 16 MiB).
pub const OFFLOAD_BLOCKS: u32 = 64;

impl AfPacketOptions {
    /// Decodes and checks the options node of an `af_packet` port.
    pub fn from_node(node: &ConfigNode) -> Result<AfPacketOptions, SpecError> {
        let mut o: AfPacketOptions = decode(node)?;
        if o.offload && node.get("blocks").is_none() {
            o.blocks = OFFLOAD_BLOCKS;
        }
        check_queues(node, o.queues)?;
        if !o.block_size.is_power_of_two() || !(4096..=4 << 20).contains(&o.block_size) {
            return Err(node.error_at_path(
                "block_size",
                format!(
                    "block_size must be a power of two from 4096 to 4194304, not {}",
                    o.block_size
                ),
            ));
        }
        if !(2..=1024).contains(&o.blocks) {
            return Err(node.error_at_path(
                "blocks",
                format!("blocks must be between 2 and 1024, not {}", o.blocks),
            ));
        }
        if !(1..=1000).contains(&o.block_timeout_ms) {
            return Err(node.error_at_path(
                "block_timeout_ms",
                format!(
                    "block_timeout_ms must be between 1 and 1000, not {}",
                    o.block_timeout_ms
                ),
            ));
        }
        Ok(o)
    }
}

impl TapOptions {
    /// Decodes and checks the options node of a `tap` port.
    pub fn from_node(node: &ConfigNode) -> Result<TapOptions, SpecError> {
        let o: TapOptions = decode(node)?;
        check_queues(node, o.queues)?;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(json: &str) -> ConfigNode {
        ConfigNode::from_json(serde_json::from_str(json).unwrap()).with_path("ports[0]")
    }

    #[test]
    fn defaults_apply_to_an_empty_node() {
        assert_eq!(
            AfPacketOptions::from_node(&node("{}")).unwrap(),
            AfPacketOptions::default()
        );
        assert_eq!(TapOptions::from_node(&node("null")).unwrap().queues, 1);
    }

    #[test]
    fn keys_decode() {
        let o = AfPacketOptions::from_node(&node(
            r#"{"queues": 4, "fanout": "lb", "promiscuous": false, "block_timeout_ms": 5, "ring": "v2"}"#,
        ))
        .unwrap();
        assert_eq!(o.queues, 4);
        assert_eq!(o.fanout, FanoutMode::Lb);
        assert!(!o.promiscuous);
        assert_eq!(o.block_timeout_ms, 5);
        assert_eq!(o.ring, RingVersion::V2);
    }

    #[test]
    fn bad_values_name_the_field() {
        let e = AfPacketOptions::from_node(&node(r#"{"queues": 0}"#)).unwrap_err();
        assert_eq!(e.field, "ports[0].queues");
        assert!(e.message.contains("between 1 and 16"), "{}", e.message);
        let e = AfPacketOptions::from_node(&node(r#"{"block_size": 5000}"#)).unwrap_err();
        assert_eq!(e.field, "ports[0].block_size");
        let e = AfPacketOptions::from_node(&node(r#"{"fanuot": "hash"}"#)).unwrap_err();
        assert!(e.message.contains("fanuot"), "{}", e.message);
        assert!(
            AfPacketOptions::from_node(&node(r#"{"offload": true}"#))
                .unwrap()
                .offload
        );
        assert!(
            TapOptions::from_node(&node(r#"{"offload": true}"#))
                .unwrap()
                .offload
        );
        let e = TapOptions::from_node(&node(r#"{"queues": 17}"#)).unwrap_err();
        assert_eq!(e.field, "ports[0].queues");
    }
}
