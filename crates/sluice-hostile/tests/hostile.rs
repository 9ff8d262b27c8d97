//! The hostile-NF suite: an NF that tries one forbidden thing runs beside
//! a well-behaved chain. For each attack: the attack has no effect, the
//! offender is stopped and its exit named (`killed by its sandbox`), the
//! other chain keeps every packet, and every buffer comes back (the runner
//! exits non-zero on a leak). A control run without the sandbox shows each
//! check can fail.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The good chain's traffic goes to this address (what `peek` looks for).
const GOOD_DST: &str = "203.0.113.77";

fn run(bad_nf: &str) -> Value {
    run_with("", bad_nf)
}

/// `run` with more `settings` lines (each indented two spaces).
fn run_with(settings: &str, bad_nf: &str) -> Value {
    run_spec("", settings, bad_nf)
}

/// `run` with every restart taken over by a standby when one is ready.
fn run_standby(bad_nf: &str) -> Value {
    run_spec(", standby: true", "", bad_nf)
}

/// `run_with` with more keys of `settings.restart` (", key: value").
fn run_spec(restart: &str, settings: &str, bad_nf: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!(
        "settings:\n  restart: {{ policy: always, max_restarts: 2, backoff_ms: 20{restart} }}\n{settings}\
         ports:\n\
         \x20 - {{ name: gen_good, kind: generator, flows: 8, protocol: udp, size: 64, rate_pps: 20000, dst_prefix: {GOOD_DST}/32 }}\n\
         \x20 - {{ name: gen_bad, kind: generator, flows: 8, protocol: udp, size: 64, rate_pps: 20000 }}\n\
         \x20 - {{ name: out_good, kind: sink }}\n\
         \x20 - {{ name: out_bad, kind: sink }}\n\
         nfs:\n\
         \x20 - {{ name: good, type: monitor, isolation: process }}\n\
         \x20 - {bad_nf}\n\
         chains:\n\
         \x20 - {{ name: main, from: gen_good, nfs: [good], to: out_good }}\n\
         \x20 - {{ name: attacked, from: gen_bad, nfs: [bad], to: out_bad }}\n"
    );
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, spec).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice-hostile"))
        .args([path.to_str().unwrap(), "1.5"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the platform survives: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["leaked_buffers"], 0, "{r:#}");
    assert_eq!(r["unaccounted"], 0, "{r:#}");
    r
}

fn nf<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["nfs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap()
}

fn port(r: &Value, name: &str) -> u64 {
    let p = r["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap();
    p["rx_packets"].as_u64().unwrap() + p["tx_packets"].as_u64().unwrap()
}

fn escaped(r: &Value) -> u64 {
    nf(r, "bad")["counters"]["escaped"].as_u64().unwrap_or(0)
}

/// The offender was stopped by the sandbox; the good chain lost nothing.
fn assert_contained(r: &Value, what: &str) {
    let bad = nf(r, "bad");
    let exit = bad["last_exit"].as_str().unwrap_or("");
    assert!(exit.contains("killed by its sandbox"), "{what}: {bad:#}");
    assert!(
        bad["sandbox_kills"].as_u64().unwrap() >= 1,
        "{what}: {bad:#}"
    );
    assert_eq!(escaped(r), 0, "{what}");
    assert_other_chain_whole(r);
    assert!(nf(r, "good")["last_exit"].is_null(), "{what}");
}

/// The good chain carried traffic and lost none of it.
fn assert_other_chain_whole(r: &Value) {
    let sent = port(r, "gen_good");
    assert!(sent > 10_000, "{r:#}");
    assert_eq!(
        port(r, "out_good"),
        sent,
        "the other chain keeps every packet: {r:#}"
    );
}

fn hostile(attack: &str, target: &str, sandbox: &str) -> String {
    format!(
        "{{ name: bad, type: hostile, isolation: process, sandbox: {sandbox}, \
         config: {{ attack: {attack}, target: '{target}' }} }}"
    )
}

/// Runs the `open_file` attack at a fresh path with `sandbox`, through
/// `run`: the report, and whether the file was written.
fn write_a_file(run: fn(&str) -> Value, sandbox: &str) -> (Value, bool) {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("pwned");
    let r = run(&hostile("open_file", target.to_str().unwrap(), sandbox));
    (r, target.exists())
}

#[test]
fn writing_a_file_is_stopped() {
    let (r, written) = write_a_file(run, "strict");
    assert_contained(&r, "open_file");
    assert!(!written);
}

#[test]
fn without_the_sandbox_the_same_nf_escapes() {
    let (r, written) = write_a_file(run, "off");
    assert_eq!(escaped(&r), 1, "{r:#}");
    assert!(written);
    assert!(nf(&r, "bad")["last_exit"].is_null());
}

#[test]
fn sending_on_a_new_socket_is_stopped() {
    let listener = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let r = run(&hostile("socket", &port, "strict"));
    assert_contained(&r, "socket");
    let mut buf = [0u8; 16];
    assert!(listener.recv(&mut buf).is_err(), "nothing arrived");
}

#[test]
fn running_a_program_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("pwned");
    let r = run(&hostile("exec", target.to_str().unwrap(), "strict"));
    assert_contained(&r, "exec");
    assert!(!Path::new(&target).exists());
}

#[test]
fn process_attacks_are_stopped() {
    for attack in ["fork", "signal", "ptrace", "exec_memory", "setuid"] {
        let r = run(&hostile(attack, "", "strict"));
        assert_contained(&r, attack);
    }
}

#[test]
fn a_system_call_outside_the_list_is_stopped() {
    // uname(2): harmless, and not on the list.
    let r = run(&hostile("syscall", &libc::SYS_uname.to_string(), "strict"));
    assert_contained(&r, "uname");
}

#[test]
fn eating_memory_ends_at_its_limit() {
    let r = run(&hostile("alloc", "", "{ memory_max_mib: 32 }"));
    let bad = nf(&r, "bad");
    assert!(
        bad["last_exit"]
            .as_str()
            .unwrap_or("")
            .contains("memory limit"),
        "{bad:#}"
    );
    assert!(bad["oom_kills"].as_u64().unwrap() >= 1, "{bad:#}");
    assert_eq!(bad["sandbox"]["memory_max_mib"], 32);
    assert_eq!(escaped(&r), 0);
    assert_eq!(port(&r, "out_good"), port(&r, "gen_good"));
}

#[test]
fn a_standby_that_takes_over_is_as_confined_as_a_fork() {
    // Each instance tries to write a file and is killed by its filter;
    // the restarts are standbys, which install the filter only when
    // handed their start: they must be killed the same way.
    let (r, written) = write_a_file(run_standby, "strict");
    assert_contained(&r, "open_file from a standby");
    let bad = nf(&r, "bad");
    // Three instances (`restarts` counts exits), each killed.
    assert_eq!(bad["restarts"], 3, "{bad:#}");
    assert_eq!(bad["sandbox_kills"], 3, "{bad:#}");
    assert!(bad["standby_starts"].as_u64().unwrap() >= 1, "{bad:#}");
    assert!(!written);
}

#[test]
fn a_standby_keeps_its_memory_limit() {
    // The standby has its own limit groups from its fork: what it
    // allocates after the take-over ends at the limit too, and is told
    // apart from any other kill.
    let r = run_standby(&hostile("alloc", "", "{ memory_max_mib: 32 }"));
    let bad = nf(&r, "bad");
    assert!(bad["standby_starts"].as_u64().unwrap() >= 1, "{bad:#}");
    assert_eq!(bad["oom_kills"], 3, "{bad:#}");
    assert!(
        bad["last_exit"]
            .as_str()
            .unwrap_or("")
            .contains("memory limit"),
        "{bad:#}"
    );
    assert_eq!(escaped(&r), 0);
}

#[test]
fn a_process_limit_stops_a_fork_loop_without_the_filters() {
    // Filters off, so only pids.max stands in the way: the fork fails
    // (EAGAIN) and the NF lives on, having escaped nowhere.
    let r = run(&hostile("fork", "", "{ seccomp: false, pids_max: 1 }"));
    assert_eq!(escaped(&r), 0, "{r:#}");
    assert!(nf(&r, "bad")["last_exit"].is_null(), "{r:#}");
}

#[test]
fn its_own_uid_keeps_it_from_other_processes_without_the_filters() {
    if !sluice_sys::sandbox::can_change_identity() {
        return;
    }
    // Filters off: the kernel's permission check alone refuses the probe
    // of the template (root), and the NF lives on.
    let r = run(&hostile("signal", "", "{ seccomp: false }"));
    assert_eq!(escaped(&r), 0, "{r:#}");
    assert!(nf(&r, "bad")["last_exit"].is_null(), "{r:#}");
}

#[test]
fn in_one_trust_domain_an_nf_reads_another_chain_s_packets() {
    // The control: both NFs in the platform's domain, so the other
    // chain's packets are in the offender's memory, and it finds them.
    let r = run(&hostile("peek", GOOD_DST, "strict"));
    assert_eq!(escaped(&r), 1, "{r:#}");
    assert!(nf(&r, "bad")["last_exit"].is_null(), "{r:#}");
}

#[test]
fn across_trust_domains_the_other_chain_s_packets_are_not_there() {
    let bad = format!(
        "{{ name: bad, type: hostile, isolation: process, domain: tenant, \
         config: {{ attack: peek, target: '{GOOD_DST}' }} }}"
    );
    let r = run_with("  domains: [ { name: tenant, buffers: 1024 } ]\n", &bad);
    let b = nf(&r, "bad");
    assert_eq!(escaped(&r), 0, "{r:#}");
    assert_eq!(b["domain"], "tenant");
    assert!(
        b["last_exit"].as_str().unwrap_or("").contains("SIGSEGV"),
        "the first byte it does not map stops it: {b:#}"
    );
    assert!(b["restarts"].as_u64().unwrap() >= 1, "{b:#}");
    // Its packets were copied into its domain: the handles never crossed.
    assert!(b["domain_copies"].as_u64().unwrap() >= 1, "{b:#}");
    assert_eq!(nf(&r, "good")["domain"], "platform");
    assert_eq!(nf(&r, "good")["domain_copies"], 0);
    assert_other_chain_whole(&r);
}

#[test]
fn in_one_trust_domain_an_nf_writes_the_platform_s_nf_slots() {
    // The control: in the platform's domain the page after the platform
    // words (its NFs' turn words) is the offender's to write.
    let r = run(&hostile("scribble", "", "strict"));
    assert_eq!(escaped(&r), 1, "{r:#}");
}

#[test]
fn across_trust_domains_another_domain_s_nf_slots_are_not_there() {
    let bad = "{ name: bad, type: hostile, isolation: process, domain: tenant, \
               config: { attack: scribble } }";
    let r = run_with("  domains: [ { name: tenant, buffers: 1024 } ]\n", bad);
    let b = nf(&r, "bad");
    assert_eq!(escaped(&r), 0, "{r:#}");
    assert!(
        b["last_exit"].as_str().unwrap_or("").contains("SIGSEGV"),
        "the platform domain's slots are withdrawn from it: {b:#}"
    );
    assert_other_chain_whole(&r);
    assert!(nf(&r, "good")["last_exit"].is_null(), "{r:#}");
}
