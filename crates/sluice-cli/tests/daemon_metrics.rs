//! `/metrics` of a daemon running the quickstart: OpenMetrics to a
//! scraper that asks for it, which the strict OpenMetrics parser of
//! `prometheus_client` (PyPI) accepts, else the Prometheus text format,
//! which `promtool check metrics` (Debian's `prometheus` package) passes
//! without a finding; the same samples in both, counters that match
//! `/v1/stats` and well-formed histograms. Each tool
//! check skips with a message when the tool is missing (`.ci/run`
//! installs both).

mod daemon_util;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use daemon_util::{quickstart, Daemon};

/// What Prometheus sends.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A daemon that has run the quickstart for a while.
fn daemon() -> Daemon {
    let d = Daemon::start();
    let (text, path) = quickstart();
    d.apply(&text, &path);
    d.wait_traffic(20);
    std::thread::sleep(std::time::Duration::from_millis(300));
    d
}

/// One scrape as OpenMetrics (what Prometheus asks for).
fn scrape_openmetrics(d: &Daemon) -> String {
    let r = d
        .try_req_with("GET", "/metrics", &[("Accept", PROMETHEUS_ACCEPT)], None)
        .unwrap();
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(
        r.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    r.text()
}

/// One scrape with no `Accept` (curl, promtool): the Prometheus text
/// format.
fn scrape_text(d: &Daemon) -> String {
    let r = d.req("GET", "/metrics", None);
    assert_eq!(r.status, 200, "{r}");
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    r.text()
}

fn scrape() -> (Daemon, String) {
    let d = daemon();
    let text = scrape_openmetrics(&d);
    (d, text)
}

/// Samples by their full name with labels (`name{a="b"}`).
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            let v: f64 = v.parse().unwrap_or_else(|_| panic!("bad value in `{l}`"));
            (k.to_string(), v)
        })
        .collect()
}

fn run_tool(cmd: &mut Command, input: &str) -> std::io::Result<std::process::Output> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().unwrap().write_all(input.as_bytes())?;
    child.wait_with_output()
}

#[test]
fn metrics_are_openmetrics_that_match_the_stats() {
    let (d, text) = scrape();
    assert!(text.ends_with("# EOF\n"), "no # EOF at the end");
    assert_eq!(text.matches("# EOF").count(), 1);
    let s = samples(&text);
    // Every family the docs promise is there.
    for family in [
        "sluice_port_rx_packets_total",
        "sluice_port_tx_packets_total",
        "sluice_port_rx_bytes_total",
        "sluice_port_drops_total",
        "sluice_nf_packets_total",
        "sluice_nf_cpu_seconds_total",
        "sluice_nf_restarts_total",
        "sluice_nf_starts_total",
        "sluice_nf_ring_occupancy",
        "sluice_nf_instance_up",
        "sluice_buffers",
        "sluice_flows_live",
        "sluice_flows_created_total",
        "sluice_chain_latency_seconds_bucket",
        "sluice_chain_latency_seconds_count",
    ] {
        assert!(
            s.keys().any(|k| k.split('{').next() == Some(family)),
            "no {family} in:\n{text}"
        );
    }
    assert_eq!(s[r#"sluice_nf_instance_up{nf="acl",worker="0"}"#], 1.0);
    // The quickstart's process NFs each started once, from a shell
    // (`settings.shells` is on by default).
    assert_eq!(s[r#"sluice_nf_starts_total{nf="acl",from="shell"}"#], 1.0);
    assert_eq!(s[r#"sluice_nf_starts_total{nf="acl",from="fork"}"#], 0.0);
    assert_eq!(s[r#"sluice_nf_starts_total{nf="acl",from="standby"}"#], 0.0);
    let sent = s[r#"sluice_port_tx_packets_total{port="out",kind="sink"}"#];
    let stats = d.get("/v1/stats");
    let after = stats["packets_out"].as_f64().unwrap();
    assert!(
        sent > 0.0 && sent <= after,
        "sink tx {sent}, then packets_out {after}"
    );
    // Histograms: cumulative buckets, +Inf equal to the count.
    let mut ordered: Vec<(f64, f64)> = s
        .iter()
        .filter_map(|(k, v)| {
            let le = k
                .strip_prefix(r#"sluice_chain_latency_seconds_bucket{chain="main",le=""#)?
                .strip_suffix("\"}")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            Some((le, *v))
        })
        .collect();
    assert!(ordered.len() > 2, "too few buckets: {ordered:?}");
    ordered.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(
        ordered.windows(2).all(|w| w[0].1 <= w[1].1),
        "buckets are not cumulative: {ordered:?}"
    );
    let count = s[r#"sluice_chain_latency_seconds_count{chain="main"}"#];
    assert_eq!(ordered.last().unwrap(), &(f64::INFINITY, count));
    assert!(count > 0.0);
}

#[test]
fn both_formats_carry_the_same_families_and_samples() {
    let d = daemon();
    // Counters move between scrapes: compare names, not values.
    let om = scrape_openmetrics(&d);
    let text = scrape_text(&d);
    assert!(
        !text.contains("# EOF") && !text.contains("# UNIT"),
        "{text}"
    );
    let names = |t: &str| -> Vec<String> { samples(t).into_keys().collect() };
    assert_eq!(names(&om), names(&text));
    // Each counter family is declared under its samples' name.
    for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut w = l.split_whitespace().skip(2);
        let (name, kind) = (w.next().unwrap(), w.next().unwrap());
        if kind == "counter" {
            assert!(name.ends_with("_total"), "{l}");
        }
        assert!(
            text.lines()
                .any(|x| x.starts_with(&format!("# HELP {name} "))),
            "no HELP for {name}"
        );
    }
}

#[test]
fn promtool_accepts_the_metrics() {
    let d = daemon();
    let text = scrape_text(&d);
    let out = match run_tool(Command::new("promtool").args(["check", "metrics"]), &text) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipping: promtool is not available ({e}); `apt-get install prometheus` ships it (.ci/run installs it)");
            return;
        }
    };
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n---\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // promtool prints lint findings and still exits 0 for some; there
    // must be none.
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.trim().is_empty(),
        "promtool check metrics says:\n{said}"
    );
}

#[test]
fn the_strict_openmetrics_parser_accepts_the_metrics() {
    let (_d, text) = scrape();
    let script = "import sys\n\
                  try:\n    from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
                  except ImportError:\n    sys.exit(77)\n\
                  n = 0\n\
                  for f in text_string_to_metric_families(sys.stdin.read()):\n    n += len(f.samples)\n\
                  print(n)\n";
    let out = match run_tool(Command::new("python3").args(["-c", script]), &text) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipping: python3 is not available ({e})");
            return;
        }
    };
    if out.status.code() == Some(77) {
        eprintln!("skipping: the Python module prometheus_client is not installed (`pip install prometheus-client`; .ci/run installs it)");
        return;
    }
    assert!(
        out.status.success(),
        "the OpenMetrics parser rejects the metrics: {}\n---\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    assert_eq!(
        n,
        samples(&text).len(),
        "the parser saw another number of samples"
    );
}
