//! `sluice`: run NFV specs and benchmark chains.

mod args;
mod bench;
mod bench_jitter;
mod bench_nfs;
mod bench_wire;
mod cli;
mod wire_env;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use sluice_dataplane::{run, RunError, RunOptions, RunReport};
use sluice_nfs::REGISTRY;

use args::Seconds;
use cli::{Cli, Command};

/// Exit code for an invalid spec or bad arguments.
const EXIT_SPEC: u8 = 2;
/// Exit code for a setup failure (memory, ports, NF start).
const EXIT_SETUP: u8 = 1;
/// Exit code when the run ended with leaked buffers or unaccounted packets.
const EXIT_ACCOUNTING: u8 = 3;

fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Command::Bench(b) => bench::run(b),
        Command::Validate { spec } => match sluice_spec::load(&spec, &type_names()) {
            Ok(s) => match sluice_dataplane::plan::Plan::build(&s, REGISTRY) {
                Ok(p) => {
                    println!(
                        "{}: ok ({} ports, {} NFs, {} chains)",
                        spec.display(),
                        p.ports.len(),
                        p.nfs.len(),
                        p.chains.len()
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
        Command::NfTypes => {
            print_stdout(&nf_types_table());
            ExitCode::SUCCESS
        }
    }
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
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(EXIT_SETUP)
        }
    }
}
