//! `sluice`: run NFV specs and benchmark chains.

mod args;
mod bench;
mod bench_baselines;
mod bench_daemon;
mod bench_deploy;
mod bench_instantiate;
mod bench_jitter;
mod bench_migrate;
mod bench_nfs;
mod bench_peers;
mod bench_perflow;
mod bench_replicas;
mod bench_sched;
mod bench_setups;
mod bench_share;
mod bench_steady;
mod bench_wakeup;
mod bench_wire;
mod cli;
mod client;
mod ctl;
mod ctl_args;
mod daemon_cmd;
mod logfmt;
mod migrate_cmd;
mod migrate_env;
mod rollout_cmd;
mod soak;
mod state_cmd;
mod tcpdump;
mod top;
mod wire_env;
mod yaml_out;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches};
use sluice_dataplane::compile::{compile, Target};
use sluice_dataplane::{run, RunError, RunOptions, RunReport};
use sluice_nfs::REGISTRY;

use args::Seconds;
use cli::{BenchKind, Cli, Command};

/// Exit code for an invalid spec or bad arguments.
const EXIT_SPEC: u8 = 2;
/// Exit code for a setup failure (memory, ports, NF start).
pub(crate) const EXIT_SETUP: u8 = 1;
/// Exit code when the run ended with leaked buffers or unaccounted packets.
const EXIT_ACCOUNTING: u8 = 3;
/// Exit code when the data plane failed while it ran (a worker's code
/// panicked; `RunError::Failed`, `DaemonError::DataPlaneFailed`).
pub(crate) const EXIT_FAILED: u8 = 4;

fn main() -> ExitCode {
    // A process started as an NF template runs that and nothing else.
    if let Some(code) = sluice_dataplane::host::template_main_if_invoked(REGISTRY) {
        return code;
    }
    init_logging();
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if let Some(code) = cli::refuse_daemon_flags(&matches, &cli.command) {
        return code;
    }
    match cli.command {
        Command::Run(args) => {
            let spec = match sluice_spec::load(&args.spec, &type_names()) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("sluice: {e}");
                    return ExitCode::from(EXIT_SPEC);
                }
            };
            finish(
                execute(&spec, args.duration.map(Seconds::duration)),
                args.json,
            )
        }
        // Each bench is its own module; `bench` holds what they share.
        Command::Bench(b) => match b.which {
            BenchKind::Chain(a) => bench::chain(a),
            BenchKind::Nfs(a) => bench_nfs::run(a),
            BenchKind::Replicas(a) => bench_replicas::run(a),
            BenchKind::Perflow(a) => bench_perflow::run(a),
            BenchKind::Wire(a) => bench_wire::run(a),
            BenchKind::Jitter(a) => bench_jitter::run(a),
            BenchKind::Deploy(a) => bench_deploy::run(a),
            BenchKind::Instantiate(a) => bench_instantiate::run(a),
            BenchKind::Sched(a) => bench_sched::run_bench(a),
            BenchKind::Peers(a) => bench_peers::run(a),
            BenchKind::Migrate(a) => bench_migrate::run(a),
        },
        Command::Validate { spec } => match sluice_spec::load(&spec, &type_names()) {
            Ok(s) => match compile(&s, REGISTRY, &Target::of_spec(&s), None) {
                Ok(p) => {
                    let (ports, nfs, chains) = p.counts();
                    println!(
                        "{}: ok ({ports} ports, {nfs} NFs, {chains} chains)",
                        spec.display(),
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("sluice: {e}");
                    ExitCode::from(EXIT_SPEC)
                }
            },
            Err(e) => {
                eprintln!("sluice: {e}");
                ExitCode::from(EXIT_SPEC)
            }
        },
        Command::Daemon(a) => daemon_cmd::run(&cli.conn, a),
        Command::Apply(a) => ctl::apply(&cli.conn, a),
        Command::Add(a) => ctl::add(&cli.conn, a),
        Command::Get(a) => ctl::get(&cli.conn, a),
        Command::Delete(a) => ctl::delete(&cli.conn, a),
        Command::Rollout(a) => rollout_cmd::rollout(&cli.conn, a),
        Command::Checkpoint(a) => state_cmd::checkpoint(&cli.conn, a),
        Command::Restore(a) => state_cmd::restore(&cli.conn, a),
        Command::Migrate(a) => migrate_cmd::run(&cli.conn, a),
        Command::Ps(a) => ctl::ps(&cli.conn, a),
        Command::Stats(a) => ctl::stats(&cli.conn, a),
        Command::Logs(a) => ctl::logs(&cli.conn, a),
        Command::Top => top::run(&cli.conn),
        Command::Tcpdump(a) => tcpdump::run(&cli.conn, a),
        Command::Soak(a) => soak::run(a),
        Command::NfTypes => {
            print_stdout(&nf_types_table());
            ExitCode::SUCCESS
        }
    }
}

/// Logs go to stderr as `sluice: <message>` (NF output as
/// `sluice: nf <name>: <line>`), filtered by `SLUICE_LOG` (an `EnvFilter`
/// directive; default `info`).
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("SLUICE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .event_format(logfmt::Plain)
        .try_init();
}

/// Writes to stdout; a closed pipe (e.g. `| head`) is not an error worth a panic.
pub(crate) fn print_stdout(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// `sluice nf-types`: one line per type, the summaries in one column two
/// spaces after the longest name (the registry has names of 13 characters
/// and grows).
fn nf_types_table() -> String {
    let width = REGISTRY.iter().map(|t| t.name.len()).max().unwrap_or(0);
    REGISTRY
        .iter()
        .map(|t| format!("{:<width$}  {}\n", t.name, t.summary))
        .collect()
}

fn type_names() -> Vec<&'static str> {
    REGISTRY.iter().map(|t| t.name).collect()
}

/// Runs a loaded spec with signal handling: the first SIGINT/SIGTERM drains
/// and stops; a second one exits at once.
pub(crate) fn execute(
    spec: &sluice_spec::Spec,
    duration: Option<Duration>,
) -> Result<RunReport, RunError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone());
        let _ = signal_hook::flag::register(sig, stop.clone());
    }
    run(
        spec,
        REGISTRY,
        RunOptions {
            duration,
            live: std::io::stderr().is_terminal(),
            stop,
            ..RunOptions::default()
        },
    )
}

fn finish(result: Result<RunReport, RunError>, json: bool) -> ExitCode {
    match result {
        Ok(report) => {
            let text = if json {
                serde_json::to_string_pretty(&report)
                    .map(|s| s + "\n")
                    .unwrap_or_default()
            } else {
                report.human()
            };
            print_stdout(&text);
            if report.leaked_buffers > 0 || report.unaccounted != 0 {
                eprintln!(
                    "sluice: accounting error: {} leaked buffers, {} unaccounted packets",
                    report.leaked_buffers, report.unaccounted
                );
                return ExitCode::from(EXIT_ACCOUNTING);
            }
            ExitCode::SUCCESS
        }
        Err(RunError::Spec(e)) => {
            eprintln!("sluice: {e}");
            ExitCode::from(EXIT_SPEC)
        }
        Err(e @ RunError::Failed(_)) => {
            eprintln!("sluice: {e}");
            ExitCode::from(EXIT_FAILED)
        }
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(EXIT_SETUP)
        }
    }
}
