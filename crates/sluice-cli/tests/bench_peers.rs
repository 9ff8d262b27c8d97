//! `sluice bench peers` measures what is installed, leaves out what is
//! not with the reason, and reports per-work rows a reader can trust:
//! packets both ways for `bidir`, cycles that follow from the cores a
//! system kept busy. (The figures themselves go into docs/benchmarks.md.)
//! Needs root: the benchmark reserves huge pages.

mod common;
use common::*;

use serde_json::Value;

fn peers(args: &[&str]) -> (std::process::Output, Value) {
    let mut all = vec!["peers", "--quick", "--json"];
    all.extend_from_slice(args);
    bench(&all)
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

fn huge_pages() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// One test: both runs change the host's huge page pool, and each must
/// give back what it added.
#[test]
fn bench_peers_measures_what_is_there_and_leaves_out_the_rest() {
    if !is_root() {
        eprintln!("skipping: needs root (huge pages)");
        return;
    }
    let before = huge_pages();
    sluice_without_dpdk_ports_is_left_out_with_the_reason();
    assert_eq!(
        huge_pages(),
        before,
        "the huge pages added were not given back"
    );
    if installed("dpdk-testpmd") {
        testpmd_rows_carry_rates_per_direction_and_cycles();
        assert_eq!(
            huge_pages(),
            before,
            "the huge pages added were not given back"
        );
    } else {
        eprintln!("not measuring testpmd: dpdk-testpmd (Debian's dpdk-dev) is not installed");
    }
}

fn sluice_without_dpdk_ports_is_left_out_with_the_reason() {
    let (out, r) = peers(&["--system", "sluice_inline", "--work", "io"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if r["skipped"].as_array().unwrap().is_empty() {
        // A binary built with `--features dpdk` measures itself.
        assert!(r["rows"][0]["mpps"].as_f64().unwrap() > 0.1, "{r}");
        assert!(
            r["ratios"]["sluice_inline_vs_ovs"].is_null(),
            "no OVS row: {r}"
        );
    } else {
        assert_eq!(r["rows"].as_array().unwrap().len(), 0, "{r}");
        let skipped = &r["skipped"][0];
        assert_eq!(skipped["system"], "sluice_inline");
        assert!(
            skipped["reason"]
                .as_str()
                .unwrap()
                .contains("--features dpdk"),
            "{r}"
        );
    }
    assert!(r["cpu_mhz"].as_f64().unwrap() > 100.0);
}

fn testpmd_rows_carry_rates_per_direction_and_cycles() {
    let (out, r) = peers(&["--system", "testpmd", "--work", "io", "--work", "bidir"]);
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && err.contains("huge pages") {
        // The host's memory, not the benchmark: say so and stop here.
        eprintln!("not measuring testpmd: {err}");
        return;
    }
    assert!(out.status.success(), "{err}");
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{r}");
    for row in rows {
        let f = |k: &str| row[k].as_f64().unwrap();
        assert!(f("mpps") > 1.0, "{row}");
        assert!(
            (f("mpps") - f("mpps_0_to_1") - f("mpps_1_to_0")).abs() < 1e-6,
            "{row}"
        );
        // Busy cores: more than nothing, at most the host's CPUs (how
        // much of one the forwarding lcore gets depends on the host's load).
        let cpus = std::thread::available_parallelism().unwrap().get() as f64;
        assert!(f("cores") > 0.01 && f("cores") <= cpus + 0.1, "{row}");
        let expected = f("cores") * r["cpu_mhz"].as_f64().unwrap() / f("mpps");
        assert!(
            (f("cycles_per_packet") - expected).abs() < 1e-6 * expected,
            "{row}"
        );
        match row["work"].as_str().unwrap() {
            "io" => assert_eq!(f("mpps_1_to_0"), 0.0, "{row}"),
            "bidir" => {
                // testpmd's io mode serves both ports in turn.
                assert!(f("mpps_1_to_0") > 0.3 * f("mpps"), "{row}");
                assert!(f("mpps_0_to_1") > 0.3 * f("mpps"), "{row}");
            }
            w => panic!("unexpected work {w}"),
        }
    }
}
