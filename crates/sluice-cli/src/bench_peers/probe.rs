//! What a peer's run is measured with, the same way for every system:
//! packets it transmitted (its own counters) and the CPU time its whole
//! process tree used (`/proc`), read at the start and the end of a window
//! of steady traffic.
//!
//! Cycles per packet are CPU time × the CPU's clock ÷ packets: a system
//! that forwards on one busy-polling core pays the whole core whatever it
//! forwards, and one that needs a second core (sluice's process NFs) pays
//! both. The clock is the nominal one `/proc/cpuinfo` gives (`cpu MHz`);
//! on a VM there is no better one to read.

use std::time::Instant;

/// One reading of a running system.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    pub at: Instant,
    /// Packets transmitted per port (port 0, port 1).
    pub tx: [u64; 2],
    /// CPU time of the system's processes, clock ticks.
    pub ticks: u64,
}

/// What a window between two samples shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    /// Mpps transmitted per port (port 0, port 1).
    pub tx_mpps: [f64; 2],
    /// Cores kept busy on average.
    pub cores: f64,
}

impl Window {
    pub fn between(a: &Sample, b: &Sample, ticks_per_s: f64) -> Window {
        let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
        let mpps = |i: usize| b.tx[i].saturating_sub(a.tx[i]) as f64 / secs / 1e6;
        Window {
            tx_mpps: [mpps(0), mpps(1)],
            cores: b.ticks.saturating_sub(a.ticks) as f64 / ticks_per_s / secs,
        }
    }

    pub fn mpps(&self) -> f64 {
        self.tx_mpps[0] + self.tx_mpps[1]
    }

    /// CPU cycles per forwarded packet at `mhz`.
    pub fn cycles_per_packet(&self, mhz: f64) -> f64 {
        let pps = self.mpps() * 1e6;
        if pps <= 0.0 {
            return 0.0;
        }
        self.cores * mhz * 1e6 / pps
    }
}

/// The nominal clock of the first CPU, MHz.
pub(crate) fn cpu_mhz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("cpu MHz"))
        .and_then(|v| v.trim_start_matches([' ', '\t', ':']).trim().parse().ok())
}

/// Clock ticks per second of `/proc/*/stat`'s times.
pub(crate) fn ticks_per_s() -> f64 {
    sluice_sys::clock_ticks_per_second() as f64
}

/// CPU time (user + system, clock ticks) of `root` and every process
/// below it that is still running.
pub(crate) fn tree_ticks(root: u32) -> u64 {
    let mut stats = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name();
            let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                if let Some(s) = parse_stat(&text) {
                    stats.push((pid, s));
                }
            }
        }
    }
    sum_tree(root, &stats)
}

/// A process's parent and CPU ticks, from its `/proc/PID/stat` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub ppid: u32,
    pub ticks: u64,
}

/// Parses a `/proc/PID/stat` line. The command name (field 2) is in
/// parentheses and may hold spaces and parentheses itself: fields are
/// counted from the last `)`.
pub(crate) fn parse_stat(line: &str) -> Option<Stat> {
    let rest = &line[line.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) ... utime(14) stime(15).
    let field = |n: usize| f.get(n - 3)?.parse::<u64>().ok();
    Some(Stat {
        ppid: u32::try_from(field(4)?).ok()?,
        ticks: field(14)? + field(15)?,
    })
}

/// Ticks of `root` and its descendants among `stats`.
pub(crate) fn sum_tree(root: u32, stats: &[(u32, Stat)]) -> u64 {
    let mut total = 0;
    let mut frontier = vec![root];
    let mut seen = std::collections::HashSet::new();
    while let Some(pid) = frontier.pop() {
        if !seen.insert(pid) {
            continue;
        }
        for (p, s) in stats {
            if *p == pid {
                total += s.ticks;
            }
            if s.ppid == pid {
                frontier.push(*p);
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_a_hostile_name_parses() {
        // A name with spaces and a `)` inside, as a process may call itself.
        let line = "4242 (nf:a) b (c) S 17 4242 17 0 -1 4194624 120 0 0 0 250 31 0 0 20 0 3 0 1000 1000 10 18446744073709551615";
        assert_eq!(
            parse_stat(line),
            Some(Stat {
                ppid: 17,
                ticks: 281
            })
        );
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S notanumber"), None);
    }

    #[test]
    fn a_tree_sums_its_descendants_only() {
        let s = |ppid, ticks| Stat { ppid, ticks };
        let stats = [
            (1, s(0, 1000)),
            (10, s(1, 5)),
            (11, s(10, 7)),
            (12, s(11, 11)),
            (20, s(1, 100)),
        ];
        assert_eq!(sum_tree(10, &stats), 23);
        assert_eq!(sum_tree(20, &stats), 100);
        assert_eq!(sum_tree(99, &stats), 0);
    }

    #[test]
    fn a_window_gives_rates_and_cycles() {
        let t0 = Instant::now();
        let a = Sample {
            at: t0,
            tx: [0, 1_000],
            ticks: 50,
        };
        let b = Sample {
            at: t0 + std::time::Duration::from_secs(2),
            tx: [4_000_000, 20_001_000],
            ticks: 250,
        };
        let w = Window::between(&a, &b, 100.0);
        assert_eq!(w.tx_mpps, [2.0, 10.0]);
        assert_eq!(w.mpps(), 12.0);
        assert_eq!(w.cores, 1.0);
        // One core at 2,400 MHz for 12 Mpps: 200 cycles a packet.
        assert_eq!(w.cycles_per_packet(2400.0), 200.0);
        let idle = Window::between(&a, &a, 100.0);
        assert_eq!(idle.cycles_per_packet(2400.0), 0.0);
    }
}
