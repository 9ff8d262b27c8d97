//! Golden test: `fixtures/flow_monitor/in.pcap` goes through
//! `flow_monitor` (each record at its timestamp, a zero epoch offset so the
//! harness clock is Unix time), then a flow end, ticks and stop at fixed
//! clock times (see `make_flow_monitor_golden.py`). The IPFIX messages a
//! UDP socket bound here as collector receives must equal, byte for byte,
//! the UDP payloads of `expected_ipfix.pcap`, which the script wrote by
//! hand from RFC 7011 and the IANA information elements. tshark, when
//! installed, must decode the received messages as IPFIX (cflow) without
//! malformed packets or expert warnings.

mod common;
mod golden_util;
use common::*;
use golden_util::*;

use std::net::UdpSocket;
use std::time::Duration;

use sluice_nf::harness::Harness;
use sluice_nf::{NetworkFunction, Verdict};
use sluice_nfs::flow_monitor::exporter::ExportConfig;
use sluice_nfs::flow_monitor::table::Timeouts;
use sluice_nfs::flow_monitor::{FlowMonitor, Settings};

const S: u64 = 1_000_000_000;

fn received(sock: &UdpSocket) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    // Loopback delivers before send returns: the timeout only marks the end.
    while let Ok(n) = sock.recv(&mut buf) {
        out.push(buf[..n].to_vec());
    }
    out
}

#[test]
fn ipfix_messages_match_the_golden_capture() {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let settings = Settings {
        export: ExportConfig {
            collector: sock.local_addr().unwrap(),
            domain_id: 4242,
            mtu: 1500,
            template_refresh_ns: 10 * S,
        },
        timeouts: Timeouts {
            active_ns: 60 * S,
            idle_ns: 15 * S,
        },
        scan_interval_ns: S,
    };
    let mut nf = FlowMonitor::new(settings, FLOW_CAPACITY, 0).unwrap();
    let input = read_pcap_ts(&fixture("flow_monitor", "in.pcap"));
    let expected: Vec<Vec<u8>> = read_pcap(&fixture("flow_monitor", "expected_ipfix.pcap"))
        .into_iter()
        .map(|f| f[42..].to_vec()) // Ethernet + IPv4 + UDP headers
        .collect();
    assert_eq!(input.len(), 14);
    assert_eq!(expected.len(), 3);
    let t0 = input[0].0;

    let mut h = Harness::new();
    for (i, (ts, frame)) in input.iter().enumerate() {
        h.set_now_ns(*ts);
        let o = h.run(&mut nf, std::slice::from_ref(frame)).remove(0);
        assert_eq!((o.verdict, &o.frame), (Verdict::Next, frame), "frame {i}");
    }
    assert!(received(&sock).is_empty(), "nothing is exported per packet");

    let tcp_flow = h.flow_id_of(&input[0].1).unwrap();
    h.set_now_ns(t0 + 3 * S / 2);
    h.end_flow(&mut nf, tcp_flow);
    for t in [2, 16] {
        h.set_now_ns(t0 + t * S);
        h.tick(&mut nf);
    }
    h.set_now_ns(t0 + 17 * S);
    h.stop(&mut nf);
    let got = received(&sock);
    assert_eq!(got.len(), expected.len());
    for (i, (g, w)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g, w, "IPFIX message {i}");
    }

    let c = |n: &str| h.counter(counter_index("flow_monitor", n));
    assert_eq!(c("records_exported"), 5);
    assert_eq!(c("messages_sent"), 3);
    assert_eq!(c("templates_sent"), 2);
    assert_eq!(c("export_errors"), 0);
    assert_eq!(c("flows_active"), 0);
    assert_eq!(c("packets"), 13);
    assert_eq!(c("non_ip"), 1);
    assert_eq!(c("untracked"), 0);
    assert!(h.take_emitted().is_empty());
    assert_eq!(nf.tick_interval_ns(), Some(S));

    // tshark sees what the collector received, wrapped in UDP to 4739.
    let frames: Vec<Vec<u8>> = got
        .iter()
        .map(|m| {
            frame(
                "127.0.0.1",
                "127.0.0.1",
                sluice_packet::L4Spec::Udp {
                    src_port: 50000,
                    dst_port: 4739,
                },
                m,
            )
        })
        .collect();
    if let Some(text) = tshark_clean(
        &frames,
        "flow-monitor-ipfix",
        &["-d", "udp.port==4739,cflow"],
    ) {
        assert_eq!(text.matches("Version: 10").count(), 3, "{text}");
        assert_eq!(text.matches("Template (Id = 256, Count = 11)").count(), 2);
        for needle in [
            "Observation Domain Id: 4242",
            "Flow End Reason: End of Flow detected (3)",
            "Flow End Reason: Idle timeout (1)",
            "Flow End Reason: Forced end (4)",
            "SrcAddr: 2001:db8::2",
            "DstAddr: 198.51.100.1",
        ] {
            assert!(text.contains(needle), "missing `{needle}`:\n{text}");
        }
    }
}
