//! Typed, bounds-checked, zero-copy packet header views for sluice.
//!
//! Everything in this crate works on borrowed byte buffers: no allocation,
//! no `unsafe`, and no panics on any input bytes.
//!
//! * Header views ([`ethernet::EthernetFrame`], [`ipv4::Ipv4Packet`],
//!   [`tcp::TcpSegment`], ...) wrap any `T: AsRef<[u8]>` and are created with
//!   `new_checked`, which validates the length and the structural fields of
//!   the header.  Getters read fields in place; setters are available when
//!   `T: AsMut<[u8]>`.  Getters never panic, even after a setter wrote an
//!   inconsistent length field: variable-length slices are clamped to the
//!   buffer.
//! * [`parse::parse`] is the one-pass header walk used on the hot path and
//!   returns a small `Copy` [`parse::Headers`] of offsets.
//! * [`flow::flow_key`] extracts a 5-tuple [`flow::FlowKey`] with a
//!   direction-independent hash.
//! * [`builder::write_frame`] emits complete, checksum-correct frames.
//! * [`checksum`] holds the RFC 1071 internet checksum and the RFC 1624
//!   incremental update.
//!
//! ```
//! use sluice_packet::{flow_key, parse, verify_checksums, write_frame};
//! use sluice_packet::{FrameSpec, L4Spec, MacAddr};
//!
//! let spec = FrameSpec {
//!     src_mac: "02:00:00:00:00:01".parse().unwrap(),
//!     dst_mac: MacAddr::BROADCAST,
//!     vlan: Some(100),
//!     src_ip: "10.0.0.1".parse().unwrap(),
//!     dst_ip: "10.0.0.2".parse().unwrap(),
//!     ttl: 64,
//!     l4: L4Spec::Udp { src_port: 1234, dst_port: 80 },
//! };
//! let mut buf = [0u8; 128];
//! let n = write_frame(&mut buf, &spec, b"hello").unwrap();
//! let frame = &buf[..n];
//!
//! let h = parse(frame).unwrap();
//! assert_eq!(h.vlan_id(), Some(100));
//! assert_eq!(&frame[h.payload_offset as usize..][..h.payload_len as usize], b"hello");
//! verify_checksums(frame, &h).unwrap();
//!
//! let key = flow_key(frame).unwrap();
//! assert_eq!(key.to_string(), "udp 10.0.0.1:1234 -> 10.0.0.2:80");
//! assert_eq!(key.symmetric_hash(), key.reversed().symmetric_hash());
//! ```

pub mod arp;
pub mod builder;
pub mod checksum;
pub mod error;
pub mod ethernet;
pub mod flow;
pub mod gre;
pub mod gso;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod parse;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

mod field;

pub use builder::{write_frame, BuildError, FrameSpec, L4Spec};
pub use error::ParseError;
pub use ethernet::{EtherType, MacAddr};
pub use flow::{flow_key, FlowKey};
pub use ip::IpProtocol;
pub use parse::{parse, parse_l3, verify_checksums, Headers};
pub use tcp::TcpFlags;
