//! A worker whose code panics (here an inline NF's, which runs on the
//! worker's thread, under `settings.restart.inline_panic: stop`; by
//! default an inline NF's panic fails only that NF: `inline_panic.rs`)
//! stops; the platform then says so everywhere it is
//! asked instead of answering as if packets still moved: `run` ends with
//! the panic's message, a report names the failed worker, an apply is
//! refused and changes nothing, and asking the worker anything returns at
//! once (its mailbox closes every reply channel).

use std::time::{Duration, Instant};

use sluice_dataplane::{run, PlatformSettings, RunError, RunOptions, Runtime};
use sluice_spec::Spec;

mod bomb;
use bomb::REGISTRY;

/// A generator through NF `b` to a sink: `b` a bomb that goes off after
/// 20 batches, or (`nf_type: forwarder`) a forwarder.
fn spec(nf_type: &str, extra_nf: &str) -> Spec {
    let config = if nf_type == "bomb" {
        ", config: { after: 20 }"
    } else {
        ""
    };
    let names: Vec<&str> = REGISTRY.iter().map(|t| t.name).collect();
    let text = format!(
        "settings: {{ restart: {{ inline_panic: stop }} }}\nports:\n  - {{ name: gen, kind: generator, flows: 4, size: 64, rate_pps: 100000 }}\n  - {{ name: out, kind: sink }}\nnfs:\n  - {{ name: b, type: {nf_type}, isolation: inline{config} }}\n{extra_nf}chains:\n  - {{ name: c, from: gen, nfs: [b], to: out }}\n"
    );
    sluice_spec::parse_str(&text, "<test>", &names).unwrap()
}

const WHY: &str = "worker 0 stopped: its code panicked: the bomb went off";

#[test]
fn a_run_whose_worker_panics_ends_with_the_panic_s_message() {
    // Without the failure seen, the run would last its whole duration
    // and end Ok.
    let opts = RunOptions {
        duration: Some(Duration::from_secs(60)),
        ..RunOptions::default()
    };
    match run(&spec("bomb", ""), REGISTRY, opts) {
        Err(RunError::Failed(why)) => assert_eq!(why, WHY),
        other => panic!("expected the worker's failure, got {other:?}"),
    }
}

#[test]
fn a_failed_worker_is_named_by_reports_and_refuses_applies() {
    let first = spec("bomb", "");
    let mut settings = PlatformSettings::for_spec(&first);
    settings.max_nfs = 8;
    let mut rt = Runtime::start(settings, REGISTRY).unwrap();
    // A whole platform has no failure, and its report says none.
    assert_eq!(rt.failure(), None);
    assert!(rt.report().failed_workers.is_empty());
    rt.apply(&first).unwrap();
    let t = Instant::now();
    while rt.failure().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the bomb never went off"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(rt.failure().as_deref(), Some(WHY));

    let r = rt.report();
    assert_eq!(r.failed_workers, [WHY]);
    assert!(
        r.nfs.is_empty(),
        "the failed worker's part is missing: {r:#?}"
    );
    assert!(rt.instances().is_empty());

    let more = spec(
        "bomb",
        "  - { name: f, type: forwarder, isolation: inline }\n",
    );
    match rt.apply(&more) {
        Err(e @ RunError::Failed(_)) => {
            assert_eq!(e.to_string(), format!("the data plane has failed: {WHY}"))
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Nothing of the refused change was taken.
    assert!(rt.plan().nfs_in_order().all(|(_, n)| n.name != "f"));

    let last = rt.stop();
    assert_eq!(last.failed_workers, [WHY]);
}

#[test]
fn the_same_chain_without_the_panic_runs_whole() {
    // The control for the two tests above: the spec itself is sound.
    let opts = RunOptions {
        duration: Some(Duration::from_millis(300)),
        ..RunOptions::default()
    };
    let r = run(&spec("forwarder", ""), REGISTRY, opts).unwrap();
    assert!(r.failed_workers.is_empty());
    assert!(r.packets_out > 0, "{r:#?}");
    assert_eq!(r.unaccounted, 0);
}
