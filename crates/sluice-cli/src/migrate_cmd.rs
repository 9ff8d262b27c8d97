//! `sluice migrate NF --to SOCKET`: moves an NF, with the chains, ports
//! and NFs connected to it, from this daemon to another on the same host
//! while traffic flows (the daemon's `migrate.rs` says how).
//!
//! The client drives the three steps: export from the source, import into
//! the destination, then commit at the source; if the import is refused
//! the move is aborted and everything runs on the source as before.
//! `--commit` and `--abort` finish a move this command could not (it was
//! killed between two steps).

use std::process::ExitCode;
use std::time::Instant;

use serde_json::{json, Value};

use crate::client::{Client, Endpoint};
use crate::ctl::{client, fail, refused};
use crate::ctl_args::{ConnArgs, Format, MigrateArgs};
use crate::print_stdout;

/// What a move did, timed at the client.
#[derive(Debug, Clone)]
pub struct Moved {
    /// The source's handover (ports, NFs, chains, states, drain and
    /// checkpoint times).
    pub handover: Value,
    /// The destination's answer (add, restore times).
    pub imported: Value,
    /// Export request → answer, ms.
    pub export_ms: f64,
    /// Import request → answer, ms.
    pub import_ms: f64,
    /// Commit request → answer, ms.
    pub commit_ms: f64,
    /// From the export request to the destination reading the ports:
    /// the time frames waited in the taps, ms.
    pub paused_ms: f64,
    /// The whole move, ms.
    pub total_ms: f64,
}

impl Moved {
    /// As the JSON `-o json` prints.
    pub fn to_json(&self) -> Value {
        let h = &self.handover;
        let states: u64 = h["states"].as_object().map_or(0, |m| {
            m.values()
                .filter_map(Value::as_str)
                .map(|s| s.len() as u64 * 3 / 4)
                .sum()
        });
        json!({
            "nf": h["nf"],
            "ports": h["ports"],
            "nfs": h["nfs"],
            "chains": h["chains"],
            "state_bytes": states,
            "drain_us": h["drain_us"],
            "checkpoint_us": h["checkpoint_us"],
            "add_us": self.imported["add_us"],
            "restore_us": self.imported["restore_us"],
            "export_ms": self.export_ms,
            "import_ms": self.import_ms,
            "commit_ms": self.commit_ms,
            "paused_ms": self.paused_ms,
            "total_ms": self.total_ms,
        })
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Why a move failed, and whether the source runs the NF as before.
#[derive(Debug)]
pub struct NotMoved {
    /// What went wrong.
    pub message: String,
    /// The daemon refused (4xx) rather than failed.
    pub refused: bool,
}

/// Moves `nf` (and its component) from `from` to `to`.
pub fn migrate(from: &Client, to: &Client, nf: &str) -> Result<Moved, NotMoved> {
    let failed = |message: String| NotMoved {
        message,
        refused: false,
    };
    let body = json!({ "nf": nf });
    let t0 = Instant::now();
    let ex = from
        .call("POST", "/v1/migrations/export", Some(&body))
        .map_err(failed)?;
    if ex.status != 200 {
        return Err(NotMoved {
            message: ex.error_text(),
            refused: (400..500).contains(&ex.status),
        });
    }
    let export_ms = ms(t0);
    let handover = ex.json();
    let t1 = Instant::now();
    let im = to.call("POST", "/v1/migrations/import", Some(&handover));
    let import_ms = ms(t1);
    let paused_ms = ms(t0);
    let imported = match im {
        Ok(a) if a.status == 200 => a.json(),
        other => {
            let (why, refused) = match other {
                Ok(a) => (a.error_text(), (400..500).contains(&a.status)),
                Err(e) => (e, false),
            };
            let back = match from.call("POST", "/v1/migrations/abort", Some(&body)) {
                Ok(a) if a.status == 200 => format!("{nf} runs on the source as before"),
                Ok(a) => format!(
                    "and the source did not resume ({}): run `sluice migrate {nf} --abort`",
                    a.error_text()
                ),
                Err(e) => format!(
                    "and the source did not resume ({e}): run `sluice migrate {nf} --abort`"
                ),
            };
            return Err(NotMoved {
                message: format!("the destination refused the move: {why}; {back}"),
                refused,
            });
        }
    };
    let t2 = Instant::now();
    let co = from
        .call("POST", "/v1/migrations/commit", Some(&body))
        .map_err(|e| {
            failed(format!(
                "{nf} runs on the destination, but the source did not answer the commit ({e}): \
                 run `sluice migrate {nf} --commit`"
            ))
        })?;
    if co.status != 200 {
        return Err(failed(format!(
            "{nf} runs on the destination, but the source did not let go ({}): run \
             `sluice migrate {nf} --commit`",
            co.error_text()
        )));
    }
    Ok(Moved {
        handover,
        imported,
        export_ms,
        import_ms,
        commit_ms: ms(t2),
        paused_ms,
        total_ms: ms(t0),
    })
}

pub fn run(conn: &ConnArgs, a: MigrateArgs) -> ExitCode {
    let from = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if a.commit || a.abort {
        let step = if a.commit { "commit" } else { "abort" };
        let body = json!({ "nf": a.nf });
        return match from.call("POST", &format!("/v1/migrations/{step}"), Some(&body)) {
            Ok(ans) if ans.status == 200 => {
                print_stdout(&format!("the move of {}: {step} done\n", a.nf));
                ExitCode::SUCCESS
            }
            Ok(ans) => refused(&ans),
            Err(e) => fail(e),
        };
    }
    let Some(dest) = a.to else {
        return fail("sluice migrate needs --to SOCKET (the destination daemon's UNIX socket)");
    };
    let to = match Client::new(Endpoint::Unix(dest.clone())) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match migrate(&from, &to, &a.nf) {
        Ok(m) => {
            if a.output == Some(Format::Json) {
                print_stdout(&format!("{}\n", m.to_json()));
            } else {
                let h = &m.handover;
                let count = |k: &str| h[k].as_array().map_or(0, Vec::len);
                print_stdout(&format!(
                    "{} moved to {}: {} port(s), {} NF(s), {} chain(s); frames waited {:.1} ms \
                     (export {:.1} ms, import {:.1} ms, commit {:.1} ms)\n",
                    a.nf,
                    dest.display(),
                    count("ports"),
                    count("nfs"),
                    count("chains"),
                    m.paused_ms,
                    m.export_ms,
                    m.import_ms,
                    m.commit_ms
                ));
            }
            ExitCode::SUCCESS
        }
        Err(e) if e.refused => {
            eprintln!("sluice: {}", e.message);
            ExitCode::from(crate::ctl::EXIT_REFUSED)
        }
        Err(e) => fail(e.message),
    }
}
