//! The commands that talk to a running daemon: `apply`, `get`, `delete`,
//! `ps`, `stats`, `logs`. Each prints a table by default, or the API's
//! JSON (`-o json`) or its YAML (`-o yaml`).

use std::process::ExitCode;

use serde_json::{json, Value};

use crate::client::{Answer, Client, Endpoint};
use crate::ctl_args::{
    ApplyArgs, ConnArgs, DeleteArgs, Format, GetArgs, Kind, ListArgs, LogsArgs, Resource,
};
use crate::print_stdout;

/// Exit code when the daemon refused the request (invalid input,
/// conflict, not found).
pub(crate) const EXIT_REFUSED: u8 = 2;
/// Exit code when the daemon could not be reached or failed.
const EXIT_FAILED: u8 = 1;

/// The client for `conn`.
pub fn client(conn: &ConnArgs) -> Result<Client, String> {
    let endpoint = match &conn.server {
        Some(addr) => {
            let file = conn
                .token_file
                .as_ref()
                .ok_or("--server needs --token-file (the daemon's TCP listener wants its token)")?;
            let token = std::fs::read_to_string(file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            Endpoint::Tcp(addr.clone(), token.trim().to_string())
        }
        None => Endpoint::Unix(
            conn.socket
                .clone()
                .unwrap_or_else(sluice_daemon::client_default_socket),
        ),
    };
    Client::new(endpoint)
}

pub(crate) fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("sluice: {msg}");
    ExitCode::from(EXIT_FAILED)
}

/// Reports a non-2xx answer; 4xx means the daemon refused.
pub(crate) fn refused(a: &Answer) -> ExitCode {
    eprintln!("sluice: {}", a.error_text());
    if (400..500).contains(&a.status) {
        ExitCode::from(EXIT_REFUSED)
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

pub(crate) fn emit(v: &Value, format: Format) {
    let text = match format {
        Format::Yaml => crate::yaml_out::to_yaml(v),
        _ => serde_json::to_string_pretty(v).unwrap_or_default() + "\n",
    };
    print_stdout(&text);
}

/// Lines of the diff: `nf/acl added`, ...
pub(crate) fn diff_lines(diff: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for (kind, key) in [("port", "ports"), ("nf", "nfs"), ("chain", "chains")] {
        for (what, verb) in [
            ("added", "added"),
            ("changed", "changed"),
            ("removed", "removed"),
        ] {
            for n in diff[key][what].as_array().into_iter().flatten() {
                lines.push(format!("{kind}/{} {verb}", n.as_str().unwrap_or("?")));
            }
        }
    }
    lines
}

/// `sluice apply -f SPEC [--dry-run]`.
pub fn apply(conn: &ConnArgs, a: ApplyArgs) -> ExitCode {
    send_spec(conn, a, Change::Apply)
}

/// `sluice add -f FILE`: the file's ports, NFs and chains added to what
/// runs (`POST /v1/spec/additions`), without sending the rest.
pub fn add(conn: &ConnArgs, a: ApplyArgs) -> ExitCode {
    send_spec(conn, a, Change::Add)
}

/// What a file sent to the daemon does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    /// Becomes the desired state (`PUT /v1/spec`).
    Apply,
    /// Is added to it (`POST /v1/spec/additions`).
    Add,
}

/// Sends `a`'s file as a change and prints what changed.
fn send_spec(conn: &ConnArgs, a: ApplyArgs, change: Change) -> ExitCode {
    let (method, path, done) = match change {
        Change::Apply => ("PUT", "/v1/spec", "applied"),
        Change::Add => ("POST", "/v1/spec/additions", "added"),
    };
    let text = match std::fs::read_to_string(&a.file) {
        Ok(t) => t,
        Err(e) => return fail(format!("cannot read {}: {e}", a.file.display())),
    };
    let source = std::path::absolute(&a.file).unwrap_or_else(|_| a.file.clone());
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let mut body = json!({
        "spec": text,
        "source": source.to_string_lossy(),
        "dry_run": a.dry_run,
    });
    if change == Change::Apply {
        // Optimistic concurrency: apply over the version just read, so a
        // change made meanwhile by someone else is not silently
        // overwritten. (An addition overwrites nothing: a name taken
        // meanwhile is refused.)
        match c.get::<Value>("/v1/spec") {
            Ok(v) => body["resource_version"] = v["resource_version"].as_u64().unwrap_or(0).into(),
            Err(e) => return fail(e),
        }
    }
    let ans = match c.call(method, path, Some(&body)) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if ans.status != 200 {
        return refused(&ans);
    }
    let v = ans.json();
    if let Some(f) = a.output.filter(|f| *f != Format::Wide) {
        emit(&v, f);
        return ExitCode::SUCCESS;
    }
    let mut lines = diff_lines(&v["diff"]);
    if lines.is_empty() {
        lines.push("no change".into());
    }
    let tail = if a.dry_run {
        " (dry run)".to_string()
    } else {
        format!(
            "\nversion {} {done} in {:.1} ms",
            v["resource_version"],
            v["took_us"].as_f64().unwrap_or(0.0) / 1e3
        )
    };
    print_stdout(&format!("{}{tail}\n", lines.join("\n")));
    ExitCode::SUCCESS
}

/// A table with a header row, columns padded to their widest cell.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&width).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}   "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out += &line(r.clone());
    }
    out
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// `sluice get ports|nfs|chains [NAME]`.
pub fn get(conn: &ConnArgs, a: GetArgs) -> ExitCode {
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let path = match &a.name {
        Some(n) => format!("{}/{}", a.what.path(), n),
        None => a.what.path().to_string(),
    };
    let ans = match c.call("GET", &path, None) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if ans.status != 200 {
        return refused(&ans);
    }
    let v = ans.json();
    if let Some(f) = a.output.filter(|f| *f != Format::Wide) {
        emit(&v, f);
        return ExitCode::SUCCESS;
    }
    let items: Vec<Value> = match v {
        Value::Array(a) => a,
        one => vec![one],
    };
    let wide = a.output == Some(Format::Wide);
    let text = match a.what {
        Resource::Ports => {
            let rows = items
                .iter()
                .map(|p| {
                    let st = &p["stats"];
                    let mut r = vec![
                        s(&p["name"]),
                        s(&p["kind"]),
                        s(&st["rx_packets"]),
                        s(&st["tx_packets"]),
                    ];
                    if wide {
                        r.extend([
                            s(&st["rx_bytes"]),
                            s(&st["tx_bytes"]),
                            s(&st["rx_dropped"]),
                            s(&st["tx_errors"]),
                        ]);
                    }
                    r
                })
                .collect::<Vec<_>>();
            let mut h = vec!["NAME", "KIND", "RX", "TX"];
            if wide {
                h.extend(["RX BYTES", "TX BYTES", "RX DROPPED", "TX ERRORS"]);
            }
            table(&h, &rows)
        }
        Resource::Nfs => {
            let rows = items
                .iter()
                .map(|n| {
                    let drops: u64 = n["drops"]
                        .as_object()
                        .map_or(0, |m| m.values().filter_map(Value::as_u64).sum());
                    let pkts = n["packets"].as_u64().unwrap_or(0);
                    let ns = n["cpu_ns"].as_u64().unwrap_or(0);
                    let mut r = vec![
                        s(&n["name"]),
                        s(&n["type"]),
                        s(&n["isolation"]),
                        pkts.to_string(),
                        drops.to_string(),
                        s(&n["restarts"]),
                    ];
                    if wide {
                        let per = if pkts > 0 {
                            ns as f64 / pkts as f64
                        } else {
                            0.0
                        };
                        r.push(format!("{per:.1}"));
                        r.push(n["instances"].as_array().map_or(0, Vec::len).to_string());
                        r.push(sandbox_summary(&n["sandbox"]));
                        r.push(s(&n["domain"]));
                    }
                    r
                })
                .collect::<Vec<_>>();
            let mut h = vec!["NAME", "TYPE", "ISOLATION", "PACKETS", "DROPS", "RESTARTS"];
            if wide {
                h.extend(["NS/PKT", "INSTANCES", "SANDBOX", "DOMAIN"]);
            }
            table(&h, &rows)
        }
        Resource::Chains => {
            let rows = items
                .iter()
                .map(|c| {
                    let path: Vec<String> =
                        c["path"].as_array().into_iter().flatten().map(s).collect();
                    let mut r = vec![s(&c["name"]), s(&c["from"]), path.join(" → ")];
                    if wide {
                        r.push(
                            c["definition"]
                                .get("match")
                                .map_or("-".into(), |m| m.to_string()),
                        );
                    }
                    r
                })
                .collect::<Vec<_>>();
            let mut h = vec!["NAME", "FROM", "PATH"];
            if wide {
                h.push("MATCH");
            }
            table(&h, &rows)
        }
    };
    print_stdout(&text);
    ExitCode::SUCCESS
}

/// `sluice delete nf|chain|port NAME`.
pub fn delete(conn: &ConnArgs, a: DeleteArgs) -> ExitCode {
    let kind = match a.kind {
        Kind::Port => "ports",
        Kind::Nf => "nfs",
        Kind::Chain => "chains",
        Kind::Spec => "spec",
    };
    let path = match (a.kind, &a.name) {
        (Kind::Spec, None) => "/v1/spec".to_string(),
        (Kind::Spec, Some(n)) => {
            eprintln!("sluice: `delete spec` takes no name (got {n:?}): it stops everything");
            return ExitCode::from(2);
        }
        (_, Some(n)) => format!("/v1/{kind}/{n}"),
        (_, None) => {
            eprintln!("sluice: `delete {kind}` needs the name of the object to delete");
            return ExitCode::from(2);
        }
    };
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let ans = match c.call("DELETE", &path, None) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if ans.status != 200 {
        return refused(&ans);
    }
    let v = ans.json();
    print_stdout(&format!(
        "{}\nversion {}\n",
        diff_lines(&v["diff"]).join("\n"),
        v["resource_version"]
    ));
    ExitCode::SUCCESS
}

/// `sluice ps`: every NF instance.
pub fn ps(conn: &ConnArgs, a: ListArgs) -> ExitCode {
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // Two samples a quarter of a second apart give each instance's rate.
    let first: Vec<Value> = match c.get("/v1/instances") {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if let Some(f) = a.output.filter(|f| *f != Format::Wide) {
        emit(&Value::Array(first), f);
        return ExitCode::SUCCESS;
    }
    let t0 = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(250));
    let second: Vec<Value> = c.get("/v1/instances").unwrap_or_default();
    let dt = t0.elapsed().as_secs_f64();
    let wide = a.output == Some(Format::Wide);
    let rows: Vec<Vec<String>> = second
        .iter()
        .map(|i| {
            let before = first
                .iter()
                .find(|f| f["nf"] == i["nf"] && f["worker"] == i["worker"])
                .and_then(|f| f["packets"].as_u64())
                .unwrap_or(0);
            let rate = i["packets"].as_u64().unwrap_or(0).saturating_sub(before) as f64 / dt;
            let pid = i["pid"].as_i64().unwrap_or(0);
            let mut r = vec![
                s(&i["nf"]),
                s(&i["worker"]),
                if pid > 0 { pid.to_string() } else { "-".into() },
                s(&i["cpu"]),
                s(&i["state"]),
                format!("{:.3}", rate / 1e6),
                s(&i["restarts"]),
            ];
            if wide {
                r.extend([
                    s(&i["type"]),
                    s(&i["isolation"]),
                    s(&i["slot"]),
                    s(&i["queued"]),
                    s(&i["packets"]),
                ]);
            }
            r
        })
        .collect();
    let mut h = vec!["NF", "WORKER", "PID", "CPU", "STATE", "MPPS", "RESTARTS"];
    if wide {
        h.extend(["TYPE", "ISOLATION", "SLOT", "QUEUED", "PACKETS"]);
    }
    print_stdout(&table(&h, &rows));
    ExitCode::SUCCESS
}

/// `sluice stats`: the report `sluice run --json` prints, live.
pub fn stats(conn: &ConnArgs, a: ListArgs) -> ExitCode {
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let ans = match c.call("GET", "/v1/stats", None) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if ans.status != 200 {
        return refused(&ans);
    }
    match a.output {
        Some(f @ (Format::Json | Format::Yaml)) => emit(&ans.json(), f),
        _ => match serde_json::from_slice::<sluice_dataplane::RunReport>(&ans.body) {
            Ok(r) => print_stdout(&r.human_as("sluice daemon")),
            Err(_) => emit(&ans.json(), Format::Json),
        },
    }
    ExitCode::SUCCESS
}

/// `sluice logs NF [-f]`.
pub fn logs(conn: &ConnArgs, a: LogsArgs) -> ExitCode {
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let mut after = 0u64;
    loop {
        let ans = match c.call("GET", &format!("/v1/nfs/{}/logs?after={after}", a.nf), None) {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        if ans.status != 200 {
            return refused(&ans);
        }
        let v = ans.json();
        let mut text = String::new();
        for l in v["lines"].as_array().into_iter().flatten() {
            let src = if l["source"] == "platform" {
                "[platform] "
            } else {
                ""
            };
            text += &format!("{src}{}\n", l["line"].as_str().unwrap_or(""));
        }
        print_stdout(&text);
        after = v["next"].as_u64().unwrap_or(after);
        if !a.follow {
            return ExitCode::SUCCESS;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// One word or a short list for an NF's sandbox in `sluice get nfs -o
/// wide`: `strict` (the default), `off`, else what it has
/// (`seccomp,uid,ipc,mem=256M`); `-` for inline NFs.
fn sandbox_summary(s: &Value) -> String {
    if s.is_null() {
        return "-".into();
    }
    let on = |k: &str| s[k].as_bool().unwrap_or(false);
    let namespaces: Vec<&str> = s["namespaces"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut parts: Vec<String> = Vec::new();
    if on("seccomp") {
        parts.push("seccomp".into());
    }
    if !s["uid"].is_null() {
        parts.push("uid".into());
    }
    if on("capabilities") {
        parts.push("caps".into());
    }
    parts.extend(namespaces.iter().map(|n| n.to_string()));
    let limits: Vec<String> = [("memory_max_mib", "mem=", "M"), ("pids_max", "pids=", "")]
        .iter()
        .filter_map(|(k, p, unit)| s[*k].as_u64().map(|v| format!("{p}{v}{unit}")))
        .collect();
    let base = parts.join(",");
    let word = match base.as_str() {
        "seccomp,uid,ipc,uts" => "strict".to_string(),
        "caps" => "off".to_string(),
        _ => base,
    };
    std::iter::once(word)
        .chain(limits)
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}
