//! `flow_monitor`'s `active_timeout` is a promise: a flow direction that
//! lasts is reported at least that often. Checked with the harness clock,
//! which records when each tick exports, for the shortest timeout (1 s)
//! with the default 1 s scan interval, where waiting for a direction to
//! be a full timeout old reported it only every 2 s.

mod common;
use common::*;

use std::net::UdpSocket;

use serde_json::json;
use sluice_nf::harness::Harness;

const MS: u64 = 1_000_000;
/// The harness clock's start.
const T0: u64 = 1_000_000_000;

#[test]
fn a_steady_flow_is_reported_at_least_every_active_timeout() {
    // A collector, so that every message is accepted (never counted as an
    // export error).
    let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = collector.local_addr().unwrap();
    let mut nf = build(
        "flow_monitor",
        json!({ "collector": addr.to_string(), "active_timeout": 1 }),
    );
    assert_eq!(nf.tick_interval_ns(), Some(1000 * MS), "the default scan");
    let mut h = Harness::new();
    let f = udp("10.0.0.1", 1000, "10.0.0.2", 2000);
    let exported = |h: &Harness| h.counter(counter_index("flow_monitor", "records_exported"));
    // A packet every 100 ms, 50 ms after each tick's phase; a tick every
    // second, as the platform runs them. Note when records leave.
    let mut export_times = Vec::new();
    let mut seen = 0;
    for step in 0..200u64 {
        let now = T0 + step * 100 * MS;
        if step % 10 == 0 {
            h.set_now_ns(now);
            h.tick(nf.as_mut());
            let n = exported(&h);
            if n > seen {
                export_times.push(now);
                seen = n;
            }
        }
        h.set_now_ns(now + 50 * MS);
        h.run(nf.as_mut(), std::slice::from_ref(&f));
    }
    assert!(export_times.len() >= 18, "{export_times:?}");
    for w in export_times.windows(2) {
        assert!(
            w[1] - w[0] <= 1000 * MS,
            "partial records {} ms apart with active_timeout 1 s: {:?}",
            (w[1] - w[0]) / MS,
            export_times
                .iter()
                .map(|t| (t - T0) / MS)
                .collect::<Vec<_>>()
        );
    }
    // The first one too: the flow began at 50 ms.
    assert!(
        export_times[0] - (T0 + 50 * MS) <= 1000 * MS,
        "{export_times:?}"
    );
    // Every message reached the collector.
    h.stop(nf.as_mut());
    assert_eq!(h.counter(counter_index("flow_monitor", "export_errors")), 0);
}

#[test]
fn a_scan_interval_longer_than_the_active_timeout_is_refused() {
    // Ticks further apart than the timeout could not keep its promise.
    let e = build_err(
        "flow_monitor",
        json!({ "collector": "127.0.0.1:4739", "active_timeout": 1, "scan_interval_ms": 1500 }),
    );
    assert!(e.field.ends_with("scan_interval_ms"), "{e}");
    assert!(
        e.message
            .contains("scan_interval_ms 1500 is longer than active_timeout (1 s)"),
        "{e}"
    );
    build(
        "flow_monitor",
        json!({ "collector": "127.0.0.1:4739", "active_timeout": 1, "scan_interval_ms": 1000 }),
    );
}
