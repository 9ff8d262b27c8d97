//! An inline NF whose code panics fails alone (`settings.restart.
//! inline_panic: contain`, the default): the batch it held is dropped as
//! `nf_crashed`, packets for it as `nf_down` while it is down, a fresh
//! instance takes its place per the restart policy, and the other chains
//! of its worker never notice. Every packet stays accounted for.

use std::time::Duration;

use sluice_dataplane::report::NfReport;
use sluice_dataplane::{run, RunOptions, RunReport};
use sluice_spec::Spec;

mod bomb;
use bomb::REGISTRY;

/// Two chains on one worker: `gen → b (the bomb, with `bomb_config`) →
/// out` and `gen2 → f (a forwarder) → out2`.
fn spec(restart: &str, bomb_config: &str) -> Spec {
    let names: Vec<&str> = REGISTRY.iter().map(|t| t.name).collect();
    let text = format!(
        "settings: {{ restart: {{ {restart} }} }}
ports:
  - {{ name: gen, kind: generator, flows: 4, size: 64, rate_pps: 100000 }}
  - {{ name: out, kind: sink }}
  - {{ name: gen2, kind: generator, flows: 4, size: 64, rate_pps: 100000 }}
  - {{ name: out2, kind: sink }}
nfs:
  - {{ name: b, type: bomb, isolation: inline, config: {{ {bomb_config} }} }}
  - {{ name: f, type: forwarder, isolation: inline }}
chains:
  - {{ name: c, from: gen, nfs: [b], to: out }}
  - {{ name: c2, from: gen2, nfs: [f], to: out2 }}
"
    );
    sluice_spec::parse_str(&text, "<test>", &names).unwrap()
}

fn run_for(spec: &Spec, ms: u64) -> RunReport {
    let opts = RunOptions {
        duration: Some(Duration::from_millis(ms)),
        ..RunOptions::default()
    };
    match run(spec, REGISTRY, opts) {
        Ok(r) => r,
        Err(e) => panic!("the run itself failed: {e}"),
    }
}

fn nf<'r>(r: &'r RunReport, name: &str) -> &'r NfReport {
    r.nfs.iter().find(|n| n.name == name).unwrap()
}

fn drops(r: &RunReport, reason: &str) -> u64 {
    r.drops.get(reason).copied().unwrap_or(0)
}

/// Every packet in is out or dropped with a reason; no buffer is left
/// over; the worker never failed.
fn assert_whole(r: &RunReport) {
    assert!(r.failed_workers.is_empty(), "{:?}", r.failed_workers);
    assert_eq!(r.unaccounted, 0, "{r:#?}");
    assert_eq!(r.leaked_buffers, 0, "{r:#?}");
}

/// The other chain of the worker lost nothing.
fn assert_neighbour_untouched(r: &RunReport) {
    let out2 = r.ports.iter().find(|p| p.name == "out2").unwrap();
    let gen2 = r.ports.iter().find(|p| p.name == "gen2").unwrap();
    assert!(out2.stats.tx_packets > 0);
    assert_eq!(out2.stats.tx_packets, gen2.stats.rx_packets, "{r:#?}");
}

#[test]
fn a_panicking_inline_nf_is_restarted_until_its_policy_gives_up() {
    // Every instance panics on its 21st batch; two restarts allowed, at
    // once: three instances die, then the NF stays down.
    let r = run_for(&spec("max_restarts: 2, backoff_ms: 0", "after: 20"), 1_000);
    assert_whole(&r);
    let b = nf(&r, "b");
    assert_eq!(b.restarts, 3, "{b:#?}");
    assert_eq!(b.last_exit.as_deref(), Some("panicked: the bomb went off"));
    assert_eq!(b.restart_times.count, 2, "two fresh instances came");
    // Each instance forwarded 20 batches; each panic dropped its batch.
    assert!(b.packets >= 60, "{b:#?}");
    assert!(drops(&r, "nf_crashed") >= 3, "{:?}", r.drops);
    assert!(drops(&r, "nf_down") > 0, "down for good: {:?}", r.drops);
    let out = r.ports.iter().find(|p| p.name == "out").unwrap();
    assert_eq!(out.stats.tx_packets, b.packets, "what it forwarded got out");
    assert_neighbour_untouched(&r);
}

#[test]
fn a_fresh_instance_takes_over_after_the_backoff() {
    // Only the first instance panics: the restart serves the rest.
    let r = run_for(&spec("backoff_ms: 5", "after: 10, first_only: true"), 600);
    assert_whole(&r);
    let b = nf(&r, "b");
    assert_eq!(b.restarts, 1, "{b:#?}");
    assert_eq!(b.restart_times.count, 1);
    assert!(
        b.restart_times.max_us >= 5_000.0,
        "not before the backoff: {b:#?}"
    );
    // The fresh instance's own counter (the crashed one's were cleared).
    let counted = b.counters.get("packets").copied().unwrap_or(0);
    assert!(counted > 10_000, "the fresh instance forwarded: {b:#?}");
    assert!(drops(&r, "nf_crashed") > 0);
    // Its backoff at 100 kpps: packets came while it was down.
    assert!(drops(&r, "nf_down") > 0, "{:?}", r.drops);
    assert_neighbour_untouched(&r);
}

#[test]
fn a_panic_in_a_timer_is_the_nf_s_alone_too() {
    let r = run_for(&spec("policy: never", "after: 0, in: tick"), 300);
    assert_whole(&r);
    let b = nf(&r, "b");
    assert_eq!(b.restarts, 1);
    assert_eq!(b.last_exit.as_deref(), Some("panicked: the timer went off"));
    assert_eq!(b.restart_times.count, 0, "policy never: no fresh instance");
    // Down from its first tick on: what came later was dropped as such.
    assert!(drops(&r, "nf_down") > 0, "{:?}", r.drops);
    assert_neighbour_untouched(&r);
}

#[test]
fn under_inline_panic_stop_the_run_ends_with_the_panic() {
    let opts = RunOptions {
        duration: Some(Duration::from_secs(60)),
        ..RunOptions::default()
    };
    match run(&spec("inline_panic: stop", "after: 20"), REGISTRY, opts) {
        Err(e) => assert_eq!(
            e.to_string(),
            "the data plane has failed: worker 0 stopped: its code panicked: the bomb went off"
        ),
        Ok(r) => panic!("the panic was contained: {r:#?}"),
    }
}
