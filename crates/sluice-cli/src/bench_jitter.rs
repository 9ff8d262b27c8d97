//! `sluice bench jitter`: how much of each CPU the host takes away.
//!
//! One thread per allowed CPU, pinned, reads the clock in a tight loop
//! for the duration and sorts every gap between two reads by length (the
//! method of `hwlatdetect` and `sysjitter`). A read normally follows the
//! previous one within ~50 ns; a longer gap is time the thread was held
//! off its CPU by interrupts, kernel threads, other tasks or the
//! hypervisor. Packets queue behind such gaps on an NF's core, so this is
//! the floor under a data plane's tail latency on that machine: run it
//! next to `sluice bench chain` to tell a slow platform from a noisy host.

use std::process::ExitCode;
use std::time::Duration;

use serde::Serialize;

use crate::cli::JitterArgs;

/// Lower bounds of the gap classes, ns (the last class is open).
const CLASSES_NS: [u64; 6] = [10_000, 50_000, 200_000, 1_000_000, 5_000_000, u64::MAX];

/// One CPU's census.
#[derive(Debug, Default, Serialize)]
struct CpuJitter {
    cpu: usize,
    /// Gaps of 10–50 µs, 50–200 µs, 0.2–1 ms, 1–5 ms and ≥ 5 ms.
    gaps: [u64; 5],
    /// Total time of each class, µs.
    gap_us: [u64; 5],
    /// Longest gap, µs.
    max_gap_us: u64,
    /// Time lost in gaps of 50 µs or more, as a share of the run (%).
    lost_over_50us_pct: f64,
}

#[derive(Debug, Serialize)]
struct JitterResult {
    duration_s: f64,
    cpus: Vec<CpuJitter>,
}

/// Spins on `cpu` for `duration` and sorts the gaps between clock reads.
fn census(cpu: usize, duration: Duration) -> CpuJitter {
    if let Err(e) = sluice_sys::pin_to_cpu(cpu) {
        eprintln!("sluice: cannot pin to CPU {cpu}: {e}");
    }
    let mut j = CpuJitter {
        cpu,
        ..CpuJitter::default()
    };
    let start = sluice_sys::monotonic_ns();
    let end = start + duration.as_nanos() as u64;
    let mut last = start;
    loop {
        let now = sluice_sys::monotonic_ns();
        let gap = now.saturating_sub(last);
        last = now;
        if gap >= CLASSES_NS[0] {
            let class = CLASSES_NS[1..].iter().position(|&b| gap < b).unwrap_or(4);
            j.gaps[class] += 1;
            j.gap_us[class] += gap / 1000;
            j.max_gap_us = j.max_gap_us.max(gap / 1000);
        }
        if now >= end {
            break;
        }
    }
    let lost: u64 = j.gap_us[1..].iter().sum();
    j.lost_over_50us_pct = lost as f64 / (duration.as_secs_f64() * 1e6) * 100.0;
    j
}

/// Runs the census on every allowed CPU at once.
pub fn run(a: JitterArgs) -> ExitCode {
    let duration = a.duration.duration();
    let cpus = sluice_sys::allowed_cpus();
    let threads: Vec<_> = cpus
        .iter()
        .map(|&cpu| std::thread::spawn(move || census(cpu, duration)))
        .collect();
    let result = JitterResult {
        duration_s: a.duration.as_secs_f64(),
        cpus: threads.into_iter().filter_map(|t| t.join().ok()).collect(),
    };
    if a.json {
        crate::print_stdout(&(serde_json::to_string_pretty(&result).unwrap_or_default() + "\n"));
    } else {
        let mut text = format!(
            "Gaps in a pinned busy loop, {:.0} s per CPU: count (ms lost)\n{:>4}",
            a.duration.as_secs_f64(),
            "cpu"
        );
        for label in ["10-50 µs", "50-200 µs", "0.2-1 ms", "1-5 ms", "≥ 5 ms"] {
            text.push_str(&format!("{label:>16}"));
        }
        text.push_str(&format!("{:>12}{:>12}\n", "longest", "lost≥50µs"));
        for c in &result.cpus {
            text.push_str(&format!("{:>4}", c.cpu));
            for k in 0..5 {
                let cell = format!("{} ({:.1})", c.gaps[k], c.gap_us[k] as f64 / 1e3);
                text.push_str(&format!("{cell:>16}"));
            }
            text.push_str(&format!(
                "{:>9.2} ms{:>10.2} %\n",
                c.max_gap_us as f64 / 1e3,
                c.lost_over_50us_pct
            ));
        }
        crate::print_stdout(&text);
    }
    ExitCode::SUCCESS
}
