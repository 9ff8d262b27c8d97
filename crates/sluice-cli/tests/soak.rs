//! `sluice soak`: a short soak kills NF processes, adds and removes a
//! chain and restarts its daemon, and its books balance: nothing leaked,
//! every lost packet was one a killed NF held, every change applied.

mod common;
use common::*;

#[test]
fn a_short_soak_balances_its_books() {
    let out = sluice()
        .args([
            "soak",
            "--minutes",
            "0.3",
            "--kill-every",
            "0.5",
            "--rate-pps",
            "20000",
            "--seed",
            "7",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {r:#}"));
    // 18 s with a kill every 0.5 s and a change every 2 s, a daemon
    // restart half way.
    assert!(n("kills") >= 10, "{r:#}");
    assert!(n("restarts") >= 5, "{r:#}");
    assert!(n("changes") >= 4, "{r:#}");
    // Standbys are the soak's default: restarts are take-overs.
    assert_eq!(r["standby"], true, "{r:#}");
    assert!(n("standby_starts") >= 1, "{r:#}");
    assert_eq!(n("changes_failed"), 0, "{r:#}");
    assert!(r["daemon_restart_ms"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(
        n("packets_out") > 0 && n("packets_in") >= n("packets_out"),
        "{r:#}"
    );
    assert_eq!(n("leaked_buffers"), 0, "{r:#}");
    assert_eq!(n("leaked_slots"), 0, "{r:#}");
    assert!(r["loss_vs_held"].as_f64().unwrap() <= 1.0, "{r:#}");
    assert_eq!(n("held"), r["drops"]["nf_crashed"].as_u64().unwrap_or(0));
    // Too short for the memory and descriptor baselines (10 s after each
    // start, 20 s runs).
    for k in ["fd_growth", "rss_growth_pct", "anon_growth_pct"] {
        assert!(r[k].is_null(), "{k}: {r:#}");
    }
}

#[test]
fn standbys_without_shells_are_refused() {
    let out = sluice()
        .args(["soak", "--minutes", "0.1", "--shells", "off"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--standby on needs --shells on"), "{e}");
}

#[test]
fn bad_durations_are_usage_errors() {
    for bad in ["0", "-1", "nan", "1441"] {
        let flag = format!("--minutes={bad}");
        let out = sluice().args(["soak", &flag]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("minutes"), "{bad}: {e}");
    }
}
