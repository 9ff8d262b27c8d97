//! Wake-up policies (`settings.wakeup`, `chains[].wakeup`, `nfs[].wakeup`;
//! Flurries, seed 004 §5.1, §6.3). Packets held back for a sleeping NF must
//! all arrive, woken by the timer; each policy holds exactly what it says
//! (none, a fixed count, only packets of flows past their first packets).
//! And busy polling: an NF polls this long after its last packet before it
//! sleeps.

mod common;
use common::*;

/// 200 packets, one every 5 ms: the NF goes to sleep between packets.
fn spec(wakeup: &str) -> String {
    format!(
        "settings:\n  batch: 32\n{wakeup}ports:\n  - {{ name: gen, kind: generator, flows: 4, protocol: udp, rate_pps: 200, count: 200 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: fwd, type: forwarder, isolation: process }}\nchains:\n  - {{ name: c, from: gen, nfs: [fwd], to: out }}\n"
    )
}

/// Runs `text` to its end: it must succeed with every buffer accounted.
fn run_spec(text: &str) -> serde_json::Value {
    let (_d, path) = spec_file(text);
    let (out, r) = run_json(&path, 30.0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_accounted(&r);
    r
}

fn run(wakeup: &str) -> serde_json::Value {
    let r = run_spec(&spec(wakeup));
    assert_eq!(r["packets_out"], 200, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    r
}

#[test]
fn held_packets_are_delivered_when_the_timer_wakes_the_nf() {
    // With one packet per 5 ms the threshold alternates between 1 (wake at
    // once) and 2 (hold until the 300 µs timer wakes the NF and halves it).
    let r = run("  wakeup: { policy: hybrid, max_batch: 32, timeout_us: 300 }\n");
    let fwd = nf(&r, "fwd");
    let by_timeout = fwd["wakeups_by_timeout"].as_u64().unwrap();
    assert!(by_timeout > 0, "{r:#}");
    assert!(by_timeout <= fwd["wakeups"].as_u64().unwrap(), "{r:#}");
    // A held packet waits for the timer: some latency is at least 300 µs.
    assert!(r["latency_ns"]["max"].as_u64().unwrap() >= 300_000, "{r:#}");
}

#[test]
fn the_default_holds_no_sparse_packet() {
    // `auto` raises its threshold only while packets come fast. On a
    // loaded host (CI runs tests side by side) the worker may be paused
    // and its generator then catches up with two packets at once: fast
    // traffic by the policy's rule, which may cost one wake-up by timeout
    // after each pause (one seen in CI). AIMD on the same sparse traffic
    // holds about every other packet (~100 timeouts; the test above).
    let r = run("");
    let fwd = nf(&r, "fwd");
    assert_eq!(fwd["wakeup"], "auto", "{r:#}");
    let by_timeout = fwd["wakeups_by_timeout"].as_u64().unwrap();
    assert!(by_timeout <= 5, "{by_timeout} sparse packets held: {r:#}");
    assert!(fwd["wakeups"].as_u64().unwrap() > 0, "{r:#}");
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

#[test]
fn every_packet_sleeps_between_packets_without_a_busy_poll_setting() {
    let r = run("  wakeup: { policy: every_packet }\n");
    let fwd = nf(&r, "fwd");
    assert_eq!(fwd["wakeup"], "every_packet", "{r:#}");
    assert!(fwd["sleeps"].as_u64().unwrap() >= 150, "{r:#}");
    assert!(fwd["wakeups"].as_u64().unwrap() >= 150, "{r:#}");
    assert_eq!(fwd["wakeups_by_timeout"], 0, "{r:#}");
}

#[test]
fn a_fixed_threshold_holds_each_sparse_packet_until_the_timeout() {
    // One packet per 5 ms never reaches 4: each waits the 300 µs.
    let r = run("  wakeup: { policy: threshold, threshold: 4, timeout_us: 300 }\n");
    let fwd = nf(&r, "fwd");
    assert!(fwd["wakeups_by_timeout"].as_u64().unwrap() >= 150, "{r:#}");
    assert!(r["latency_ns"]["p50"].as_u64().unwrap() >= 300_000, "{r:#}");
}

/// 4 UDP flows of 50 packets each, 5 ms apart: the first 36 packets of
/// every flow are short-flow packets and wake the NF at once; of the
/// rest, Flurries' AIMD holds every other one until the timeout.
fn adaptive(rule: &str) -> u64 {
    let r = run(&format!(
        "  wakeup: {{ policy: adaptive, timeout_us: 300{rule} }}\n"
    ));
    nf(&r, "fwd")["wakeups_by_timeout"].as_u64().unwrap()
}

#[test]
fn adaptive_holds_only_packets_of_flows_past_their_first_packets() {
    let held = adaptive("");
    // (200 - 4 × 36) / 2 = 28 held; a few more if the host delays a wake.
    assert!((10..=45).contains(&held), "held {held}");
    // Every flow counts as short: nothing is held.
    assert_eq!(adaptive(", short_flow_packets: 1000"), 0);
    // No flow is short: plain AIMD holds about every other packet.
    assert!(adaptive(", short_flow_packets: 0") >= 70);
}

/// A chain's rule and an NF's own rule apply to their NFs only.
#[test]
fn rules_per_chain_and_per_nf() {
    let text = "ports:\n  - { name: gen, kind: generator, flows: 4, protocol: udp, rate_pps: 200, count: 100 }\n  - { name: out, kind: sink }\nnfs:\n  - { name: a, type: forwarder, isolation: process }\n  - { name: b, type: forwarder, isolation: process, wakeup: { policy: threshold, threshold: 8, timeout_us: 200 } }\n  - { name: c, type: forwarder, isolation: process }\nchains:\n  - { name: x, from: gen, nfs: [a, b, c], to: out, wakeup: { policy: every_packet } }\n";
    let r = run_spec(text);
    assert_eq!(r["packets_out"], 100, "{r:#}");
    assert_eq!(nf(&r, "a")["wakeup"], "every_packet");
    assert_eq!(nf(&r, "b")["wakeup"], "threshold");
    assert_eq!(nf(&r, "c")["wakeup"], "every_packet");
    assert!(
        nf(&r, "b")["wakeups_by_timeout"].as_u64().unwrap() >= 70,
        "{r:#}"
    );
    assert_eq!(nf(&r, "a")["wakeups_by_timeout"], 0, "{r:#}");
    assert_eq!(nf(&r, "c")["wakeups_by_timeout"], 0, "{r:#}");
}

/// A new rule reaches the running NF through `sluice apply`: no restart.
#[test]
fn a_rule_changes_live() {
    let d = Daemon::start();
    let spec = |rule: &str| {
        format!("ports:\n  - {{ name: gen, kind: generator, flows: 4, protocol: udp, rate_pps: 1000 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: fwd, type: forwarder, isolation: process{rule} }}\nchains:\n  - {{ name: c, from: gen, nfs: [fwd], to: out }}\n")
    };
    d.apply(&spec(""));
    let before = d.running_pids(1);
    let applied = d.apply(&spec(
        ", wakeup: { policy: threshold, threshold: 64, timeout_us: 500 }",
    ));
    assert_eq!(
        applied["diff"]["nfs"]["changed"],
        serde_json::json!(["fwd"]),
        "{applied:#}"
    );
    let t = std::time::Instant::now();
    loop {
        let s = d.stats();
        let nf = s["nfs"]
            .as_array()
            .and_then(|a| a.iter().find(|n| n["name"] == "fwd").cloned())
            .unwrap_or_default();
        if nf["wakeup"] == "threshold" && nf["wakeups_by_timeout"].as_u64().unwrap_or(0) > 10 {
            break;
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(20), "{s:#}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(d.running_pids(1), before, "no NF restarted");
}
