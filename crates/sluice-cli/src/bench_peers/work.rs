//! The works every system does, on the same two DPDK virtual devices:
//! port 0 receives, port 1 transmits (both ways for `bidir`).
//!
//! `net_null` is DPDK's null device: its receive hands out `size`-byte
//! mbufs from the caller's pool as fast as asked, its transmit frees
//! them (`no-rx=1`: a port that never receives). It costs the driver
//! almost nothing, so what is measured is the system between the ports.
//! `net_pcap` with `infinite_rx=1` replays a file's frames from memory,
//! for work on real IPv4/UDP frames with many flows.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use serde::Serialize;
use sluice_packet::builder::{write_frame, FrameSpec, L4Spec};
use sluice_packet::ethernet::MacAddr;
use sluice_ports::PcapWriter;

/// Flows in the real-frame work's file.
pub(crate) const PCAP_FLOWS: u16 = 64;

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Work {
    /// One port to the other, frames untouched.
    Io,
    /// The same, each frame's Ethernet addresses swapped.
    Macswap,
    /// Both ports receive and each forwards to the other.
    Bidir,
    /// Real IPv4/UDP frames of 64 flows (a pcap replayed by `net_pcap`)
    /// to a null port.
    Pcap,
}

impl Work {
    pub const ALL: [Work; 4] = [Work::Io, Work::Macswap, Work::Bidir, Work::Pcap];

    pub fn name(self) -> &'static str {
        match self {
            Work::Io => "io",
            Work::Macswap => "macswap",
            Work::Bidir => "bidir",
            Work::Pcap => "pcap",
        }
    }

    /// Whether port 1 receives too.
    pub fn both_ways(self) -> bool {
        self == Work::Bidir
    }

    /// The two devices: (name, driver arguments). `pcap` is the file the
    /// real-frame work replays.
    pub fn devices(self, pcap: &Path) -> [(&'static str, String); 2] {
        let rx0 = match self {
            Work::Pcap => (
                "net_pcap0",
                format!("rx_pcap={},infinite_rx=1", pcap.display()),
            ),
            _ => ("net_null0", "size=64".to_string()),
        };
        let rx1 = if self.both_ways() {
            "size=64"
        } else {
            "size=64,no-rx=1"
        };
        [rx0, ("net_null1", rx1.to_string())]
    }

    /// The devices as EAL `--vdev` arguments.
    pub fn vdev_args(self, pcap: &Path) -> Vec<String> {
        self.devices(pcap)
            .into_iter()
            .flat_map(|(name, args)| ["--vdev".to_string(), format!("{name},{args}")])
            .collect()
    }
}

/// Writes the real-frame work's file: one 64 B IPv4/UDP frame (60 B
/// without the FCS) per flow, flows differing in source address and port.
pub(crate) fn write_pcap(path: &Path) -> Result<(), String> {
    let mut w = PcapWriter::create(path, 65535).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 60];
    for i in 0..PCAP_FLOWS {
        let spec = FrameSpec {
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 2]),
            vlan: None,
            src_ip: IpAddr::V4(Ipv4Addr::new(10, 0, (i >> 8) as u8, i as u8)),
            dst_ip: IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1)),
            ttl: 64,
            l4: L4Spec::Udp {
                src_port: 1024 + i,
                dst_port: 80,
            },
        };
        let header = spec.header_len();
        let payload = vec![0u8; buf.len() - header];
        let n = write_frame(&mut buf, &spec, &payload).map_err(|e| e.to_string())?;
        w.write_packet(u64::from(i) * 1000, &buf[..n])
            .map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bidir_receives_on_both_ports() {
        let p = Path::new("/tmp/f.pcap");
        for w in Work::ALL {
            let [d0, d1] = w.devices(p);
            assert_eq!(d1.0, "net_null1");
            assert_eq!(d1.1.contains("no-rx=1"), !w.both_ways(), "{w:?}");
            assert_eq!(d0.0 == "net_pcap0", w == Work::Pcap);
        }
        assert_eq!(
            Work::Pcap.vdev_args(p)[1],
            "net_pcap0,rx_pcap=/tmp/f.pcap,infinite_rx=1"
        );
    }

    #[test]
    fn the_pcap_holds_one_valid_frame_per_flow() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("flows.pcap");
        write_pcap(&path).unwrap();
        let mut r = sluice_ports::PcapReader::open(&path).unwrap();
        let mut tuples = std::collections::HashSet::new();
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!(p.data.len(), 60);
            let key = sluice_packet::flow_key(p.data).unwrap();
            tuples.insert(format!("{key:?}"));
        }
        assert_eq!(tuples.len(), usize::from(PCAP_FLOWS));
    }
}
