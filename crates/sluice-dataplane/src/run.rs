//! `sluice run SPEC`: a platform sized for one spec, that spec applied,
//! and the platform stopped when the duration ends, the inputs are
//! exhausted or `stop` is set. A thin foreground use of [`Runtime`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_nf::NfType;
use sluice_spec::Spec;

use crate::report::RunReport;
use crate::runtime::{PlatformSettings, RunError, Runtime};

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Stop after this long (also bounds generators).
    pub duration: Option<Duration>,
    /// Report live rates every second (through `tracing`, target
    /// `sluice::live`).
    pub live: bool,
    /// Set to stop the run (SIGINT/SIGTERM handlers set it).
    pub stop: Arc<AtomicBool>,
    /// How long NF processes may take to start.
    pub start_timeout: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            duration: None,
            live: false,
            stop: Arc::new(AtomicBool::new(false)),
            start_timeout: Duration::from_secs(10),
        }
    }
}

/// Runs `spec` to completion on a platform of its own.
pub fn run(
    spec: &Spec,
    registry: &'static [NfType],
    opts: RunOptions,
) -> Result<RunReport, RunError> {
    // Compile first, so a bad spec is reported before anything starts.
    crate::compile::compile(spec, registry, &crate::compile::Target::of_spec(spec), None)?;
    let mut settings = PlatformSettings::for_spec(spec);
    // Many process NFs start one fork after another: give each its time.
    let process = spec
        .nfs
        .iter()
        .filter(|n| n.isolation == sluice_spec::Isolation::Process)
        .count() as u32;
    settings.start_timeout = opts.start_timeout.max(Duration::from_millis(20) * process);
    settings.generator_duration_ns = opts.duration.map(|d| d.as_nanos() as u64);
    let mut rt = Runtime::start(settings, registry)?;
    if let Err(e) = rt.apply(spec) {
        let _ = rt.stop();
        return Err(e);
    }
    let started = std::time::Instant::now();
    let mut next_live = Duration::from_secs(1);
    let mut last = (0u64, 0u64, Duration::ZERO);
    loop {
        if opts.stop.load(Ordering::Relaxed)
            || opts.duration.is_some_and(|d| started.elapsed() >= d)
            || rt.inputs_done()
            || rt.failure().is_some()
        {
            break;
        }
        if opts.live && started.elapsed() >= next_live {
            last = live_line(&rt, last, started.elapsed());
            next_live += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // A worker that failed stops the run: its part of the figures is
    // gone, so the error is the result (with the panic's message).
    let failure = rt.failure();
    let report = rt.stop();
    match failure {
        Some(why) => Err(RunError::Failed(why)),
        None => Ok(report),
    }
}

/// Logs one line of live rates; returns the totals it was computed from.
fn live_line(rt: &Runtime, last: (u64, u64, Duration), now: Duration) -> (u64, u64, Duration) {
    let r = rt.report();
    let (rx0, tx0, t0) = last;
    let dt = (now - t0).as_secs_f64().max(1e-9);
    let mut line = format!(
        "[{:>5.1}s] in {:>7.3} Mpps  out {:>7.3} Mpps  drops {:>9}  flows {:>7} |",
        now.as_secs_f64(),
        (r.packets_in - rx0.min(r.packets_in)) as f64 / dt / 1e6,
        (r.packets_out - tx0.min(r.packets_out)) as f64 / dt / 1e6,
        r.drops_total,
        r.flows.live,
    );
    for nf in &r.nfs {
        line.push_str(&format!(" {} {}", nf.name, nf.packets));
    }
    tracing::info!(target: "sluice::live", "{line}");
    (r.packets_in, r.packets_out, now)
}
