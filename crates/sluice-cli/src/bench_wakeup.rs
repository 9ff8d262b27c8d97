//! `sluice bench sched`, section `wakeup_policies`: Flurries' Table 2
//! (seed 004 §6.3) on this machine. A mix of short interactive flows and
//! long bulk flows crosses NFs that share one core, under each wake-up
//! policy in turn, in alternating rounds:
//!
//! * `every_packet` (Flurries "Min"), `threshold` 32 packets / 100 µs
//!   ("Naive-100us") and / 1 ms ("Naive-1ms"), `adaptive` (Flurries'
//!   Adaptive: short flows at once, then AIMD, 1 ms timeout): the NFs
//!   sleep as soon as they are idle;
//! * `hybrid` (the NFs poll idle before they sleep, wake at once) and
//!   `auto` (sluice's default: hybrid polling with the per-flow, rate-aware
//!   threshold).
//!
//! Every NF carries both kinds of traffic: the "web" generator opens TCP
//! connections of 6 packets (SYN, data, FIN: all below T_short = 36) at a
//! low rate, the "bulk" one sends long UDP flows at a high one; each path
//! of NFs is on a web chain and a bulk chain, so the report's per-chain
//! histograms give the short flows' latency apart from the bulk's. Three
//! setups: 3 paths of one NF (few NFs on the core), 16 paths of one NF
//! (Flurries' one NF per flow) and 5 paths of 3 NFs (where a hold at every
//! hop adds up). Per policy: web latency p50/p99, bulk p99, web and bulk packets
//! per second, the NFs' CPU time (% of one core, from the kernel's count)
//! and their wake-ups and sleeps per second (each a context switch).

use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use sluice_dataplane::latency::Histogram;

/// The policies compared: (row label, `settings.wakeup` rule).
const POLICIES: [(&str, &str); 6] = [
    ("every_packet", "{ policy: every_packet }"),
    (
        "naive_100us",
        "{ policy: threshold, threshold: 32, timeout_us: 100 }",
    ),
    (
        "naive_1ms",
        "{ policy: threshold, threshold: 32, timeout_us: 1000 }",
    ),
    ("adaptive", "{ policy: adaptive }"),
    ("hybrid", "{ policy: hybrid }"),
    ("auto", "{ policy: auto }"),
];

/// Offered load: short-flow packets and bulk packets per second.
const WEB_PPS: u64 = 20_000;
const BULK_PPS: u64 = 400_000;

/// One policy's figures.
#[derive(Debug, Serialize, Clone)]
pub struct WakeRow {
    /// NFs on the core.
    nfs: usize,
    /// NFs per path.
    chain_length: usize,
    policy: &'static str,
    /// Short flows: median and 99th percentile latency, µs (bucket upper
    /// bounds: powers of two).
    web_p50_us: f64,
    web_p99_us: f64,
    /// Bulk packets: 99th percentile latency, µs (what holding costs).
    bulk_p99_us: f64,
    /// Short-flow packets delivered per second.
    web_pps: f64,
    /// Bulk packets delivered, Mpps.
    bulk_mpps: f64,
    /// Packets dropped.
    drops: u64,
    /// The NFs' CPU time, % of one core.
    cpu_pct: f64,
    /// NF wake-ups by the platform per second.
    wakeups_per_s: f64,
    /// Of those, by a held packet's timeout, per second.
    timeout_wakeups_per_s: f64,
    /// NF sleeps per second.
    sleeps_per_s: f64,
}

/// The spec: `n` paths of `len` NFs, each path on a web chain and a bulk
/// chain.
fn spec(n: usize, len: usize, rule: &str) -> String {
    let mut s = format!(
        "settings:\n  buffers: 65536\n  ring_size: 1024\n  wakeup: {rule}\nports:\n  - {{ name: web, kind: generator, flows: 64, protocol: tcp, packets_per_flow: 6, size: 64, rate_pps: {WEB_PPS}, dst_ports: 2000-{} }}\n  - {{ name: bulk, kind: generator, flows: 64, protocol: udp, size: 64, rate_pps: {BULK_PPS}, dst_ports: 1000-{} }}\n  - {{ name: out, kind: sink, check_order: false }}\nnfs:\n",
        2000 + n - 1,
        1000 + n - 1,
    );
    for i in 0..n {
        for h in 0..len {
            s += &format!("  - {{ name: n{i}_{h}, type: forwarder, isolation: process }}\n");
        }
    }
    s += "chains:\n";
    for i in 0..n {
        let path: Vec<String> = (0..len).map(|h| format!("n{i}_{h}")).collect();
        let path = path.join(", ");
        s += &format!(
            "  - {{ name: web{i}, from: web, match: {{ proto: tcp, dst_port: {} }}, nfs: [{path}], to: out }}\n",
            2000 + i
        );
        s += &format!(
            "  - {{ name: bulk{i}, from: bulk, match: {{ proto: udp, dst_port: {} }}, nfs: [{path}], to: out }}\n",
            1000 + i
        );
    }
    s
}

/// The latency below which a fraction `q` of `h`'s packets lie (a bucket's
/// upper bound), ns.
fn quantile(h: &Histogram, q: f64) -> u64 {
    let want = (h.count as f64 * q).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, &c) in h.buckets.iter().enumerate() {
        seen += c;
        if seen >= want {
            return Histogram::upper_ns(i);
        }
    }
    0
}

/// One policy's row from a run's report.
fn row((paths, chain_length): (usize, usize), policy: &'static str, r: &Value) -> WakeRow {
    let secs = r["duration_s"].as_f64().unwrap_or(0.0).max(1e-9);
    let (mut web, mut bulk) = (Histogram::new(), Histogram::new());
    for c in r["chains"].as_array().into_iter().flatten() {
        let name = c["name"].as_str().unwrap_or("");
        let into = if name.starts_with("web") {
            &mut web
        } else {
            &mut bulk
        };
        if let Ok(h) = serde_json::from_value::<Histogram>(c["histogram"].clone()) {
            into.merge(&h);
        }
    }
    let sum = |key: &str| -> f64 {
        r["nfs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n[key].as_f64())
            .sum()
    };
    WakeRow {
        nfs: paths * chain_length,
        chain_length,
        policy,
        web_p50_us: quantile(&web, 0.5) as f64 / 1e3,
        web_p99_us: quantile(&web, 0.99) as f64 / 1e3,
        bulk_p99_us: quantile(&bulk, 0.99) as f64 / 1e3,
        web_pps: web.count as f64 / secs,
        bulk_mpps: bulk.count as f64 / secs / 1e6,
        drops: r["drops_total"].as_u64().unwrap_or(0),
        cpu_pct: sum("process_cpu_us") / secs / 1e4,
        wakeups_per_s: sum("wakeups") / secs,
        timeout_wakeups_per_s: sum("wakeups_by_timeout") / secs,
        sleeps_per_s: sum("sleeps") / secs,
    }
}

/// Runs every policy `rounds` times in alternation on each setup (paths,
/// NFs per path); per setup and policy the round of median web p99.
pub fn wakeup_policies(
    path: &Path,
    secs: f64,
    rounds: usize,
    setups: &[(usize, usize)],
) -> Result<Vec<WakeRow>, String> {
    let mut out = Vec::new();
    for &(paths, len) in setups {
        let mut all: Vec<Vec<WakeRow>> = vec![Vec::new(); POLICIES.len()];
        for _ in 0..rounds {
            for (k, (label, rule)) in POLICIES.iter().enumerate() {
                std::fs::write(path, spec(paths, len, rule))
                    .map_err(|e| format!("cannot write: {e}"))?;
                let r = crate::bench::run_child(path, secs)?;
                all[k].push(row((paths, len), label, &r));
            }
        }
        out.extend(all.into_iter().map(|mut rows| {
            rows.sort_by(|a, b| a.web_p99_us.total_cmp(&b.web_p99_us));
            rows.swap_remove(rows.len() / 2)
        }));
    }
    Ok(out)
}

/// The rows for people.
pub fn human(rows: &[WakeRow]) -> String {
    let mut s = String::new();
    for w in rows {
        s += &format!(
            "wakeup {:2} NFs, {}-NF paths {:13} web p50 {:7.1} µs p99 {:8.1} µs  bulk p99 {:8.1} µs  web {:6.0} pps  bulk {:.3} Mpps  drops {}  CPU {:5.1} %  wake-ups/s {:7.0} (timeout {:6.0})  sleeps/s {:7.0}\n",
            w.nfs,
            w.chain_length,
            w.policy,
            w.web_p50_us,
            w.web_p99_us,
            w.bulk_p99_us,
            w.web_pps,
            w.bulk_mpps,
            w.drops,
            w.cpu_pct,
            w.wakeups_per_s,
            w.timeout_wakeups_per_s,
            w.sleeps_per_s
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let mut h = Histogram::new();
        for ns in [500, 1500, 3000, 3000, 100_000] {
            h.record(ns);
        }
        assert_eq!(quantile(&h, 0.5), 4096);
        assert_eq!(quantile(&h, 0.2), 1024);
        assert_eq!(quantile(&h, 0.99), 131_072);
        assert_eq!(quantile(&Histogram::new(), 0.5), 0);
    }

    #[test]
    fn every_policy_spec_is_valid() {
        for (_, rule) in POLICIES {
            let text = spec(4, 3, rule);
            let s = sluice_spec::parse_str(&text, "bench.yaml", &crate::bench::nf_type_names());
            assert!(s.is_ok(), "{text}\n{s:?}");
        }
    }
}
