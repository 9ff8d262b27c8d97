//! Parse errors with precise, stable reasons usable as drop-reason metrics.

use core::fmt;

macro_rules! parse_errors {
    ($( $(#[doc = $doc:literal])* $variant:ident = $name:literal, $desc:literal; )*) => {
        /// Why a frame or header failed to parse or validate.
        ///
        /// Fieldless and `#[repr(u8)]` so that it can index per-reason
        /// counters directly (`err as usize`); [`ParseError::name`] gives a
        /// stable snake_case name for metrics.  Discriminants are dense,
        /// starting at 0, in the order of [`ParseError::ALL`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        #[non_exhaustive]
        pub enum ParseError {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl ParseError {
            /// Every variant, in discriminant order (`ALL[e as usize] == e`).
            pub const ALL: &'static [ParseError] = &[ $( ParseError::$variant, )* ];

            /// Number of variants (length of [`ParseError::ALL`]).
            pub const COUNT: usize = Self::ALL.len();

            /// Stable snake_case name, e.g. `"ipv4_bad_checksum"`, used as
            /// the drop-reason label in metrics.  Never changes for an
            /// existing variant.
            pub const fn name(self) -> &'static str {
                match self { $( ParseError::$variant => $name, )* }
            }

            /// Human-readable description of the reason.
            pub const fn description(self) -> &'static str {
                match self { $( ParseError::$variant => $desc, )* }
            }
        }
    };
}

parse_errors! {
    /// Frame shorter than the 14-byte Ethernet header.
    EthernetTruncated = "ethernet_truncated", "frame shorter than the ethernet header";
    /// Frame ends inside an 802.1Q/802.1ad tag.
    VlanTruncated = "vlan_truncated", "frame ends inside a vlan tag";
    /// More stacked VLAN tags than supported (2).
    TooManyVlanTags = "too_many_vlan_tags", "more than two stacked vlan tags";
    /// EtherType this code path does not handle (e.g. a non-IP frame given
    /// to `flow_key`).
    UnsupportedEtherType = "unsupported_ethertype", "unsupported ethertype";
    /// ARP packet shorter than 28 bytes.
    ArpTruncated = "arp_truncated", "arp packet truncated";
    /// ARP packet that is not Ethernet/IPv4 (htype 1, ptype 0x0800, 6/4).
    ArpUnsupported = "arp_unsupported", "arp packet is not ethernet/ipv4";
    /// Buffer shorter than the IPv4 header or its total length.
    Ipv4Truncated = "ipv4_truncated", "ipv4 packet truncated";
    /// IPv4 version field is not 4.
    Ipv4BadVersion = "ipv4_bad_version", "ipv4 version field is not 4";
    /// IPv4 IHL below 5.
    Ipv4BadHeaderLength = "ipv4_bad_header_length", "ipv4 header length below 20 bytes";
    /// IPv4 total length smaller than the header length.
    Ipv4BadTotalLength = "ipv4_bad_total_length", "ipv4 total length smaller than header";
    /// IPv4 header checksum mismatch.
    Ipv4BadChecksum = "ipv4_bad_checksum", "ipv4 header checksum mismatch";
    /// Buffer shorter than the IPv6 header or its payload length.
    Ipv6Truncated = "ipv6_truncated", "ipv6 packet truncated";
    /// IPv6 version field is not 6.
    Ipv6BadVersion = "ipv6_bad_version", "ipv6 version field is not 6";
    /// IPv6 extension header chain malformed: header truncated, too many
    /// headers (more than 8), or hop-by-hop options not first.
    Ipv6ExtensionChain = "ipv6_extension_chain", "malformed ipv6 extension header chain";
    /// Segment shorter than the TCP header.
    TcpTruncated = "tcp_truncated", "tcp segment truncated";
    /// TCP data offset below 5 or beyond the segment.
    TcpBadDataOffset = "tcp_bad_data_offset", "tcp data offset invalid";
    /// TCP option list malformed (option length below 2 or past the header).
    TcpBadOption = "tcp_bad_option", "malformed tcp option";
    /// TCP checksum mismatch.
    TcpBadChecksum = "tcp_bad_checksum", "tcp checksum mismatch";
    /// Datagram shorter than the 8-byte UDP header.
    UdpTruncated = "udp_truncated", "udp datagram truncated";
    /// UDP length field below 8 or beyond the datagram.
    UdpBadLength = "udp_bad_length", "udp length field invalid";
    /// UDP checksum mismatch (or zero checksum over IPv6).
    UdpBadChecksum = "udp_bad_checksum", "udp checksum mismatch";
    /// SCTP packet shorter than its 12-byte common header.
    SctpTruncated = "sctp_truncated", "sctp packet truncated";
    /// ICMPv4 message shorter than its 8-byte header.
    Icmpv4Truncated = "icmpv4_truncated", "icmpv4 message truncated";
    /// ICMPv4 checksum mismatch.
    Icmpv4BadChecksum = "icmpv4_bad_checksum", "icmpv4 checksum mismatch";
    /// ICMPv6 message shorter than its 8-byte header.
    Icmpv6Truncated = "icmpv6_truncated", "icmpv6 message truncated";
    /// ICMPv6 checksum mismatch.
    Icmpv6BadChecksum = "icmpv6_bad_checksum", "icmpv6 checksum mismatch";
}

impl ParseError {
    /// The variant with discriminant `v`, if any.
    pub fn from_u8(v: u8) -> Option<ParseError> {
        Self::ALL.get(usize::from(v)).copied()
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.description())
    }
}

impl std::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_dense_and_ordered() {
        assert_eq!(ParseError::COUNT, ParseError::ALL.len());
        for (i, e) in ParseError::ALL.iter().enumerate() {
            assert_eq!(*e as usize, i);
            assert_eq!(ParseError::from_u8(i as u8), Some(*e));
        }
        assert_eq!(ParseError::from_u8(ParseError::COUNT as u8), None);
    }

    #[test]
    fn names_are_unique_snake_case() {
        let mut names: Vec<&str> = ParseError::ALL.iter().map(|e| e.name()).collect();
        for n in &names {
            assert!(!n.is_empty());
            assert!(n
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ParseError::COUNT);
    }

    #[test]
    fn stable_names() {
        assert_eq!(ParseError::Ipv4BadChecksum.name(), "ipv4_bad_checksum");
        assert_eq!(ParseError::EthernetTruncated.name(), "ethernet_truncated");
        assert_eq!(ParseError::TooManyVlanTags.name(), "too_many_vlan_tags");
        assert_eq!(ParseError::UdpBadLength.name(), "udp_bad_length");
    }

    #[test]
    fn display_and_error() {
        let e: Box<dyn std::error::Error> = Box::new(ParseError::TcpTruncated);
        assert_eq!(e.to_string(), "tcp segment truncated");
    }
}
