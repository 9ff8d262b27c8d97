//! `sluice bench peers`: sluice against the systems a user would pick
//! instead, on the same DPDK virtual devices, the same CPUs and the same
//! frames, in alternating rounds: DPDK's testpmd (the floor: a loop that
//! moves bursts between ports), Open vSwitch with its DPDK datapath (a
//! switch that parses every frame and looks it up), and sluice with its
//! forwarder inline in the worker and in its own process.
//!
//! Every system is started for one run, given a second of traffic to
//! settle, then sampled twice `--duration` apart ([`probe`]): packets its
//! ports transmitted (its own counters) and the CPU time of its processes.
//! A row's figures are those of its median round. Not part of CI (it needs
//! root, huge pages and the peers installed); its figures go into
//! `docs/benchmarks.md` with the CPU that gave them.

mod huge;
mod ovs;
mod probe;
mod report;
mod sluice;
mod testpmd;
mod work;

use std::path::PathBuf;
use std::process::{Child, ExitCode};
use std::time::{Duration, Instant};

use crate::cli::PeersArgs;
use probe::{Sample, Window};
use report::{ratios, table, Report, Row, Skipped};
use work::Work;

/// A system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum System {
    Testpmd,
    OvsDpdk,
    SluiceInline,
    SluiceProcess,
}

impl System {
    const ALL: [System; 4] = [
        System::Testpmd,
        System::OvsDpdk,
        System::SluiceInline,
        System::SluiceProcess,
    ];
    const NAMES: [&'static str; 4] = ["testpmd", "ovs_dpdk", "sluice_inline", "sluice_process"];

    fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Why it cannot run here (not installed, not built in), if it cannot:
    /// its rows are left out, with the reason.
    fn missing(self) -> Option<String> {
        match self {
            System::Testpmd => testpmd::Testpmd::missing(),
            System::OvsDpdk => ovs::Ovs::missing(),
            System::SluiceInline | System::SluiceProcess => sluice::Sluice::missing(),
        }
    }

    fn start(self, work: Work, env: &Env) -> Result<Box<dyn Running>, String> {
        Ok(match self {
            System::Testpmd => Box::new(testpmd::Testpmd::start(work, env)?),
            System::OvsDpdk => Box::new(ovs::Ovs::start(work, env)?),
            System::SluiceInline => Box::new(sluice::Sluice::start(work, "inline", env)?),
            System::SluiceProcess => Box::new(sluice::Sluice::start(work, "process", env)?),
        })
    }
}

/// A system running one work; stopped when dropped.
pub(crate) trait Running {
    /// The process whose tree does the work.
    fn pid(&self) -> u32;
    /// Packets each port has transmitted so far (port 0, port 1).
    fn tx(&mut self) -> Result<[u64; 2], String>;
}

/// What every system's run shares.
pub(crate) struct Env {
    /// The real-frame work's capture.
    pub pcap: PathBuf,
}

impl Env {
    #[cfg(test)]
    pub fn for_tests() -> Env {
        Env {
            pcap: PathBuf::from("/tmp/sluice-peers.pcap"),
        }
    }
}

const SETUP: &str = "64 B frames; DPDK 22.11 virtual devices: net_null0 (size=64) in, \
net_null1 (no-rx=1) out, both receiving for bidir, net_pcap0 replaying 64 IPv4/UDP flows \
for pcap; 2 MiB huge pages; testpmd and OVS forward on CPU 1 with their main thread on \
CPU 0; sluice: one worker, its forwarder inline or in a process on the other CPU";

pub fn run(a: PeersArgs) -> ExitCode {
    match bench(&a) {
        Ok(report) => {
            if a.json {
                crate::print_stdout(
                    &(serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"),
                );
            } else {
                crate::print_stdout(&table(&report));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice: bench peers: {e}");
            ExitCode::from(1)
        }
    }
}

fn bench(a: &PeersArgs) -> Result<Report, String> {
    let (rounds, secs) = if a.quick { (1, 1.0) } else { (3, 3.0) };
    let mut skipped: Vec<Skipped> = Vec::new();
    let systems: Vec<System> = System::ALL
        .into_iter()
        .filter(|s| a.system.is_empty() || a.system.iter().any(|n| n == s.name()))
        .filter(|s| match s.missing() {
            None => true,
            Some(reason) => {
                eprintln!("sluice: bench peers: skipping {}: {reason}", s.name());
                skipped.push(Skipped {
                    system: s.name(),
                    reason,
                });
                false
            }
        })
        .collect();
    let works: Vec<Work> = Work::ALL
        .into_iter()
        .filter(|w| a.work.is_empty() || a.work.iter().any(|n| n == w.name()))
        .collect();
    let mhz = probe::cpu_mhz().ok_or("/proc/cpuinfo gives no `cpu MHz`")?;
    // Only when something runs: a bench that skips everything needs none.
    let _pages = if systems.is_empty() {
        None
    } else {
        Some(huge::Reserve::at_least(1280)?)
    };
    let dir = std::env::temp_dir().join(format!("sluice-bench-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let env = Env {
        pcap: dir.join("flows.pcap"),
    };
    let result = (|| {
        work::write_pcap(&env.pcap)?;
        let mut windows: Vec<Vec<Window>> = vec![Vec::new(); systems.len() * works.len()];
        for round in 0..rounds {
            for (wi, &work) in works.iter().enumerate() {
                // Alternate which system goes first, so drift in the host
                // does not always favour the same one.
                for k in 0..systems.len() {
                    let si = (k + round as usize + wi) % systems.len();
                    let system = systems[si];
                    let at = |e: String| format!("{} {}: {e}", system.name(), work.name());
                    let mut r = system.start(work, &env).map_err(at)?;
                    let w = measure(r.as_mut(), Duration::from_secs_f64(secs)).map_err(at)?;
                    windows[si * works.len() + wi].push(w);
                }
            }
        }
        let mut rows = Vec::new();
        for (si, system) in systems.iter().enumerate() {
            for (wi, work) in works.iter().enumerate() {
                let ws = &windows[si * works.len() + wi];
                if ws.is_empty() {
                    continue;
                }
                let m = crate::bench::median_round(ws.clone(), Window::mpps);
                rows.push(Row {
                    system: system.name(),
                    work: *work,
                    mpps: m.mpps(),
                    mpps_0_to_1: m.tx_mpps[1],
                    mpps_1_to_0: m.tx_mpps[0],
                    cycles_per_packet: m.cycles_per_packet(mhz),
                    cores: m.cores,
                    rounds_mpps: ws.iter().map(Window::mpps).collect(),
                });
            }
        }
        let ratios = ratios(&rows);
        Ok(Report {
            cpu: crate::bench::cpu_model(),
            cpu_mhz: mhz,
            rounds,
            duration_s: secs,
            setup: SETUP,
            rows,
            skipped,
            ratios,
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Waits for traffic, lets it settle for a second, then samples the
/// system `span` apart.
fn measure(r: &mut dyn Running, span: Duration) -> Result<Window, String> {
    let t0 = Instant::now();
    let first = r.tx()?;
    loop {
        let now = r.tx()?;
        if now[0] + now[1] > first[0] + first[1] {
            break;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err("no packet came out within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let tps = probe::ticks_per_s();
    let sample = |r: &mut dyn Running| -> Result<Sample, String> {
        let tx = r.tx()?;
        Ok(Sample {
            at: Instant::now(),
            tx,
            ticks: probe::tree_ticks(r.pid()),
        })
    };
    let a = sample(r)?;
    std::thread::sleep(span);
    let b = sample(r)?;
    Ok(Window::between(&a, &b, tps))
}

/// Whether `program` is an executable on `PATH`.
pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Waits up to `timeout` for a child to exit, then kills it.
pub(crate) fn reap(child: &mut Child, timeout: Duration) {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line's lists (in `cli.rs`) name exactly these.
    #[test]
    fn every_system_and_work_is_accepted_on_the_command_line() {
        use clap::Parser;
        let parse = |flag: &str, v: &str| {
            crate::cli::Cli::try_parse_from(["sluice", "bench", "peers", flag, v]).is_ok()
        };
        for s in System::NAMES {
            assert!(parse("--system", s), "{s}");
        }
        for w in Work::ALL {
            assert!(parse("--work", w.name()), "{w:?}");
        }
        assert!(!parse("--system", "vpp"));
    }

    #[test]
    fn system_names_match_their_order() {
        for s in System::ALL {
            assert_eq!(System::NAMES[s as usize], s.name());
        }
    }
}
