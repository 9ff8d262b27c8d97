//! `sluice top`: a live terminal view of a running daemon, refreshed each
//! second: ports (rates and losses), chains (latency), NFs (rate, cost per
//! packet, CPU share, ring occupancy, drops by reason). `q` quits.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;
use serde_json::Value;

use crate::ctl::client;
use crate::ctl_args::ConnArgs;

/// One refresh's worth of what is shown.
#[derive(Debug, Default, Clone)]
pub struct Model {
    /// The header line.
    pub summary: String,
    /// Port rows.
    pub ports: Vec<[String; 5]>,
    /// Chain rows.
    pub chains: Vec<[String; 4]>,
    /// NF rows.
    pub nfs: Vec<[String; 7]>,
}

#[derive(Default)]
struct Sample {
    at: Option<Instant>,
    /// Packets, handler ns and process CPU µs of each NF.
    nf: HashMap<String, (u64, u64, u64)>,
    port: HashMap<String, (u64, u64)>,
    chain: HashMap<String, u64>,
}

fn mpps(now: u64, before: u64, dt: f64) -> String {
    format!("{:.3}", now.saturating_sub(before) as f64 / dt / 1e6)
}

/// Builds the model from a stats report and the instance list, given the
/// previous sample (rates are differences over the time between them).
fn model(stats: &Value, instances: &[Value], prev: &mut Sample) -> Model {
    let now = Instant::now();
    let dt = prev
        .at
        .map_or(1.0, |t| now.duration_since(t).as_secs_f64().max(1e-3));
    let first = prev.at.is_none();
    let mut m = Model {
        summary: format!(
            "in {}  out {}  drops {}  flows {}  buffers free {}/{}  template restarts {}",
            stats["packets_in"],
            stats["packets_out"],
            stats["drops_total"],
            stats["flows"]["live"],
            stats["buffers"]["free"],
            stats["buffers"]["capacity"],
            stats["template_restarts"]
        ),
        ..Model::default()
    };
    let mut next = Sample {
        at: Some(now),
        ..Sample::default()
    };
    for p in stats["ports"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or("?").to_string();
        let (rx, tx) = (
            p["rx_packets"].as_u64().unwrap_or(0),
            p["tx_packets"].as_u64().unwrap_or(0),
        );
        let (rx0, tx0) = if first {
            (rx, tx)
        } else {
            prev.port.get(&name).copied().unwrap_or((0, 0))
        };
        let lost: u64 = ["rx_no_buffer", "rx_oversize", "rx_dropped", "tx_errors"]
            .iter()
            .filter_map(|k| p[*k].as_u64())
            .sum();
        m.ports.push([
            name.clone(),
            p["kind"].as_str().unwrap_or("?").to_string(),
            mpps(rx, rx0, dt),
            mpps(tx, tx0, dt),
            lost.to_string(),
        ]);
        next.port.insert(name, (rx, tx));
    }
    for c in stats["chains"].as_array().into_iter().flatten() {
        let name = c["name"].as_str().unwrap_or("?").to_string();
        let n = c["packets"].as_u64().unwrap_or(0);
        let n0 = if first {
            n
        } else {
            prev.chain.get(&name).copied().unwrap_or(0)
        };
        m.chains.push([
            name.clone(),
            mpps(n, n0, dt),
            format!("{:.1}", c["p50_ns"].as_f64().unwrap_or(0.0) / 1e3),
            format!("{:.1}", c["p99_ns"].as_f64().unwrap_or(0.0) / 1e3),
        ]);
        next.chain.insert(name, n);
    }
    for n in stats["nfs"].as_array().into_iter().flatten() {
        let name = n["name"].as_str().unwrap_or("?").to_string();
        let (pk, ns, us) = (
            n["packets"].as_u64().unwrap_or(0),
            n["cpu_ns"].as_u64().unwrap_or(0),
            n["process_cpu_us"].as_u64().unwrap_or(0),
        );
        let (pk0, ns0, us0) = if first {
            (pk, ns, us)
        } else {
            prev.nf.get(&name).copied().unwrap_or((0, 0, 0))
        };
        let dp = pk.saturating_sub(pk0);
        let dns = ns.saturating_sub(ns0);
        // CPU %: a process NF's whole process as the kernel counts it
        // (ring I/O and polling included); an inline NF's handler time.
        let cpu_s = if us > 0 {
            us.saturating_sub(us0) as f64 / 1e6
        } else {
            dns as f64 / 1e9
        };
        let queued: u64 = instances
            .iter()
            .filter(|i| i["nf"] == n["name"])
            .filter_map(|i| i["queued"].as_u64())
            .sum();
        let drops: Vec<String> = n["drops"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        m.nfs.push([
            name.clone(),
            mpps(pk, pk0, dt),
            if dp > 0 {
                format!("{:.1}", dns as f64 / dp as f64)
            } else {
                "-".into()
            },
            format!("{:.1}", cpu_s / dt * 100.0),
            queued.to_string(),
            n["restarts"].to_string(),
            if drops.is_empty() {
                "-".into()
            } else {
                drops.join(" ")
            },
        ]);
        next.nf.insert(name, (pk, ns, us));
    }
    *prev = next;
    m
}

fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// Draws the model.
pub fn render(f: &mut Frame<'_>, m: &Model) {
    let parts = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(m.ports.len() as u16 + 3),
        Constraint::Length(m.chains.len() as u16 + 3),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .split(f.area());
    f.render_widget(Paragraph::new(m.summary.clone()), parts[0]);
    let ports = Table::new(
        m.ports.iter().map(|r| Row::new(r.clone())),
        [12, 10, 10, 10, 10].map(Constraint::Length),
    )
    .header(Row::new(["PORT", "KIND", "RX MPPS", "TX MPPS", "LOST"]).style(bold()))
    .block(Block::default().borders(Borders::ALL).title("ports"));
    f.render_widget(ports, parts[1]);
    let chains = Table::new(
        m.chains.iter().map(|r| Row::new(r.clone())),
        [16, 10, 10, 10].map(Constraint::Length),
    )
    .header(Row::new(["CHAIN", "MPPS", "P50 µs", "P99 µs"]).style(bold()))
    .block(Block::default().borders(Borders::ALL).title("chains"));
    f.render_widget(chains, parts[2]);
    let nfs = Table::new(
        m.nfs.iter().map(|r| Row::new(r.clone())),
        [
            Constraint::Length(14),
            Constraint::Length(9),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(["NF", "MPPS", "NS/PKT", "CPU %", "RING", "RESTARTS", "DROPS"]).style(bold()))
    .block(Block::default().borders(Borders::ALL).title("NFs"));
    f.render_widget(nfs, parts[3]);
    f.render_widget(Paragraph::new(Line::from("q: quit")), parts[4]);
}

/// Runs the live view until `q`.
pub fn run(conn: &ConnArgs) -> ExitCode {
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sluice: {e}");
            return ExitCode::from(1);
        }
    };
    // Check the daemon answers before taking over the terminal.
    if let Err(e) = c.get::<Value>("/v1/stats") {
        eprintln!("sluice: {e}");
        return ExitCode::from(1);
    }
    let mut terminal = ratatui::init();
    let mut prev = Sample::default();
    let mut m = Model::default();
    let mut next = Instant::now();
    let result = loop {
        if Instant::now() >= next {
            match (
                c.get::<Value>("/v1/stats"),
                c.get::<Vec<Value>>("/v1/instances"),
            ) {
                (Ok(s), Ok(i)) => m = model(&s, &i, &mut prev),
                (Err(e), _) | (_, Err(e)) => m.summary = format!("daemon: {e}"),
            }
            next += Duration::from_secs(1);
        }
        if let Err(e) = terminal.draw(|f| render(f, &m)) {
            break Err(e.to_string());
        }
        let wait = next.saturating_duration_since(Instant::now());
        match event::poll(wait) {
            Ok(true) => {
                if let Ok(Event::Key(k)) = event::read() {
                    // Raw mode turns Ctrl-C into a key, not a signal.
                    let ctrl_c =
                        k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    if k.kind == KeyEventKind::Press
                        && (ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc))
                    {
                        break Ok(());
                    }
                }
            }
            Ok(false) => {}
            Err(e) => break Err(e.to_string()),
        }
    };
    ratatui::restore();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use serde_json::json;

    #[test]
    fn the_view_shows_rates_from_two_samples_and_drops_by_reason() {
        let stats = |pk: u64| {
            json!({
                "packets_in": pk, "packets_out": pk, "drops_total": 3,
                "flows": {"live": 7}, "buffers": {"free": 10, "capacity": 16}, "template_restarts": 0,
                "ports": [{"name": "gen", "kind": "generator", "rx_packets": pk, "tx_packets": 0,
                           "rx_no_buffer": 0, "rx_oversize": 0, "rx_dropped": 0, "tx_errors": 0}],
                "chains": [{"name": "main", "packets": pk, "p50_ns": 8192, "p99_ns": 65536}],
                "nfs": [{"name": "acl", "packets": pk, "cpu_ns": pk * 50, "restarts": 1,
                         "drops": {"denied": 3}},
                        {"name": "fw", "packets": pk, "cpu_ns": pk * 10, "restarts": 0,
                         "process_cpu_us": pk / 4, "drops": {}}]
            })
        };
        let inst = [json!({"nf": "acl", "queued": 12})];
        let mut prev = Sample::default();
        let _ = model(&stats(1_000_000), &inst, &mut prev);
        prev.at = Some(Instant::now() - Duration::from_secs(1));
        let m = model(&stats(3_000_000), &inst, &mut prev);
        // About 2 Mpps over the (simulated) second.
        let rate: f64 = m.nfs[0][1].parse().unwrap();
        assert!((1.9..=2.1).contains(&rate), "{m:?}");
        assert_eq!(m.nfs[0][2], "50.0");
        // CPU %: the inline NF's handler time (0.1 s of the second); the
        // process NF's process time (0.5 s), not its handler's.
        let cpu = |k: usize| m.nfs[k][3].parse::<f64>().unwrap();
        assert!((9.0..=11.0).contains(&cpu(0)), "{m:?}");
        assert!((45.0..=55.0).contains(&cpu(1)), "{m:?}");
        let mut t = Terminal::new(TestBackend::new(100, 24)).unwrap();
        t.draw(|f| render(f, &m)).unwrap();
        let screen: String = t
            .backend()
            .buffer()
            .content()
            .iter()
            .map(|c| c.symbol())
            .collect();
        for want in ["acl", "denied=3", "main", "gen", "q: quit", "RING", "12"] {
            assert!(screen.contains(want), "{want} missing from the screen");
        }
    }
}
