//! `sluice checkpoint NF -o FILE` and `sluice restore NF FILE`: an NF's
//! state to a file and back, through the daemon's API (`GET
//! /v1/nfs/{name}/checkpoint`, `POST /v1/nfs/{name}/restore`; see the
//! daemon's `checkpoint.rs`).

use std::io::Write;
use std::process::ExitCode;

use sluice_nf::checkpoint::Checkpoint;

use crate::ctl::{client, fail, refused};
use crate::ctl_args::{CheckpointArgs, ConnArgs, RestoreArgs};
use crate::print_stdout;

/// Most bytes read from a checkpoint file (the API's body limit).
const FILE_MAX: u64 = 32 << 20;

pub fn checkpoint(conn: &ConnArgs, a: CheckpointArgs) -> ExitCode {
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let ans = match c.call("GET", &format!("/v1/nfs/{}/checkpoint", a.nf), None) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if ans.status != 200 {
        return refused(&ans);
    }
    // Read back what the daemon sent before writing it: a file on disk is
    // always one `sluice restore` takes.
    let ck = match Checkpoint::decode(&ans.body) {
        Ok(ck) => ck,
        Err(e) => return fail(format!("the daemon's checkpoint does not read back: {e}")),
    };
    if let Err(e) = write_whole(&a.output, &ans.body) {
        return fail(format!("cannot write {}: {e}", a.output.display()));
    }
    let bytes: usize = ck.parts.iter().map(|p| p.state.len()).sum();
    print_stdout(&format!(
        "checkpoint of {} ({} state v{}): {} instance(s), {bytes} bytes of state in {}\n",
        a.nf,
        ck.nf_type,
        ck.state_version,
        ck.parts.len(),
        a.output.display()
    ));
    ExitCode::SUCCESS
}

/// Writes `bytes` to `path` through a temporary file renamed over it, so
/// a crash leaves the old file or the new one, never half of one.
fn write_whole(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().ok_or(std::io::ErrorKind::InvalidInput)?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

pub fn restore(conn: &ConnArgs, a: RestoreArgs) -> ExitCode {
    let bytes = match std::fs::File::open(&a.file).and_then(|f| {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(f, FILE_MAX + 1), &mut buf)?;
        Ok(buf)
    }) {
        Ok(b) if b.len() as u64 > FILE_MAX => {
            return fail(format!(
                "{} is larger than {FILE_MAX} bytes, the API's limit",
                a.file.display()
            ))
        }
        Ok(b) => b,
        Err(e) => return fail(format!("cannot read {}: {e}", a.file.display())),
    };
    // The daemon checks it too; checking here names the file in the error.
    if let Err(e) = Checkpoint::decode(&bytes) {
        return fail(format!("{}: {e}", a.file.display()));
    }
    let c = match client(conn) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let ans = match c.call_bytes("POST", &format!("/v1/nfs/{}/restore", a.nf), bytes) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    if ans.status != 200 {
        return refused(&ans);
    }
    let v = ans.json();
    print_stdout(&format!(
        "{} restored: {} instance(s), {} bytes of state\n",
        a.nf, v["instances"], v["bytes"]
    ));
    ExitCode::SUCCESS
}
