//! `sluice bench chain` and `sluice bench nfs` produce the documented JSON,
//! with every packet delivered and no buffer leaked (the figures
//! themselves are measured in docs/benchmarks.md, not asserted here);
//! `sluice bench jitter` sees a stall it is given; `sluice bench sched`
//! runs every experiment under both scheduling policies; `sluice bench
//! instantiate` creates the NFs it says, all running, and reports each
//! figure; `sluice bench replicas` runs every setup, each replica taking
//! a share; `sluice bench perflow` runs every setup and reports the
//! pool's costs; `sluice bench migrate` moves its firewall there and back
//! and counts every frame of its stream.

mod common;
use common::*;

use serde_json::Value;
use std::process::Stdio;

#[test]
fn bench_chain_reports_rate_latency_and_no_leaks_with_one_and_two_workers() {
    for (workers, isolation) in [
        ("1", "inline"),
        ("2", "inline"),
        ("1", "process"),
        ("2", "process"),
    ] {
        let (out, r) = bench(&[
            "chain",
            "--length",
            "2",
            "--isolation",
            isolation,
            "--duration",
            "0.5",
            "--workers",
            workers,
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(r["length"], 2);
        assert_eq!(r["isolation"], isolation);
        assert_eq!(r["workers"].to_string(), workers);
        assert!(r["mpps"].as_f64().unwrap() > 0.0, "{r:#}");
        assert!(r["gbps"].as_f64().unwrap() > 0.0);
        for k in ["p50", "p99", "p999"] {
            assert!(r["latency_ns"][k].as_u64().unwrap() > 0, "{r:#}");
        }
        assert_eq!(r["drops_total"], 0);
        assert_eq!(r["leaked_buffers"], 0);
        assert_eq!(r["latency_ns"]["count"], r["packets_out"]);
        assert_eq!(r["nf_ns_per_packet"].as_array().unwrap().len(), 2);
    }
}

#[test]
fn bench_nfs_runs_the_realistic_chain_with_a_cost_per_nf() {
    let (out, r) = bench(&["nfs", "--duration", "0.5", "--flows", "512", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r["flows"], 512);
    assert!(r["mpps"].as_f64().unwrap() > 0.0, "{r:#}");
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(r["leaked_buffers"], 0);
    let nfs = r["nfs"].as_array().unwrap();
    let types: Vec<&str> = nfs.iter().map(|n| n["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["firewall", "nat", "monitor", "router"]);
    for n in nfs {
        assert_eq!(n["packets"], r["packets_out"], "{r:#}");
        assert!(n["ns_per_packet"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn bench_nfs_sizes_its_tables_for_the_flows_asked_for() {
    // 100 000 flows do not fit the file's 65 536-entry flow and NAT tables;
    // the bench sizes them, so nothing is dropped as table_full.
    let (out, r) = bench(&["nfs", "--duration", "1", "--flows", "100000", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(r["drops_total"], 0, "{r:#}");
    assert_eq!(r["drops"], serde_json::json!({}), "{r:#}");
    assert!(r["packets_out"].as_u64().unwrap() > 0, "{r:#}");
}

#[test]
fn nat_refuses_to_run_as_per_worker_copies() {
    let (_d, path) = spec_file(
        "settings: { workers: 2 }\nports:\n  - { name: lan, kind: generator, flows: 8 }\n  - { name: wan, kind: sink }\nnfs:\n  - name: nat\n    type: nat\n    isolation: inline\n    config: { inside: [10.0.0.0/16], pool: [192.0.2.1/32] }\nchains:\n  - { name: c, from: lan, nfs: [nat], to: wan }\n",
    );
    let (out, r) = run_json(&path, 1.0);
    assert_eq!(out.status.code(), Some(2), "{r:#}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(":9:13: nfs[0].config: NF nat: nat keeps mappings and a port pool shared by all flows, so it cannot run as 2 copies side by side"),
        "{err}"
    );
}

fn allowed_cpus() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string();
    list.split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

#[test]
fn bench_jitter_sees_a_stopped_process_as_a_gap_on_every_cpu() {
    // SIGSTOP holds every spinning thread off its CPU for 300 ms: each CPU
    // must report one gap of at least that in its ≥ 5 ms class.
    let child = sluice()
        .args(["bench", "jitter", "--duration", "1.5", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(400));
    let pid = child.id().to_string();
    let kill = |sig: &str| {
        assert!(std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success())
    };
    kill("-STOP");
    std::thread::sleep(std::time::Duration::from_millis(300));
    kill("-CONT");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cpus = r["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), allowed_cpus(), "{r:#}");
    for c in cpus {
        assert!(c["gaps"][4].as_u64().unwrap() >= 1, "{r:#}");
        assert!(c["max_gap_us"].as_u64().unwrap() >= 250_000, "{r:#}");
        let pct = c["lost_over_50us_pct"].as_f64().unwrap();
        assert!((250_000.0 / 1.5e6 * 100.0..=100.0).contains(&pct), "{r:#}");
    }
}

#[test]
fn bench_jitter_refuses_a_bad_duration() {
    let (out, _) = bench(&["jitter", "--duration", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration"));
}

#[test]
fn bench_sched_runs_each_experiment_under_both_policies() {
    let (out, r) = bench(&["sched", "--quick", "--section", "long_chain", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = r["long_chain"].as_array().unwrap();
    let got: Vec<(u64, &str)> = rows
        .iter()
        .map(|x| (x["length"].as_u64().unwrap(), x["policy"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [(50, "hybrid"), (50, "turns"), (60, "hybrid"), (60, "turns")],
        "{r:#}"
    );
    for x in rows {
        assert!(x["mpps"].as_f64().unwrap() > 0.0, "{r:#}");
        let turns = x["turns_per_s"].as_f64().unwrap();
        assert_eq!(turns > 0.0, x["policy"] == "turns", "{r:#}");
    }
    assert!(r["summary"]["long_chain_60_p50_us"].as_f64().unwrap() > 0.0);
    assert!(
        r["nfs_per_core"].as_array().unwrap().is_empty(),
        "only the section asked for"
    );
}

#[test]
fn bench_instantiate_creates_every_nf_and_reports_its_figures() {
    for via in ["add", "apply"] {
        instantiate_via(via);
    }
}

/// `bench instantiate` asking for its NFs `via` additions or whole specs.
fn instantiate_via(via: &str) {
    let (out, v) = bench(&[
        "instantiate",
        "--count",
        "6",
        "--batch",
        "2",
        "--via",
        via,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["via"], via, "{v:#}");
    assert_eq!(v["count"], 6, "{v:#}");
    assert_eq!(v["batch"], 2, "{v:#}");
    assert_eq!(v["sandbox"], "strict", "{v:#}");
    // Six created and the base chain's NF, all running at the end.
    assert_eq!(v["alive"], 7, "{v:#}");
    let create = &v["create_us"];
    assert!(create["p50"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(create["p50"].as_f64() <= create["max"].as_f64(), "{v:#}");
    let deciles = v["create_us_by_decile"].as_array().unwrap();
    assert_eq!(deciles.len(), 10, "{v:#}");
    // The platform's part is a part of the request.
    assert!(v["spawn_us"]["p50"].as_f64().unwrap() > 0.0, "{v:#}");
    // Three requests, each sampled: the first packet came after the
    // request and the NF's memory was read.
    assert!(v["first_packet_us"]["p50"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(v["pss_kib_per_nf"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(v["private_kib_per_nf"].as_f64().unwrap() > 0.0, "{v:#}");
    assert!(v["fork_exec_us"]["p50"].as_f64().unwrap() > 0.0, "{v:#}");
    // crun: a figure, or null with the reason.
    assert!(
        v["crun_us"]["p50"].as_f64().is_some() || v["crun_note"].is_string(),
        "{v:#}"
    );
}

#[test]
fn bench_replicas_runs_every_setup_and_every_replica_takes_a_share() {
    let (out, r) = bench(&["replicas", "--quick", "--duration", "0.5", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (section, replicas) in [("steering", [1, 4, 4]), ("costly", [1, 2, 2])] {
        let rows = r[section].as_array().unwrap_or_else(|| panic!("{r:#}"));
        assert_eq!(rows.len(), 3, "{r:#}");
        for (row, n) in rows.iter().zip(replicas) {
            let shares = row["shares"].as_array().unwrap();
            assert_eq!(shares.len(), n, "{row:#}");
            assert!(shares.iter().all(|s| s.as_u64() > Some(0)), "{row:#}");
            assert!(row["mpps"].as_f64() > Some(0.0), "{row:#}");
            assert_eq!(row["leaked_buffers"], 0, "{row:#}");
        }
    }
    assert!(r["steering_ratio_hash"].as_f64() > Some(0.0), "{r:#}");
    assert_eq!(r["rounds"], 1);
}

#[test]
fn bench_perflow_runs_every_setup_and_reports_activations_and_costs() {
    let (out, r) = bench(&["perflow", "--quick", "--duration", "0.5", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = r["rows"].as_array().unwrap_or_else(|| panic!("{r:#}"));
    let setups: Vec<&str> = rows.iter().map(|x| x["setup"].as_str().unwrap()).collect();
    assert_eq!(
        setups,
        [
            "shared",
            "per_flow_inline",
            "per_flow_process",
            "per_flow_refork"
        ]
    );
    for row in rows {
        assert!(row["mpps"].as_f64().unwrap() > 0.0, "{r:#}");
        assert!(row["activations_per_s"].as_f64().unwrap() > 0.0, "{r:#}");
        assert_eq!(row["leaked_buffers"], 0, "{r:#}");
    }
    assert!(r["assign_ns"]["p50"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(
        r["assign_ns"]["p99"].as_f64() >= r["assign_ns"]["p50"].as_f64(),
        "{r:#}"
    );
    assert!(r["reset_us"]["hook"].as_f64().unwrap() >= 0.0, "{r:#}");
    assert!(r["reset_us"]["refork"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(rows[3]["reforks"].as_u64().unwrap() > 0, "{r:#}");
    assert_eq!(rows[2]["reforks"], 0, "the hook forks nothing: {r:#}");
    assert_eq!(r["pool"], 64);
}

#[test]
fn bench_migrate_moves_the_firewall_back_and_forth_and_counts_every_frame() {
    if !sluice_nic::has_net_caps() {
        eprintln!("skipping: bench migrate needs root (namespaces, taps, pidfd_getfd)");
        return;
    }
    let (out, v) = bench(&[
        "migrate", "--flows", "200", "--rate", "2000", "--rounds", "1", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(v["moves"], 2, "{v:#}");
    assert_eq!(v["by_move"].as_array().unwrap().len(), 2, "{v:#}");
    // Every connection was tracked and its state moved.
    assert_eq!(v["tracked"], 200, "{v:#}");
    assert!(v["state_bytes"].as_u64().unwrap() > 0, "{v:#}");
    for k in [
        "prepare_ms",
        "checkpoint_ms",
        "restore_ms",
        "migrate_ms",
        "commit_ms",
    ] {
        let p50 = v[k]["p50"].as_f64().unwrap();
        assert!(
            p50 > 0.0 && p50 <= v[k]["max"].as_f64().unwrap(),
            "{k}: {v:#}"
        );
    }
    // The frames waited for the pause and the resume.
    assert!(
        v["migrate_ms"]["max"].as_f64() >= v["checkpoint_ms"]["max"].as_f64(),
        "{v:#}"
    );
    assert!(v["sent"].as_u64().unwrap() > 1000, "{v:#}");
    assert_eq!(v["lost_packets"], 0, "{v:#}");
    assert_eq!(v["sent"], v["delivered"], "{v:#}");
}
