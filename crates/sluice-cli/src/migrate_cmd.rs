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
    /// The source's handover (ports, NFs, chains).
    pub handover: Value,
    /// Bytes of the states that moved (the pause's binary answer).
    pub state_bytes: usize,
    /// The destination's answers to the import and the resume (drain,
    /// checkpoint and restore times).
    pub imported: Value,
    pub resumed: Value,
    /// Import request → answer (descriptors taken, objects added,
    /// before traffic stops), ms.
    pub import_ms: f64,
    /// Pause request → answer (ports paused, NFs drained, states
    /// taken), ms.
    pub pause_ms: f64,
    /// Resume request → answer (states restored, ports read), ms.
    pub resume_ms: f64,
    /// Commit request → answer, ms.
    pub commit_ms: f64,
    /// From the pause request to the destination reading the ports: the
    /// time frames waited in the taps, ms.
    pub waited_ms: f64,
    /// The whole move, ms.
    pub total_ms: f64,
}

impl Moved {
    /// As the JSON `-o json` prints.
    pub fn to_json(&self) -> Value {
        let h = &self.handover;
        json!({
            "nf": h["nf"],
            "ports": h["ports"],
            "nfs": h["nfs"],
            "chains": h["chains"],
            "state_bytes": self.state_bytes,
            "add_us": self.imported["add_us"],
            "drain_us": self.resumed["drain_us"],
            "checkpoint_us": self.resumed["checkpoint_us"],
            "restore_us": self.resumed["restore_us"],
            "import_ms": self.import_ms,
            "pause_ms": self.pause_ms,
            "resume_ms": self.resume_ms,
            "commit_ms": self.commit_ms,
            "waited_ms": self.waited_ms,
            "total_ms": self.total_ms,
        })
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Why a move failed (the source runs everything as before unless the
/// message says otherwise).
#[derive(Debug)]
pub struct NotMoved {
    /// What went wrong.
    pub message: String,
    /// A daemon refused (4xx) rather than failed.
    pub refused: bool,
}

/// A step's body: JSON, or bytes passed on as they came.
enum Body<'a> {
    Json(&'a Value),
    Bytes(Vec<u8>),
}

/// One step: the answer's body, or why not.
fn step_raw(c: &Client, path: &str, body: Body<'_>) -> Result<Vec<u8>, NotMoved> {
    let path = format!("/v1/migrations/{path}");
    let answer = match body {
        Body::Json(json) => c.call("POST", &path, Some(json)),
        Body::Bytes(bytes) => c.call_bytes("POST", &path, bytes),
    };
    match answer {
        Ok(a) if a.status == 200 => Ok(a.body),
        Ok(a) => Err(NotMoved {
            message: a.error_text(),
            refused: (400..500).contains(&a.status),
        }),
        Err(e) => Err(NotMoved {
            message: e,
            refused: false,
        }),
    }
}

/// One step with a JSON body: the answer's JSON, or why not.
fn step(c: &Client, what: &str, body: &Value) -> Result<Value, NotMoved> {
    let answer = step_raw(c, what, Body::Json(body))?;
    Ok(serde_json::from_slice(&answer).unwrap_or(Value::Null))
}

/// Undoes a move on `c` (best effort), saying how it went.
fn abort(c: &Client, nf: &str, side: &str) -> String {
    match step(c, "abort", &json!({ "nf": nf })) {
        Ok(_) => format!("the {side} runs as before"),
        Err(e) => format!(
            "and the {side} did not undo it ({}): run `sluice migrate {nf} --abort` there",
            e.message
        ),
    }
}

/// Moves `nf` (and its component) from `from` to `to`, in the five steps
/// of the daemon's `migrate` module.
pub fn migrate(from: &Client, to: &Client, nf: &str) -> Result<Moved, NotMoved> {
    let body = json!({ "nf": nf });
    let t0 = Instant::now();
    let handover = step(from, "export", &body)?;
    let t = Instant::now();
    let imported = step(to, "import", &handover).map_err(|e| NotMoved {
        message: format!(
            "the destination refused the move: {}; {}",
            e.message,
            abort(from, nf, "source")
        ),
        refused: e.refused,
    })?;
    let import_ms = ms(t);
    let t = Instant::now();
    // The states go from the source's answer to the destination as they
    // came (binary, unparsed here): the time they take is time frames
    // wait.
    // Past the import, a failed step is undone on both sides.
    let undo = |what: &str, e: NotMoved| NotMoved {
        message: format!(
            "{what}: {}; {}, {}",
            e.message,
            abort(to, nf, "destination"),
            abort(from, nf, "source")
        ),
        refused: e.refused,
    };
    let paused = step_raw(from, "pause", Body::Json(&body))
        .map_err(|e| undo("the source could not pause", e))?;
    let pause_ms = ms(t);
    let t1 = Instant::now();
    let state_bytes = paused.len();
    let resumed = step_raw(to, &format!("resume?nf={nf}"), Body::Bytes(paused))
        .map_err(|e| undo("the destination could not resume", e))?;
    let resume_ms = ms(t1);
    let waited_ms = ms(t);
    let resumed: Value = serde_json::from_slice(&resumed).unwrap_or(Value::Null);
    let t = Instant::now();
    step(from, "commit", &body).map_err(|e| NotMoved {
        message: format!(
            "{nf} runs on the destination, but the source did not let go ({}): run \
             `sluice migrate {nf} --commit` there",
            e.message
        ),
        refused: false,
    })?;
    Ok(Moved {
        handover,
        state_bytes,
        imported,
        resumed,
        import_ms,
        pause_ms,
        resume_ms,
        commit_ms: ms(t),
        waited_ms,
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
                     (pause {:.1} ms, resume {:.1} ms); {:.1} ms in all\n",
                    a.nf,
                    dest.display(),
                    count("ports"),
                    count("nfs"),
                    count("chains"),
                    m.waited_ms,
                    m.pause_ms,
                    m.resume_ms,
                    m.total_ms
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
