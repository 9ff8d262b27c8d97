//! `GET /metrics`: the platform's counters in the OpenMetrics text format
//! (`prometheus-client`) to a scraper that asks for it (Prometheus does,
//! in its `Accept` header), else in the Prometheus text format 0.0.4 that
//! every other consumer reads (`curl`, `promtool check metrics`, older
//! scrapers). Both are built from one report and one instance list per
//! scrape, so every value is read at the same moment. Names and labels
//! are documented in `docs/metrics.md`.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use sluice_dataplane::latency::Histogram;
use sluice_dataplane::report::RunReport;
use sluice_dataplane::worker::Instance;

use crate::error::ApiError;
use crate::extract::AppState;

/// The OpenMetrics content type.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The Prometheus text format's content type.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub fn routes(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .with_state(state)
}

async fn scrape(
    State(app): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let (report, instances) = app
        .control
        .call(|s| (s.rt.report(), s.rt.instances()))
        .await?;
    let text = render(&report, &instances);
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    Ok(if openmetrics {
        ([(header::CONTENT_TYPE, CONTENT_TYPE)], text)
    } else {
        (
            [(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)],
            to_prometheus_text(&text),
        )
    })
}

/// OpenMetrics text as the Prometheus text format 0.0.4: a counter
/// family is named like its samples (`x_total`, where OpenMetrics names
/// it `x`), and there are no `# UNIT` or `# EOF` lines. The samples are
/// the same.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            // Held until the TYPE line says whether the name gets `_total`.
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            let name = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, t)| t);
                out += &format!("# HELP {name} {text}\n");
            }
            let kind = if kind == "unknown" { "untyped" } else { kind };
            out += &format!("# TYPE {name} {kind}\n");
            continue;
        }
        if let Some(h) = help.take() {
            out += &format!("# HELP {h}\n");
        }
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        out += line;
        out.push('\n');
    }
    out
}

type Labels = Vec<(String, String)>;

fn counter_family(
    reg: &mut Registry,
    name: &str,
    help: &str,
    unit: Option<Unit>,
) -> Family<Labels, Counter<f64>> {
    let f = Family::<Labels, Counter<f64>>::default();
    match unit {
        Some(u) => reg.register_with_unit(name, help, u, f.clone()),
        None => reg.register(name, help, f.clone()),
    }
    f
}

fn gauge_family(reg: &mut Registry, name: &str, help: &str) -> Family<Labels, Gauge> {
    let f = Family::<Labels, Gauge>::default();
    reg.register(name, help, f.clone());
    f
}

fn l(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The metrics text for one report and instance list.
pub fn render(r: &RunReport, instances: &[Instance]) -> String {
    let mut reg = Registry::with_prefix("sluice");
    let port_rx = counter_family(
        &mut reg,
        "port_rx_packets",
        "Packets received by a port",
        None,
    );
    let port_rx_bytes = counter_family(
        &mut reg,
        "port_rx",
        "Bytes received by a port",
        Some(Unit::Bytes),
    );
    let port_tx = counter_family(
        &mut reg,
        "port_tx_packets",
        "Packets transmitted by a port",
        None,
    );
    let port_tx_bytes = counter_family(
        &mut reg,
        "port_tx",
        "Bytes transmitted by a port",
        Some(Unit::Bytes),
    );
    let port_drops = counter_family(
        &mut reg,
        "port_drops",
        "Frames a port lost, by reason: rx_no_buffer (buffer pool empty), rx_oversize, rx_dropped (kernel or device ring full), tx_error",
        None,
    );
    let port_held = gauge_family(
        &mut reg,
        "port_held_buffers",
        "Arena buffers a port has lent the kernel or device now (an AF_XDP port's fill rings and frames in flight)",
    );
    let port_paused = gauge_family(
        &mut reg,
        "port_paused",
        "1 while a port is not read because its NF is moving to another daemon (frames wait in its interface)",
    );
    for p in &r.ports {
        let n = p.name.as_str();
        let lab = l(&[("port", n), ("kind", p.kind.as_str())]);
        port_paused
            .get_or_create(&lab)
            .set(i64::from(p.stats.paused));
        port_held
            .get_or_create(&lab)
            .set(i64::try_from(p.stats.held_buffers).unwrap_or(i64::MAX));
        port_rx
            .get_or_create(&lab)
            .inc_by(p.stats.rx_packets as f64);
        port_rx_bytes
            .get_or_create(&lab)
            .inc_by(p.stats.rx_bytes as f64);
        port_tx
            .get_or_create(&lab)
            .inc_by(p.stats.tx_packets as f64);
        port_tx_bytes
            .get_or_create(&lab)
            .inc_by(p.stats.tx_bytes as f64);
        for (reason, v) in [
            ("rx_no_buffer", p.stats.rx_no_buffer),
            ("rx_oversize", p.stats.rx_oversize),
            ("rx_dropped", p.stats.rx_dropped),
            ("tx_error", p.stats.tx_errors),
        ] {
            port_drops
                .get_or_create(&l(&[("port", n), ("reason", reason)]))
                .inc_by(v as f64);
        }
    }
    let nf_packets = counter_family(
        &mut reg,
        "nf_packets",
        "Packets an NF processed (all its instances)",
        None,
    );
    let nf_cpu = counter_family(
        &mut reg,
        "nf_cpu",
        "CPU time an NF spent in its batch handler (all its instances)",
        Some(Unit::Seconds),
    );
    let nf_process_cpu = counter_family(
        &mut reg,
        "nf_process_cpu",
        "CPU time of an NF's processes as the kernel counts it: its batch handler, ring I/O and polling (process NFs)",
        Some(Unit::Seconds),
    );
    let nf_switches = counter_family(
        &mut reg,
        "nf_context_switches",
        "Times the kernel put a process NF's processes on a CPU (each wake-up, yield or preemption ends in one)",
        None,
    );
    let nf_drops = counter_family(
        &mut reg,
        "nf_drops",
        "Packets an NF dropped, by its own reason",
        None,
    );
    let nf_restarts = counter_family(
        &mut reg,
        "nf_restarts",
        "Times an NF's process was restarted after it died",
        None,
    );
    let nf_reforks = counter_family(
        &mut reg,
        "nf_reforks",
        "Instances of a per-flow or per-class pool discarded and forked afresh for their next flow (reset: refork)",
        None,
    );
    let nf_starts = counter_family(
        &mut reg,
        "nf_starts",
        "Starts of a process NF by how its process came to be: fork (built in the new process), shell (forked from the NF built in its template), standby (a prepared instance took over) or spare (a process its template forked ahead for the slot took it)",
        None,
    );
    let nf_contained = counter_family(
        &mut reg,
        "nf_sandbox_kills",
        "NF processes the kernel killed for breaking their sandbox, by reason (seccomp: a system call outside its list; memory_limit: its memory_max_mib)",
        None,
    );
    let nf_domain_copies = counter_family(
        &mut reg,
        "nf_domain_copies",
        "Packets copied into an NF's trust domain on their way to it, from a port or an NF of another domain (settings.domains)",
        None,
    );
    let nf_turns = counter_family(
        &mut reg,
        "nf_turns",
        "Turns of its core a process NF took (settings.scheduler)",
        None,
    );
    let nf_turns_revoked = counter_family(
        &mut reg,
        "nf_turns_revoked",
        "Turns the scheduler took back from an NF that kept one too long",
        None,
    );
    let nf_turns_held_off = counter_family(
        &mut reg,
        "nf_turns_held_off",
        "Turns the scheduler handed on because the host held their holder off its CPU",
        None,
    );
    let nf_turn_wait = counter_family(
        &mut reg,
        "nf_turn_wait_seconds",
        "Time from a turn being handed to a process NF until it ran with it, summed over its turns",
        None,
    );
    let nf_out_of_turn = counter_family(
        &mut reg,
        "nf_out_of_turn",
        "Batches an NF that takes turns ran without its core's turn because its receive ring was three quarters full",
        None,
    );
    for nf in &r.nfs {
        let lab = l(&[("nf", &nf.name), ("type", &nf.nf_type)]);
        nf_packets.get_or_create(&lab).inc_by(nf.packets as f64);
        nf_cpu.get_or_create(&lab).inc_by(nf.cpu_ns as f64 / 1e9);
        nf_process_cpu
            .get_or_create(&lab)
            .inc_by(nf.process_cpu_us as f64 / 1e6);
        nf_switches
            .get_or_create(&lab)
            .inc_by(nf.process_switches as f64);
        let by_nf = l(&[("nf", &nf.name)]);
        nf_restarts
            .get_or_create(&by_nf)
            .inc_by(f64::from(nf.restarts));
        if nf.reforks > 0 {
            nf_reforks.get_or_create(&by_nf).inc_by(nf.reforks as f64);
        }
        if nf.isolation == "process" {
            // A standby's start is also a shell start (it came from one).
            let shell = nf.shell_starts.saturating_sub(nf.standby_starts);
            let forks = nf.starts.saturating_sub(nf.shell_starts + nf.spare_starts);
            for (from, n) in [
                ("fork", forks),
                ("shell", shell),
                ("standby", nf.standby_starts),
                ("spare", nf.spare_starts),
            ] {
                nf_starts
                    .get_or_create(&l(&[("nf", &nf.name), ("from", from)]))
                    .inc_by(f64::from(n));
            }
        }
        if nf.sandbox.is_some() {
            for (reason, n) in [
                ("seccomp", nf.sandbox_kills),
                ("memory_limit", nf.oom_kills),
            ] {
                nf_contained
                    .get_or_create(&l(&[("nf", &nf.name), ("reason", reason)]))
                    .inc_by(f64::from(n));
            }
        }
        nf_domain_copies
            .get_or_create(&l(&[("nf", &nf.name), ("domain", &nf.domain)]))
            .inc_by(nf.domain_copies as f64);
        nf_turns.get_or_create(&by_nf).inc_by(nf.turns as f64);
        nf_turns_held_off
            .get_or_create(&by_nf)
            .inc_by(nf.turns_held_off as f64);
        nf_turn_wait
            .get_or_create(&by_nf)
            .inc_by(nf.turn_wait_us as f64 / 1e6);
        nf_out_of_turn
            .get_or_create(&by_nf)
            .inc_by(nf.out_of_turn as f64);
        nf_turns_revoked
            .get_or_create(&by_nf)
            .inc_by(nf.turns_revoked as f64);
        for (reason, &v) in &nf.drops {
            nf_drops
                .get_or_create(&l(&[("nf", &nf.name), ("reason", reason)]))
                .inc_by(v as f64);
        }
    }
    let pool = gauge_family(
        &mut reg,
        "nf_pool_instances",
        "Instances of a per_flow NF's pool, busy (serving a flow) or idle",
    );
    for nf in r.nfs.iter().filter(|n| n.pool_flows.is_some()) {
        let base = sluice_dataplane::naming::instance_of(&nf.name).nf;
        let busy = nf.pool_flows.unwrap_or(0) > 0;
        for (state, on) in [("busy", busy), ("idle", !busy)] {
            pool.get_or_create(&l(&[("nf", base), ("state", state)]))
                .inc_by(i64::from(on));
        }
    }
    let ring = gauge_family(
        &mut reg,
        "nf_ring_occupancy",
        "Entries waiting in an NF instance's receive ring",
    );
    let up = gauge_family(
        &mut reg,
        "nf_instance_up",
        "1 while an NF instance runs, 0 otherwise",
    );
    for i in instances {
        let w = i.worker.to_string();
        let lab = l(&[("nf", &i.nf), ("worker", &w)]);
        ring.get_or_create(&lab).set(i64::from(i.queued));
        up.get_or_create(&lab).set(i64::from(i.state == "running"));
    }
    let drops = counter_family(
        &mut reg,
        "drops",
        "Packets the platform dropped, by reason, malformed:<why> for packets that did not parse (NF-local reasons are in sluice_nf_drops)",
        None,
    );
    for (reason, &v) in &r.drops {
        if platform_reason(reason) {
            drops
                .get_or_create(&l(&[("reason", reason)]))
                .inc_by(v as f64);
        }
    }
    let wasted = counter_family(
        &mut reg,
        "wasted_nf_visits",
        "NF visits spent on packets the platform dropped afterwards (a full ring, an NF down, a bad verdict): wasted work",
        None,
    );
    wasted
        .get_or_create(&Vec::new())
        .inc_by(r.wasted_visits as f64);
    let buffers = gauge_family(
        &mut reg,
        "buffers",
        "Packet buffers by holder: free, platform, nfs",
    );
    for (state, v) in [
        ("free", r.buffers.free),
        ("platform", r.buffers.held_by_platform),
        ("nfs", r.buffers.held_by_nfs),
    ] {
        buffers
            .get_or_create(&l(&[("state", state)]))
            .set(i64::from(v));
    }
    let flows = gauge_family(&mut reg, "flows_live", "Flows in the flow tables");
    flows
        .get_or_create(&Vec::new())
        .set(i64::from(r.flows.live));
    let created = counter_family(&mut reg, "flows_created", "Flows created", None);
    created
        .get_or_create(&Vec::new())
        .inc_by(r.flows.created as f64);
    let restarts = counter_family(
        &mut reg,
        "template_restarts",
        "Times an NF template process died and was started again",
        None,
    );
    restarts
        .get_or_create(&Vec::new())
        .inc_by(f64::from(r.template_restarts));
    let stalls = counter_family(
        &mut reg,
        "worker_stalled",
        "Time workers were held off their CPU for more than 50 µs between two passes",
        Some(Unit::Seconds),
    );
    stalls
        .get_or_create(&Vec::new())
        .inc_by(r.worker_stalled_us as f64 / 1e6);
    let mut text = String::new();
    if encode(&mut text, &reg).is_err() {
        return String::from("# EOF\n");
    }
    // The chains' histograms are written by hand: prometheus-client
    // histograms observe values one by one, ours arrive as buckets.
    let body = text
        .trim_end()
        .strip_suffix("# EOF")
        .unwrap_or(&text)
        .to_string();
    body + &chain_histograms(&r.chains) + "# EOF\n"
}

/// Whether a key of the report's `drops` is the platform's own reason:
/// `NF:reason` keys are NF-local (in `sluice_nf_drops`); packets that did
/// not parse are the platform's, `malformed:<why>`.
fn platform_reason(reason: &str) -> bool {
    !reason.contains(':') || reason.starts_with("malformed:")
}

/// `sluice_chain_latency_seconds`: each chain's time from ingress to
/// egress, cumulative buckets in seconds.
fn chain_histograms(chains: &[sluice_dataplane::report::ChainReport]) -> String {
    let mut s = String::from(
        "# HELP sluice_chain_latency_seconds Time from a packet's arrival to its departure through a port, by chain.\n\
         # TYPE sluice_chain_latency_seconds histogram\n\
         # UNIT sluice_chain_latency_seconds seconds\n",
    );
    for c in chains {
        let name = escape(&c.name);
        let mut cum = 0;
        // The last bucket also holds everything slower than its bound
        // (`Histogram::bucket` saturates): it is only `+Inf`'s.
        let finite = c.histogram.buckets.len().saturating_sub(1);
        for (i, n) in c.histogram.buckets.iter().take(finite).enumerate() {
            cum += n;
            let le = Histogram::upper_ns(i) as f64 / 1e9;
            s += &format!(
                "sluice_chain_latency_seconds_bucket{{chain=\"{name}\",le=\"{le:e}\"}} {cum}\n"
            );
        }
        s += &format!(
            "sluice_chain_latency_seconds_bucket{{chain=\"{name}\",le=\"+Inf\"}} {}\n",
            c.histogram.count
        );
        s += &format!(
            "sluice_chain_latency_seconds_sum{{chain=\"{name}\"}} {:e}\n",
            c.histogram.sum_ns as f64 / 1e9
        );
        s += &format!(
            "sluice_chain_latency_seconds_count{{chain=\"{name}\"}} {}\n",
            c.histogram.count
        );
    }
    s
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_dataplane::latency::Histogram;
    use sluice_dataplane::report::ChainReport;

    #[test]
    fn malformed_packets_are_platform_drops_and_nf_reasons_are_not() {
        assert!(platform_reason("ring_full"));
        assert!(platform_reason("malformed:ipv4_bad_header_length"));
        assert!(!platform_reason("fw:denied"));
    }

    /// A packet slower than the histogram's last bound counts in `+Inf`
    /// only: no finite bucket claims it.
    #[test]
    fn the_overflow_bucket_is_only_inf() {
        let mut h = Histogram::default();
        h.record(1_500); // 1.5 µs: the 2.048 µs bucket
        h.record(60_000_000_000); // a minute
        let text = chain_histograms(&[ChainReport::from_histogram("c".into(), h)]);
        let buckets: Vec<&str> = text.lines().filter(|l| l.contains("_bucket")).collect();
        assert_eq!(buckets.len(), 24, "23 finite and +Inf: {text}");
        assert!(buckets[1].ends_with("le=\"2.048e-6\"} 1"), "{text}");
        assert!(buckets[22].ends_with("le=\"4.294967296e0\"} 1"), "{text}");
        assert!(buckets[23].ends_with("le=\"+Inf\"} 2"), "{text}");
        assert!(!text.contains("8.589934592"), "{text}");
    }

    #[test]
    fn prometheus_text_names_counter_families_like_their_samples() {
        let om = "# HELP a_bytes Bytes.\n# TYPE a_bytes counter\n# UNIT a_bytes bytes\n\
                  a_bytes_total{p=\"x\"} 1.0\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n\
                  # HELP h_seconds H.\n# TYPE h_seconds histogram\n# UNIT h_seconds seconds\n\
                  h_seconds_bucket{le=\"+Inf\"} 1\nh_seconds_count 1\n# EOF\n";
        assert_eq!(
            to_prometheus_text(om),
            "# HELP a_bytes_total Bytes.\n# TYPE a_bytes_total counter\n\
             a_bytes_total{p=\"x\"} 1.0\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n\
             # HELP h_seconds H.\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{le=\"+Inf\"} 1\nh_seconds_count 1\n"
        );
    }
}
