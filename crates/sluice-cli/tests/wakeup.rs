//! `settings.wakeup`: adaptive wake-up batching of sleeping process NFs
//! (Flurries, seed 004 §5.1). Packets held back for a sleeping NF must all
//! arrive, woken by the timer; without batching nothing is held. And
//! busy polling: an NF polls this long after its last packet before it
//! sleeps.

mod common;
use common::*;

/// 200 packets, one every 5 ms: the NF goes to sleep between packets.
fn spec(wakeup: &str) -> String {
    format!(
        "settings:\n  batch: 32\n{wakeup}ports:\n  - {{ name: gen, kind: generator, flows: 4, protocol: udp, rate_pps: 200, count: 200 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: fwd, type: forwarder, isolation: process }}\nchains:\n  - {{ name: c, from: gen, nfs: [fwd], to: out }}\n"
    )
}

fn run(wakeup: &str) -> serde_json::Value {
    let (_d, path) = spec_file(&spec(wakeup));
    let (out, r) = run_json(&path, 30.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    assert_eq!(r["packets_out"], 200, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    r
}

#[test]
fn held_packets_are_delivered_when_the_timer_wakes_the_nf() {
    // With one packet per 5 ms the threshold alternates between 1 (wake at
    // once) and 2 (hold until the 300 µs timer wakes the NF and halves it).
    let r = run("  wakeup: { max_batch: 32, timeout_us: 300 }\n");
    let fwd = nf(&r, "fwd");
    let by_timeout = fwd["wakeups_by_timeout"].as_u64().unwrap();
    assert!(by_timeout > 0, "{r:#}");
    assert!(by_timeout <= fwd["wakeups"].as_u64().unwrap(), "{r:#}");
    // A held packet waits for the timer: some latency is at least 300 µs.
    assert!(r["latency_ns"]["max"].as_u64().unwrap() >= 300_000, "{r:#}");
}

#[test]
fn without_batching_no_packet_is_held() {
    let r = run("");
    assert_eq!(nf(&r, "fwd")["wakeups_by_timeout"], 0, "{r:#}");
    assert!(nf(&r, "fwd")["wakeups"].as_u64().unwrap() > 0, "{r:#}");
}

#[test]
fn an_nf_busy_polling_longer_than_the_packet_gap_never_sleeps_between_packets() {
    // Packets 5 ms apart: polling 20 ms after each keeps the NF awake from
    // the first packet to the last (it sleeps before traffic starts and
    // after it ends), so the worker never has to wake it.
    let r = run("  wakeup: { busy_poll_us: 20000 }\n");
    let fwd = nf(&r, "fwd");
    assert!(fwd["sleeps"].as_u64().unwrap() <= 3, "{r:#}");
    assert!(fwd["wakeups"].as_u64().unwrap() <= 3, "{r:#}");
}

#[test]
fn an_nf_without_busy_polling_sleeps_between_sparse_packets() {
    // The same traffic with no busy polling: the NF sleeps after (nearly)
    // every packet and the worker wakes it for the next.
    let r = run("  wakeup: { busy_poll_us: 0 }\n");
    let fwd = nf(&r, "fwd");
    assert!(fwd["sleeps"].as_u64().unwrap() >= 150, "{r:#}");
    assert!(fwd["wakeups"].as_u64().unwrap() >= 150, "{r:#}");
}
