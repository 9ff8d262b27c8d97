//! What `sluice bench peers` reports: a row per system and work, the
//! ratios the goals are stated in, and the table printed without
//! `--json`.

use serde::Serialize;

use super::work::Work;

#[derive(Debug, Serialize)]
pub(super) struct Row {
    pub system: &'static str,
    pub work: Work,
    /// Packets transmitted by both ports, median round.
    pub mpps: f64,
    /// Per direction (port 1's transmit is port 0 → 1), median round.
    pub mpps_0_to_1: f64,
    pub mpps_1_to_0: f64,
    /// CPU cycles per packet at the nominal clock, median round.
    pub cycles_per_packet: f64,
    /// Cores its processes kept busy, median round.
    pub cores: f64,
    pub rounds_mpps: Vec<f64>,
}

#[derive(Debug, Serialize)]
pub(super) struct Skipped {
    pub system: &'static str,
    pub reason: String,
}

/// sluice over its peers, the smallest over the works both ran.
#[derive(Debug, Default, Serialize)]
pub(super) struct Ratios {
    pub sluice_inline_vs_ovs: Option<f64>,
    pub sluice_process_vs_ovs: Option<f64>,
    pub sluice_inline_vs_testpmd: Option<f64>,
    pub sluice_process_vs_testpmd: Option<f64>,
}

#[derive(Debug, Serialize)]
pub(super) struct Report {
    pub cpu: String,
    pub cpu_mhz: f64,
    pub rounds: u32,
    pub duration_s: f64,
    pub setup: &'static str,
    pub rows: Vec<Row>,
    pub skipped: Vec<Skipped>,
    pub ratios: Ratios,
}

/// The smallest ratio of a sluice row to a peer's over the works both ran.
pub(super) fn ratios(rows: &[Row]) -> Ratios {
    let min_ratio = |ours: &str, theirs: &str| {
        rows.iter()
            .filter(|r| r.system == ours)
            .filter_map(|o| {
                let t = rows
                    .iter()
                    .find(|t| t.system == theirs && t.work == o.work)?;
                (t.mpps > 0.0).then(|| o.mpps / t.mpps)
            })
            .min_by(f64::total_cmp)
    };
    Ratios {
        sluice_inline_vs_ovs: min_ratio("sluice_inline", "ovs_dpdk"),
        sluice_process_vs_ovs: min_ratio("sluice_process", "ovs_dpdk"),
        sluice_inline_vs_testpmd: min_ratio("sluice_inline", "testpmd"),
        sluice_process_vs_testpmd: min_ratio("sluice_process", "testpmd"),
    }
}

pub(super) fn table(r: &Report) -> String {
    let mut s = format!(
        "{} ({:.0} MHz), {} round(s) of {} s, median round\n{:<16} {:<8} {:>8} {:>9} {:>9} {:>7} {:>6}\n",
        r.cpu, r.cpu_mhz, r.rounds, r.duration_s, "system", "work", "Mpps", "0→1", "1→0", "cyc/pkt", "cores"
    );
    for w in &r.rows {
        s.push_str(&format!(
            "{:<16} {:<8} {:>8.2} {:>9.2} {:>9.2} {:>7.0} {:>6.2}\n",
            w.system,
            w.work.name(),
            w.mpps,
            w.mpps_0_to_1,
            w.mpps_1_to_0,
            w.cycles_per_packet,
            w.cores
        ));
    }
    for k in &r.skipped {
        s.push_str(&format!("skipped {}: {}\n", k.system, k.reason));
    }
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}×"));
    s.push_str(&format!(
        "lowest over the works: inline/OVS {}  process/OVS {}  inline/testpmd {}  process/testpmd {}\n",
        f(r.ratios.sluice_inline_vs_ovs),
        f(r.ratios.sluice_process_vs_ovs),
        f(r.ratios.sluice_inline_vs_testpmd),
        f(r.ratios.sluice_process_vs_testpmd)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(system: &'static str, work: Work, mpps: f64) -> Row {
        Row {
            system,
            work,
            mpps,
            mpps_0_to_1: mpps,
            mpps_1_to_0: 0.0,
            cycles_per_packet: 0.0,
            cores: 1.0,
            rounds_mpps: vec![mpps],
        }
    }

    #[test]
    fn ratios_take_the_worst_work_both_ran() {
        let rows = [
            row("ovs_dpdk", Work::Io, 30.0),
            row("ovs_dpdk", Work::Bidir, 20.0),
            row("sluice_inline", Work::Io, 45.0),
            row("sluice_inline", Work::Bidir, 20.0),
            // A work the peer did not run does not count.
            row("sluice_inline", Work::Pcap, 1.0),
            row("testpmd", Work::Io, 0.0),
        ];
        let r = ratios(&rows);
        assert_eq!(r.sluice_inline_vs_ovs, Some(1.0));
        assert_eq!(r.sluice_process_vs_ovs, None);
        // A peer row at 0 Mpps gives no ratio rather than infinity.
        assert_eq!(r.sluice_inline_vs_testpmd, None);
    }
}
