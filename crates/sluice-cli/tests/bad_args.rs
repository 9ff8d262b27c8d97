//! Every numeric command-line value is checked when the command line is
//! parsed: a bad one is a usage error (exit 2) naming the flag and what
//! it accepts, never a panic (exit 101) once the command is under way.

mod common;
use common::*;

use std::process::Stdio;

/// Runs `sluice ARGS` and checks it refuses them as a usage error whose
/// message names `flag`.
fn refused(args: &[&str], flag: &str) {
    let out = sluice().args(args).stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(flag), "{args:?}: no mention of {flag}: {err}");
    assert!(
        err.contains("invalid value"),
        "{args:?}: the message must say the value is invalid: {err}"
    );
    assert!(out.stdout.is_empty(), "{args:?}: nothing may run");
}

/// Values no duration may take.
const BAD_SECONDS: [&str; 9] = [
    "-1",
    "0",
    "-0",
    "nan",
    "inf",
    "-inf",
    "1e300",
    "18446744073709551616",
    "5s",
];

#[test]
fn run_refuses_bad_durations() {
    let spec = root().join("examples/quickstart.yaml");
    let spec = spec.to_str().unwrap();
    for v in BAD_SECONDS {
        refused(&["run", spec, &format!("--duration={v}")], "--duration");
    }
}

#[test]
fn run_duration_messages_say_what_is_allowed() {
    let spec = root().join("examples/quickstart.yaml");
    let out = sluice()
        .args(["run", spec.to_str().unwrap(), "--duration=-1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("seconds greater than 0 and at most 31536000"),
        "{err}"
    );
}

#[test]
fn benchmarks_refuse_bad_durations() {
    for bench in ["chain", "nfs", "wire", "jitter"] {
        for v in BAD_SECONDS {
            refused(&["bench", bench, &format!("--duration={v}")], "--duration");
        }
    }
    // Each benchmark's ceiling is part of its contract.
    refused(&["bench", "chain", "--duration=86401"], "--duration");
    refused(&["bench", "jitter", "--duration=3601"], "--duration");
}

#[test]
fn bench_chain_refuses_out_of_range_numbers() {
    // A short valid duration and inline NFs keep a wrongly accepted value
    // from costing much.
    let base = [
        "bench",
        "chain",
        "--isolation",
        "inline",
        "--duration",
        "0.05",
    ];
    for (flag, values) in [
        ("--length", &["-1", "1025", "4294967296"][..]),
        ("--packet-size", &["59", "2049", "65536"]),
        ("--rate", &["0", "-5", "18446744073709551616"]),
        ("--flows", &["0", "1000001"]),
        ("--batch", &["0", "257"]),
        ("--workers", &["0", "65"]),
        ("--wake-batch", &["0", "257"]),
        ("--wake-timeout-us", &["0", "100001"]),
        ("--busy-poll-us", &["1000001", "-1"]),
    ] {
        for v in values {
            let arg = format!("{flag}={v}");
            let mut args = base.to_vec();
            args.push(&arg);
            refused(&args, flag);
        }
    }
}

#[test]
fn bench_nfs_refuses_out_of_range_flows() {
    for v in ["0", "1000001", "-3"] {
        refused(
            &[
                "bench",
                "nfs",
                "--duration",
                "0.05",
                &format!("--flows={v}"),
            ],
            "--flows",
        );
    }
}

/// The daemon flags are global, so clap takes them anywhere; a command that
/// runs in this process refuses them rather than ignore them, and one that
/// talks to a daemon takes them. From the environment they are ignored.
#[test]
fn daemon_flags_on_a_local_command_are_refused_not_ignored() {
    let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/quickstart.yaml")
        .canonicalize()
        .unwrap();
    let spec = spec.to_str().unwrap();
    for args in [
        vec!["validate", spec, "--socket", "/tmp/x.sock"],
        vec!["--socket", "/tmp/x.sock", "validate", spec],
        vec!["run", spec, "--duration", "0.1", "--server", "127.0.0.1:1"],
        vec!["nf-types", "--token-file", "/tmp/t"],
        vec!["bench", "jitter", "--socket", "/tmp/x.sock"],
    ] {
        let out = sluice().args(&args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("is for commands that talk to a daemon"),
            "{args:?}: {err}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: nothing may run");
    }
    let out = sluice()
        .args(["validate", spec])
        .env("SLUICE_SOCKET", "/tmp/x.sock")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
