//! `tee` and `delay` on the harness: copies are exact and go to the
//! configured port; held packets come out in order once due, on tick, and
//! at stop; the queue bound is a counted drop.

mod common;
use common::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, PortId, Verdict};

fn frames(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| udp("10.0.0.1", 1000 + i, "10.0.0.2", 53))
        .collect()
}

#[test]
fn tee_sends_an_exact_copy_of_every_packet_to_its_port() {
    let mut nf = build("tee", json!({ "to": "dump" }));
    let mut h = Harness::new();
    let input = frames(300);
    let out = h.run(nf.as_mut(), &input);
    assert!(out.iter().all(|o| o.verdict == Verdict::Next));
    let copies = h.take_emitted();
    assert_eq!(copies.len(), 300);
    for (c, i) in copies.iter().zip(&input) {
        assert_eq!(c.verdict, Verdict::ToPort(PortId(1)));
        assert_eq!(&c.frame, i);
    }
    assert_eq!(h.counter(0), 300);
    assert_eq!(h.counter(1), 0);
}

#[test]
fn tee_rejects_an_unknown_port() {
    let e = try_build("tee", json!({ "to": "nowhere" })).err().unwrap();
    assert!(e.to_string().contains("nowhere"), "{e}");
}

#[test]
fn delay_holds_packets_until_due_then_releases_in_order() {
    let mut nf = build("delay", json!({ "delay_us": 1000 }));
    let mut h = Harness::new();
    h.set_now_ns(1_000_000_000);
    let input = frames(10);
    let out = h.run(nf.as_mut(), &input);
    assert!(out.is_empty(), "every packet is taken out of the batch");
    h.set_now_ns(1_000_999_999);
    h.tick(nf.as_mut());
    assert!(h.take_emitted().is_empty(), "not due yet");
    h.set_now_ns(1_001_000_000);
    h.tick(nf.as_mut());
    let released = h.take_emitted();
    assert_eq!(released.len(), 10);
    for (r, i) in released.iter().zip(&input) {
        assert_eq!(r.verdict, Verdict::Next);
        assert_eq!(&r.frame, i, "released in arrival order");
    }
    assert_eq!(h.counter(0), 10);
    assert_eq!(h.counter(1), 0);
}

#[test]
fn delay_bounds_its_queue_and_flushes_everything_at_stop() {
    let mut nf = build("delay", json!({ "delay_us": 1000000, "capacity": 300 }));
    let mut h = Harness::new();
    let out = h.run(nf.as_mut(), &frames(400));
    assert_eq!(out.len(), 100, "the overflow stays in the batch, dropped");
    assert!(out
        .iter()
        .all(|o| o.verdict == Verdict::Drop(DropReason::nf_local(0))));
    assert_eq!(h.counter(1), 300);
    // One stop call emits at most a batch; the platform calls it again.
    h.stop(nf.as_mut());
    assert_eq!(h.take_emitted().len(), 256);
    h.stop(nf.as_mut());
    assert_eq!(h.take_emitted().len(), 44);
    assert_eq!(h.counter(1), 0);
}

#[test]
fn delay_rejects_a_zero_delay() {
    let e = try_build("delay", json!({ "delay_us": 0 })).err().unwrap();
    assert!(e.to_string().contains("delay_us"), "{e}");
}

#[test]
fn the_longest_delay_holds_packets_until_stop_instead_of_overflowing() {
    // delay_us: u64::MAX passed validation, then `now + delay` overflowed
    // on the first packet and the NF panicked on every restart.
    let mut nf = build("delay", json!({ "delay_us": u64::MAX }));
    let mut h = Harness::new();
    h.set_now_ns(1_000_000_000);
    let out = h.run(nf.as_mut(), &frames(5));
    assert!(out.is_empty());
    h.set_now_ns(u64::MAX - 1);
    h.tick(nf.as_mut());
    assert!(
        h.take_emitted().is_empty(),
        "not due before the end of time"
    );
    h.stop(nf.as_mut());
    assert_eq!(h.take_emitted().len(), 5);
}
