//! `sluice rollout NF --config FILE`: a rolling upgrade through the
//! daemon's API (`POST /v1/nfs/{name}/rollout`; see the daemon's
//! `rollout.rs`), optionally waiting until the old version has retired.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::ctl::{client, diff_lines, emit, fail, refused};
use crate::ctl_args::{ConnArgs, Format, RolloutArgs};
use crate::print_stdout;

pub fn rollout(conn: &ConnArgs, a: RolloutArgs) -> ExitCode {
    let text = match sluice_spec::read_text_file(&a.config, sluice_spec::MAX_SPEC_BYTES) {
        Ok(t) => t,
        Err(e) => return fail(format!("cannot read {}: {e}", a.config.display())),
    };
    let config = match sluice_spec::parse_value(&text, &a.config.to_string_lossy()) {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let body = json!({ "config": config, "timeout_s": a.timeout });
    let ans = match c.call("POST", &format!("/v1/nfs/{}/rollout", a.nf), Some(&body)) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if ans.status != 200 {
        return refused(&ans);
    }
    let v = ans.json();
    if a.output.is_none_or(|f| f == Format::Wide) {
        print_stdout(&format!(
            "{}\nversion {}: {}@{} runs; generation {} drains ({} flows)\n",
            diff_lines(&v["diff"]).join("\n"),
            v["resource_version"],
            a.nf,
            v["generation"],
            v["draining_generation"],
            v["held_flows"],
        ));
    }
    if a.wait {
        // The daemon retires the old version itself; a little longer than
        // its deadline covers the last check.
        let give_up = Instant::now() + Duration::from_secs(a.timeout + 5);
        loop {
            let nf: Value = match c.get(&format!("/v1/nfs/{}", a.nf)) {
                Ok(x) => x,
                Err(e) => return fail(e),
            };
            if nf.get("rollout").is_none() {
                break;
            }
            if Instant::now() > give_up {
                return fail("the old version did not retire in time");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if a.output.is_none_or(|f| f == Format::Wide) {
            print_stdout("the old version retired\n");
        }
    }
    if let Some(f) = a.output.filter(|f| *f != Format::Wide) {
        emit(&v, f);
    }
    ExitCode::SUCCESS
}
