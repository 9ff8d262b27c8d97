//! The flow_monitor and vxlan example specs run through the real binary:
//! IPFIX reaches a collector, and a VXLAN round trip delivers every packet.

mod common;
use common::*;

use std::net::UdpSocket;
use std::time::Duration;

#[test]
fn vxlan_example_round_trips_every_packet() {
    let (out, r) = run_json(&root().join("examples/vxlan.yaml"), 2.0);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    let enc = nf(&r, "vtep_a")["counters"]["encapsulated"]
        .as_u64()
        .unwrap();
    let dec = nf(&r, "vtep_b")["counters"]["decapsulated"]
        .as_u64()
        .unwrap();
    assert!(enc > 1000, "{r:#}");
    assert_eq!(enc, dec, "{r:#}");
    assert_eq!(r["packets_out"].as_u64().unwrap(), dec, "{r:#}");
}

#[test]
fn flow_monitor_example_exports_ipfix_to_a_collector() {
    let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
    collector
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let port = collector.local_addr().unwrap().port();
    let text = std::fs::read_to_string(root().join("examples/flow_monitor.yaml"))
        .unwrap()
        .replace("127.0.0.1:4739", &format!("127.0.0.1:{port}"));
    let (_d, path) = spec_file(&text);
    let (out, r) = run_json(&path, 2.0);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    let c = &nf(&r, "flows")["counters"];
    let mut buf = [0u8; 65536];
    let (mut messages, mut records_seen) = (0u64, 0u64);
    while let Ok(n) = collector.recv(&mut buf) {
        let m = &buf[..n];
        assert_eq!(&m[..2], &[0, 10], "IPFIX version 10");
        assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), n);
        assert_eq!(
            u32::from_be_bytes(m[12..16].try_into().unwrap()),
            1,
            "domain id"
        );
        assert!(n <= 1500 - 28);
        // Data sets of template 256 (IPv4): 48-byte records.
        let mut off = 16;
        while off + 4 <= n {
            let id = u16::from_be_bytes([m[off], m[off + 1]]);
            let len = usize::from(u16::from_be_bytes([m[off + 2], m[off + 3]]));
            if id == 256 {
                records_seen += ((len - 4) / 48) as u64;
            }
            off += len;
        }
        messages += 1;
    }
    assert!(messages > 0, "{r:#}");
    assert_eq!(c["messages_sent"].as_u64().unwrap(), messages, "{r:#}");
    assert_eq!(
        c["records_exported"].as_u64().unwrap(),
        records_seen,
        "{r:#}"
    );
    assert_eq!(c["export_errors"], 0, "{r:#}");
    // Its build opens the export socket, so its template keeps no shell
    // for it (a fork could not use the descriptor): it builds itself.
    assert_eq!(nf(&r, "flows")["shell_starts"], 0, "{r:#}");
    assert_eq!(c["flows_active"], 0, "every flow ends by shutdown: {r:#}");
    // Every flow with packets gives one or two (per direction) records.
    let created = r["flows"]["created"].as_u64().unwrap();
    assert!(
        records_seen >= created && records_seen <= 2 * created,
        "{records_seen} records, {created} flows: {r:#}"
    );
}
