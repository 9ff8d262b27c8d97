//! `chaos`: forwards like `forwarder`, then (for the faults that can be
//! observed in-process) corrupts verdicts or metadata. Panics, aborts,
//! exits and ring garbage are covered by the process tests of `sluice-cli`.

mod common;
use common::*;

use serde_json::json;
use sluice_nf::harness::Harness;
use sluice_nf::{Batch, Context, NetworkFunction, Verdict};

/// Runs an inner NF and records the raw verdict bits it left on every
/// packet (the harness's `Outcome::verdict` shows undecodable bits as
/// `Next`, like `Packet::verdict`).
struct RawVerdicts {
    inner: Box<dyn NetworkFunction>,
    raw: Vec<u32>,
}

impl NetworkFunction for RawVerdicts {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        self.inner.process(batch, ctx);
        for i in 0..batch.len() {
            let mut p = batch.get(i).unwrap();
            self.raw.push(p.raw().verdict_raw());
        }
    }
}

fn frames(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| udp("10.0.0.1", 1000 + i % 16, "10.0.0.2", 80))
        .collect()
}

#[test]
fn descriptor() {
    let t = nf_type("chaos");
    assert!(t.drop_reasons.is_empty());
    assert!(t.counters.is_empty());
}

#[test]
fn fault_none_forwards_everything_unchanged() {
    for config in [
        json!(null),
        json!({}),
        json!({ "fault": "none", "after_packets": 0 }),
        json!({ "fault": "none", "after_packets": 10, "seed": 99 }),
    ] {
        let mut nf = RawVerdicts {
            inner: build("chaos", config.clone()),
            raw: Vec::new(),
        };
        let input = frames(1500); // past the default after_packets (1000)
        let out = Harness::new().run(&mut nf, &input);
        assert!(out.iter().all(|o| o.verdict == Verdict::Next), "{config}");
        assert!(out.iter().zip(&input).all(|(o, i)| &o.frame == i));
        assert!(nf.raw.iter().all(|&r| r == Verdict::Next.encode()));
    }
}

#[test]
fn garbage_verdicts_start_after_exactly_n_packets() {
    // The threshold falls inside a batch (the harness sends 256 at a time)
    // and in a later call; both must be exact to the packet.
    for (after, calls) in [
        (100u64, vec![300u16]),
        (300, vec![256, 40, 10, 20]),
        (0, vec![5]),
    ] {
        let mut nf = RawVerdicts {
            inner: build(
                "chaos",
                json!({ "fault": "garbage_verdicts", "after_packets": after, "seed": 7 }),
            ),
            raw: Vec::new(),
        };
        let mut h = Harness::new();
        let mut outcomes = Vec::new();
        for n in &calls {
            let input = frames(*n);
            let out = h.run(&mut nf, &input);
            // Frames themselves are never touched by this fault.
            assert!(out.iter().zip(&input).all(|(o, i)| &o.frame == i));
            outcomes.extend(out);
        }
        let total: usize = calls.iter().map(|&n| n as usize).sum();
        assert_eq!(nf.raw.len(), total);
        let after = after as usize;
        // The first `after` packets are forwarded normally.
        assert!(nf.raw[..after].iter().all(|&r| r == 0), "after {after}");
        assert!(outcomes[..after].iter().all(|o| o.verdict == Verdict::Next));
        // Every later verdict is garbage: undecodable, or a valid encoding
        // of something other than Next.
        for (i, &r) in nf.raw.iter().enumerate().skip(after) {
            match Verdict::decode(r) {
                None => {}
                Some(v) => assert_ne!(v, Verdict::Next, "packet {i}: {r:#x}"),
            }
        }
        // Random, not one repeated value.
        let mut distinct = nf.raw[after..].to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > (total - after) / 2, "{distinct:x?}");
        // With 4 of 16 kinds valid, most garbage must not even decode: the
        // platform's validation is what makes it harmless.
        let undecodable = nf.raw[after..]
            .iter()
            .filter(|&&r| Verdict::decode(r).is_none())
            .count();
        assert!(undecodable * 2 > total - after, "{undecodable}");
    }
}

#[test]
fn garbage_is_deterministic_per_seed() {
    let run = |seed: u64| {
        let mut nf = RawVerdicts {
            inner: build(
                "chaos",
                json!({ "fault": "garbage_verdicts", "after_packets": 0, "seed": seed }),
            ),
            raw: Vec::new(),
        };
        Harness::new().run(&mut nf, &frames(64));
        nf.raw
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
    // Seed 0 would stall xorshift; it is taken as 1.
    assert_eq!(run(0), run(1));
}

#[test]
fn reset_restarts_the_packet_count() {
    let mut nf = RawVerdicts {
        inner: build(
            "chaos",
            json!({ "fault": "garbage_verdicts", "after_packets": 10 }),
        ),
        raw: Vec::new(),
    };
    let mut h = Harness::new();
    h.run(&mut nf, &frames(8));
    nf.inner.reset();
    h.run(&mut nf, &frames(10));
    assert!(
        nf.raw.iter().all(|&r| r == 0),
        "18 packets, never 10 since reset"
    );
    h.run(&mut nf, &frames(1));
    assert_ne!(nf.raw[18], 0);
}

#[test]
fn garbage_metadata_starts_after_exactly_n_packets() {
    /// Records, per packet, whether the inner NF changed any of the
    /// metadata fields `garbage_metadata` writes.
    struct Meta {
        inner: Box<dyn NetworkFunction>,
        changed: Vec<bool>,
    }
    fn fields(p: &mut sluice_nf::Packet<'_>) -> (u16, u16, u16, u16) {
        let m = p.raw();
        (m.data_off(), m.len(), m.chain(), m.hop())
    }
    impl NetworkFunction for Meta {
        fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
            let before: Vec<_> = (0..batch.len())
                .map(|i| fields(&mut batch.get(i).unwrap()))
                .collect();
            self.inner.process(batch, ctx);
            for (i, b) in before.into_iter().enumerate() {
                let mut p = batch.get(i).unwrap();
                self.changed.push(fields(&mut p) != b);
                // The harness must be able to read the packet back; restore
                // sane metadata as the platform's validation would drop it.
                let m = p.raw();
                m.set_data_off(b.0);
                m.set_len_raw(b.1);
            }
        }
    }
    let mut nf = Meta {
        inner: build(
            "chaos",
            json!({ "fault": "garbage_metadata", "after_packets": 20, "seed": 5 }),
        ),
        changed: Vec::new(),
    };
    let mut h = Harness::new();
    h.run(&mut nf, &frames(15));
    h.run(&mut nf, &frames(45));
    assert_eq!(nf.changed.len(), 60);
    assert!(nf.changed[..20].iter().all(|c| !c), "first 20 untouched");
    // A random value can equal the old one by chance; nearly all differ.
    let changed = nf.changed[20..].iter().filter(|c| **c).count();
    assert!(changed >= 35, "{changed} of 40 changed");
}

#[test]
fn config_errors() {
    let e = build_err("chaos", json!({ "fault": "explode" }));
    assert_eq!(e.field, "fault", "{e}");
    assert!(e.message.contains("explode"), "{e}");
    let e = build_err("chaos", json!({ "after_packets": -1 }));
    assert_eq!(e.field, "after_packets", "{e}");
    let e = build_err("chaos", json!({ "after": 5 }));
    assert!(e.message.contains("after"), "{e}");
}
