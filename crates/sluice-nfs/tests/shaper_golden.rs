//! Golden test: the timed capture `fixtures/shaper/in.pcap` goes through
//! `shaper`, each record as a batch at its timestamp (records with the same
//! timestamp form one batch), with `tick` called at every multiple of the
//! tick period until the queue is empty (a tick due at an arrival's time
//! runs first). Which frames pass at once, which leave from the queue at
//! which clock time, which are dropped (queue full, too big), the sent
//! frames in order and the counters must equal what
//! `make_shaper_golden.py` derived from the token-bucket definition with
//! exact fractions.

mod common;
mod golden_util;
use common::*;
use golden_util::*;

use sluice_nf::harness::Harness;
use sluice_nf::{DropReason, Verdict};

#[test]
fn shaper_schedule_matches_the_golden_fixture() {
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("shaper", "expected.json")).unwrap())
            .unwrap();
    let mut nf = build("shaper", spec["config"].clone());
    let input = read_pcap_ts(&fixture("shaper", "in.pcap"));
    let expected = read_pcap(&fixture("shaper", "expected.pcap"));
    let fates: Vec<&str> = spec["fates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(fates.len(), input.len());
    let tick_ns = spec["tick_ns"].as_u64().unwrap();
    assert_eq!(nf.tick_interval_ns(), Some(tick_ns));

    // The index of an input frame, by its bytes (every frame differs).
    let index = |f: &[u8]| input.iter().position(|(_, x)| x == f).expect("known frame");
    let mut got = vec![String::new(); input.len()];
    let mut sent = Vec::new();
    let record = |h: &mut Harness, now: u64, got: &mut Vec<String>, sent: &mut Vec<Vec<u8>>| {
        for o in h.take_emitted() {
            assert_eq!(o.verdict, Verdict::Next);
            got[index(&o.frame)] = format!("release {now}");
            sent.push(o.frame);
        }
    };

    let mut h = Harness::new();
    let mut tick = spec["first_tick_ns"].as_u64().unwrap();
    let mut next = 0;
    let queue_empty = |got: &Vec<String>, next: usize| got[..next].iter().all(|g| !g.is_empty());
    while next < input.len() || !queue_empty(&got, next) {
        if next < input.len() && input[next].0 < tick {
            let now = input[next].0;
            let end = next + input[next..].iter().take_while(|(t, _)| *t == now).count();
            let frames: Vec<Vec<u8>> = input[next..end].iter().map(|(_, f)| f.clone()).collect();
            h.set_now_ns(now);
            let outs = h.run(nf.as_mut(), &frames);
            record(&mut h, now, &mut got, &mut sent);
            for o in outs {
                let i = index(&o.frame);
                got[i] = match o.verdict {
                    Verdict::Next => {
                        sent.push(o.frame);
                        "pass".to_string()
                    }
                    Verdict::Drop(r)
                        if r == DropReason::nf_local(reason_index("shaper", "queue_full")) =>
                    {
                        "drop queue_full".to_string()
                    }
                    Verdict::Drop(r)
                        if r == DropReason::nf_local(reason_index("shaper", "too_big")) =>
                    {
                        "drop too_big".to_string()
                    }
                    v => panic!("frame {i}: unexpected verdict {v:?}"),
                };
            }
            next = end;
        } else {
            h.set_now_ns(tick);
            h.tick(nf.as_mut());
            record(&mut h, tick, &mut got, &mut sent);
            tick += tick_ns;
        }
        assert!(
            tick < input[0].0 + 10_000_000_000,
            "the queue never drained"
        );
    }
    assert_eq!(got, fates);
    assert_eq!(sent, expected);
    h.stop(nf.as_mut());
    assert!(h.take_emitted().is_empty(), "nothing left to flush at stop");
    for (counter, want) in spec["counters"].as_object().unwrap() {
        assert_eq!(
            h.counter(counter_index("shaper", counter)),
            want.as_u64().unwrap(),
            "counter {counter}"
        );
    }
    tshark_clean(&sent, "shaper", &[]);
}
