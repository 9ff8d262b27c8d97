//! IPFIX (RFC 7011) message encoding: the two templates `flow_monitor`
//! exports and the data records that use them.
//!
//! A message is built in a buffer allocated once (its capacity is the
//! message limit), so encoding never allocates. The sequence number in
//! each header counts the data records sent before it (RFC 7011 §3.1:
//! template records do not count).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPFIX protocol version.
pub const VERSION: u16 = 10;
/// Message header length.
pub const HEADER_LEN: usize = 16;
/// Set header length.
pub const SET_HEADER_LEN: usize = 4;
/// Set id of a template set.
pub const TEMPLATE_SET_ID: u16 = 2;
/// Template id of IPv4 flow records.
pub const TEMPLATE_V4: u16 = 256;
/// Template id of IPv6 flow records.
pub const TEMPLATE_V6: u16 = 257;

/// IANA information element ids (RFC 7012 / IANA IPFIX registry).
pub mod ie {
    /// octetDeltaCount, unsigned64.
    pub const OCTET_DELTA_COUNT: u16 = 1;
    /// packetDeltaCount, unsigned64.
    pub const PACKET_DELTA_COUNT: u16 = 2;
    /// protocolIdentifier, unsigned8.
    pub const PROTOCOL_IDENTIFIER: u16 = 4;
    /// tcpControlBits, unsigned16 (RFC 7125).
    pub const TCP_CONTROL_BITS: u16 = 6;
    /// sourceTransportPort, unsigned16.
    pub const SOURCE_TRANSPORT_PORT: u16 = 7;
    /// sourceIPv4Address.
    pub const SOURCE_IPV4_ADDRESS: u16 = 8;
    /// destinationTransportPort, unsigned16.
    pub const DESTINATION_TRANSPORT_PORT: u16 = 11;
    /// destinationIPv4Address.
    pub const DESTINATION_IPV4_ADDRESS: u16 = 12;
    /// sourceIPv6Address.
    pub const SOURCE_IPV6_ADDRESS: u16 = 27;
    /// destinationIPv6Address.
    pub const DESTINATION_IPV6_ADDRESS: u16 = 28;
    /// flowEndReason, unsigned8.
    pub const FLOW_END_REASON: u16 = 136;
    /// flowStartMilliseconds, dateTimeMilliseconds.
    pub const FLOW_START_MILLISECONDS: u16 = 152;
    /// flowEndMilliseconds, dateTimeMilliseconds.
    pub const FLOW_END_MILLISECONDS: u16 = 153;
}

/// Fields of a template after the two addresses: (IE id, length).
const COMMON_FIELDS: [(u16, u16); 9] = [
    (ie::SOURCE_TRANSPORT_PORT, 2),
    (ie::DESTINATION_TRANSPORT_PORT, 2),
    (ie::PROTOCOL_IDENTIFIER, 1),
    (ie::TCP_CONTROL_BITS, 2),
    (ie::OCTET_DELTA_COUNT, 8),
    (ie::PACKET_DELTA_COUNT, 8),
    (ie::FLOW_START_MILLISECONDS, 8),
    (ie::FLOW_END_MILLISECONDS, 8),
    (ie::FLOW_END_REASON, 1),
];
/// Length of the fields in [`COMMON_FIELDS`].
const COMMON_LEN: usize = 2 + 2 + 1 + 2 + 8 + 8 + 8 + 8 + 1;
/// Data record length with IPv4 addresses.
pub const RECORD_LEN_V4: usize = 8 + COMMON_LEN;
/// Data record length with IPv6 addresses.
pub const RECORD_LEN_V6: usize = 32 + COMMON_LEN;
/// Length of one template record (header + 11 field specifiers).
const TEMPLATE_RECORD_LEN: usize = 4 + 4 * (2 + COMMON_FIELDS.len());
/// Length of the template set holding both templates.
pub const TEMPLATE_SET_LEN: usize = SET_HEADER_LEN + 2 * TEMPLATE_RECORD_LEN;
/// The smallest message limit that holds the templates and one record of
/// each family in a message of their own.
pub const MIN_MESSAGE_LEN: usize = HEADER_LEN + TEMPLATE_SET_LEN + SET_HEADER_LEN + RECORD_LEN_V6;

/// flowEndReason values (IANA registry, RFC 5102 §5.11.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum EndReason {
    /// No packet for the idle timeout.
    IdleTimeout = 1,
    /// The flow lasted the active timeout (a partial record; it goes on).
    ActiveTimeout = 2,
    /// The end of the flow was detected (the platform ended it).
    EndOfFlow = 3,
    /// Forced end (the NF stopped, or its flow id was reused).
    ForcedEnd = 4,
    /// The table ran out of room.
    LackOfResources = 5,
}

/// One unidirectional flow record as exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRecord {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (0 for protocols without ports).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// IP protocol.
    pub proto: u8,
    /// TCP control bits seen, OR-ed, as tcpControlBits (RFC 7125): the low
    /// 12 bits of the TCP header's 13th and 14th bytes (reserved bits, NS,
    /// CWR, ECE, URG, ACK, PSH, RST, SYN, FIN), data offset masked off.
    pub tcp_flags: u16,
    /// IP bytes (IP header and payload) since the last report.
    pub octets: u64,
    /// Packets since the last report.
    pub packets: u64,
    /// First packet, ms since the Unix epoch.
    pub start_ms: u64,
    /// Last packet, ms since the Unix epoch.
    pub end_ms: u64,
    /// Why the record was exported.
    pub reason: EndReason,
}

impl FlowRecord {
    /// Template (and data set) id for this record's address family.
    pub fn template_id(&self) -> u16 {
        if self.is_v4() {
            TEMPLATE_V4
        } else {
            TEMPLATE_V6
        }
    }

    fn is_v4(&self) -> bool {
        self.src.is_ipv4() && self.dst.is_ipv4()
    }

    /// Encoded length of the record.
    pub fn encoded_len(&self) -> usize {
        if self.is_v4() {
            RECORD_LEN_V4
        } else {
            RECORD_LEN_V6
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if self.is_v4() {
            out.extend_from_slice(&v4(self.src).octets());
            out.extend_from_slice(&v4(self.dst).octets());
        } else {
            out.extend_from_slice(&v6(self.src).octets());
            out.extend_from_slice(&v6(self.dst).octets());
        }
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        out.push(self.proto);
        out.extend_from_slice(&self.tcp_flags.to_be_bytes());
        out.extend_from_slice(&self.octets.to_be_bytes());
        out.extend_from_slice(&self.packets.to_be_bytes());
        out.extend_from_slice(&self.start_ms.to_be_bytes());
        out.extend_from_slice(&self.end_ms.to_be_bytes());
        out.push(self.reason as u8);
    }
}

fn v4(a: IpAddr) -> Ipv4Addr {
    match a {
        IpAddr::V4(a) => a,
        IpAddr::V6(a) => a.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED),
    }
}

fn v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

fn put_u16(out: &mut [u8], at: usize, v: u16) {
    out[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Builds one IPFIX message at a time, bounded by a byte limit.
#[derive(Debug)]
pub struct MessageBuilder {
    buf: Vec<u8>,
    limit: usize,
    domain_id: u32,
    /// Start offset and set id of the set being filled.
    open_set: Option<(usize, u16)>,
    records: u32,
}

impl MessageBuilder {
    /// A builder for messages of at most `limit` bytes (at least
    /// [`MIN_MESSAGE_LEN`]) for observation domain `domain_id`.
    pub fn new(limit: usize, domain_id: u32) -> Self {
        let limit = limit.clamp(MIN_MESSAGE_LEN, u16::MAX as usize);
        MessageBuilder {
            buf: Vec::with_capacity(limit),
            limit,
            domain_id,
            open_set: None,
            records: 0,
        }
    }

    /// Whether the message holds nothing yet.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Data records in the message.
    pub fn records(&self) -> u32 {
        self.records
    }

    fn ensure_header(&mut self) {
        if self.buf.is_empty() {
            self.buf.resize(HEADER_LEN, 0);
        }
    }

    fn close_set(&mut self) {
        if let Some((start, _)) = self.open_set.take() {
            let len = (self.buf.len() - start) as u16;
            put_u16(&mut self.buf, start + 2, len);
        }
    }

    /// Appends the template set (both templates). False if it does not fit.
    pub fn add_templates(&mut self) -> bool {
        self.ensure_header();
        self.close_set();
        if self.buf.len() + TEMPLATE_SET_LEN > self.limit {
            return false;
        }
        let out = &mut self.buf;
        out.extend_from_slice(&TEMPLATE_SET_ID.to_be_bytes());
        out.extend_from_slice(&(TEMPLATE_SET_LEN as u16).to_be_bytes());
        for (id, src, dst, len) in [
            (
                TEMPLATE_V4,
                ie::SOURCE_IPV4_ADDRESS,
                ie::DESTINATION_IPV4_ADDRESS,
                4u16,
            ),
            (
                TEMPLATE_V6,
                ie::SOURCE_IPV6_ADDRESS,
                ie::DESTINATION_IPV6_ADDRESS,
                16u16,
            ),
        ] {
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&(2 + COMMON_FIELDS.len() as u16).to_be_bytes());
            for (ie, l) in [(src, len), (dst, len)].into_iter().chain(COMMON_FIELDS) {
                out.extend_from_slice(&ie.to_be_bytes());
                out.extend_from_slice(&l.to_be_bytes());
            }
        }
        true
    }

    /// Appends a data record. False if it does not fit (send the message
    /// and retry on a fresh one).
    pub fn add_record(&mut self, r: &FlowRecord) -> bool {
        self.ensure_header();
        let id = r.template_id();
        let need = r.encoded_len()
            + match self.open_set {
                Some((_, open)) if open == id => 0,
                _ => SET_HEADER_LEN,
            };
        if self.buf.len() + need > self.limit {
            return false;
        }
        if need > r.encoded_len() {
            self.close_set();
            self.open_set = Some((self.buf.len(), id));
            self.buf.extend_from_slice(&id.to_be_bytes());
            self.buf.extend_from_slice(&[0, 0]);
        }
        r.encode(&mut self.buf);
        self.records += 1;
        true
    }

    /// Completes the header (`export_secs`: export time in seconds since
    /// the epoch; `sequence`: data records sent before this message) and
    /// returns the message. Call [`clear`](Self::clear) once it is sent.
    pub fn finish(&mut self, export_secs: u32, sequence: u32) -> &[u8] {
        self.ensure_header();
        self.close_set();
        let len = self.buf.len() as u16;
        let b = &mut self.buf;
        put_u16(b, 0, VERSION);
        put_u16(b, 2, len);
        b[4..8].copy_from_slice(&export_secs.to_be_bytes());
        b[8..12].copy_from_slice(&sequence.to_be_bytes());
        b[12..16].copy_from_slice(&self.domain_id.to_be_bytes());
        &self.buf
    }

    /// Empties the builder for the next message.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.open_set = None;
        self.records = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(src: &str, dst: &str) -> FlowRecord {
        FlowRecord {
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            src_port: 1234,
            dst_port: 80,
            proto: 6,
            tcp_flags: 0x12,
            octets: 1500,
            packets: 3,
            start_ms: 1_700_000_000_000,
            end_ms: 1_700_000_000_250,
            reason: EndReason::IdleTimeout,
        }
    }

    #[test]
    fn template_set_layout() {
        let mut b = MessageBuilder::new(1472, 7);
        assert!(b.add_templates());
        let m = b.finish(100, 5).to_vec();
        assert_eq!(m.len(), HEADER_LEN + TEMPLATE_SET_LEN);
        assert_eq!(
            &m[..16],
            &[0, 10, 0, 116, 0, 0, 0, 100, 0, 0, 0, 5, 0, 0, 0, 7]
        );
        assert_eq!(&m[16..20], &[0, 2, 0, 100]);
        // IPv4 template: id 256, 11 fields, first sourceIPv4Address/4.
        assert_eq!(&m[20..28], &[1, 0, 0, 11, 0, 8, 0, 4]);
        // IPv6 template starts after 4 + 44 bytes.
        assert_eq!(&m[68..76], &[1, 1, 0, 11, 0, 27, 0, 16]);
    }

    #[test]
    fn records_share_a_set_per_family_and_respect_the_limit() {
        let limit = HEADER_LEN + SET_HEADER_LEN + 2 * RECORD_LEN_V4;
        let mut b = MessageBuilder::new(limit.max(MIN_MESSAGE_LEN), 1);
        let r4 = rec("10.0.0.1", "10.0.0.2");
        let r6 = rec("2001:db8::1", "2001:db8::2");
        assert!(b.add_record(&r4));
        assert!(b.add_record(&r4));
        assert!(b.add_record(&r6));
        let m = b.finish(1, 0).to_vec();
        assert_eq!(
            m.len(),
            HEADER_LEN + 2 * SET_HEADER_LEN + 2 * RECORD_LEN_V4 + RECORD_LEN_V6
        );
        assert_eq!(&m[16..20], &[1, 0, 0, (4 + 2 * RECORD_LEN_V4) as u8]);
        assert_eq!(b.records(), 3);
        b.clear();
        // Fill to the limit: the record that does not fit is refused.
        let mut n = 0;
        while b.add_record(&r6) {
            n += 1;
        }
        assert_eq!(
            n,
            (MIN_MESSAGE_LEN.max(limit) - HEADER_LEN - SET_HEADER_LEN) / RECORD_LEN_V6
        );
        assert!(b.finish(1, 0).len() <= MIN_MESSAGE_LEN.max(limit));
    }

    #[test]
    fn record_bytes() {
        let mut b = MessageBuilder::new(1000, 1);
        b.add_record(&rec("10.0.0.1", "10.0.0.2"));
        let m = b.finish(1, 0).to_vec();
        let d = &m[20..];
        assert_eq!(d.len(), RECORD_LEN_V4);
        assert_eq!(&d[..8], &[10, 0, 0, 1, 10, 0, 0, 2]);
        assert_eq!(&d[8..15], &[0x04, 0xd2, 0, 80, 6, 0, 0x12]);
        assert_eq!(u64::from_be_bytes(d[15..23].try_into().unwrap()), 1500);
        assert_eq!(u64::from_be_bytes(d[23..31].try_into().unwrap()), 3);
        assert_eq!(d[47], 1);
    }
}
