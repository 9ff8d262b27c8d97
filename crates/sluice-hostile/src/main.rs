//! `sluice-hostile SPEC SECONDS`: runs SPEC for SECONDS and prints its
//! report as JSON, as `sluice run SPEC --json --duration SECONDS` does,
//! with the hostile NF type ([`attacks`]) known besides the shipped ones.
//! Test-only: it exists so the hostile suite attacks the real platform
//! (the same template, sandbox and worker) without the attacks being
//! shipped in `sluice`'s registry.

mod attacks;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use sluice_nf::NfType;

/// The shipped types and the hostile one, for the life of the process.
fn registry() -> &'static [NfType] {
    let mut all: Vec<NfType> = sluice_nfs::REGISTRY
        .iter()
        .map(|t| NfType {
            name: t.name,
            summary: t.summary,
            drop_reasons: t.drop_reasons,
            counters: t.counters,
            build: t.build,
            frames: t.frames,
        })
        .collect();
    all.push(attacks::TYPE);
    Vec::leak(all)
}

fn main() -> ExitCode {
    let registry = registry();
    // The NF template is this program too: it must know the hostile type.
    if let Some(code) = sluice_dataplane::host::template_main_if_invoked(registry) {
        return code;
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [spec, seconds] = args.as_slice() else {
        eprintln!("usage: sluice-hostile SPEC SECONDS");
        return ExitCode::from(2);
    };
    let Ok(seconds) = seconds.parse::<f64>() else {
        eprintln!("sluice-hostile: SECONDS must be a number");
        return ExitCode::from(2);
    };
    let names: Vec<&str> = registry.iter().map(|t| t.name).collect();
    let spec = match sluice_spec::load(Path::new(spec), &names) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice-hostile: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = sluice_dataplane::RunOptions {
        duration: Some(Duration::from_secs_f64(seconds)),
        ..sluice_dataplane::RunOptions::default()
    };
    match sluice_dataplane::run(&spec, registry, opts) {
        Ok(report) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("sluice-hostile: {e}");
            ExitCode::from(1)
        }
    }
}
