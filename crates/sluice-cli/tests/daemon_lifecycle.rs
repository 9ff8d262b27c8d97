//! The daemon's life: `kill -9` while process NFs run leaves no NF
//! process, template or shared memory behind, and a daemon restarted on
//! the same state directory runs the desired state again; SIGTERM stops
//! it cleanly and removes its socket.

mod daemon_util;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use daemon_util::{quickstart, Daemon, Options};

/// Pids of the descendants of `pid` and their command names.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        // Children belong to the thread that started them: read every
        // thread's list.
        let mut children = String::new();
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for t in tasks.flatten() {
                children += &std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
                children.push(' ');
            }
        }
        for c in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let name = std::fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
            found.push((c, name.trim().to_string()));
            frontier.push(c);
        }
    }
    found
}

/// Whether `pid` still runs (a zombie does not).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("X");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

/// Names in /dev/shm.
fn dev_shm() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Shared memory `pid` maps: (memfd names, /dev/shm paths).
fn shared_maps(pid: u32) -> (BTreeSet<String>, BTreeSet<String>) {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let mut memfd = BTreeSet::new();
    let mut shm = BTreeSet::new();
    for l in maps.lines() {
        let Some(path) = l.split_whitespace().nth(5) else {
            continue;
        };
        if let Some(name) = path.strip_prefix("/memfd:") {
            memfd.insert(name.to_string());
        } else if path.starts_with("/dev/shm/") {
            shm.insert(path.to_string());
        }
    }
    (memfd, shm)
}

/// Waits until `n` NF processes and a template run under `pid`.
fn wait_nf_processes(pid: u32, n: usize) -> Vec<(u32, String)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = descendants(pid);
        let nfs = d.iter().filter(|(_, c)| c.starts_with("nf:")).count();
        let templates = d.iter().filter(|(_, c)| c == "sluice-template").count();
        if nfs >= n && templates >= 1 {
            return d;
        }
        assert!(
            Instant::now() < deadline,
            "want {n} NF processes and a template under {pid}, found {d:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill_9_leaves_no_orphans_nor_shared_memory_and_a_restart_resumes_traffic() {
    let shm_before = dev_shm();
    let dir = tempfile::tempdir().unwrap();
    let mut d = Daemon::start_in(dir.path(), Options::default());
    let (text, path) = quickstart();
    d.apply(&text, &path);
    d.wait_traffic(20);
    let version = d.get("/v1/spec")["resource_version"].clone();
    let daemon = d.pid();
    let procs = wait_nf_processes(daemon, 2);
    let ours: Vec<(u32, String)> = procs
        .iter()
        .filter(|(_, c)| c.starts_with("nf:") || c == "sluice-template")
        .cloned()
        .collect();
    for nf in ["nf:acl", "nf:mon"] {
        assert!(ours.iter().any(|(_, c)| c == nf), "no {nf} in {procs:?}");
    }
    // The packet memory is an anonymous memfd every process maps; none of
    // them maps anything under /dev/shm.
    let mut shm_used = BTreeSet::new();
    for pid in std::iter::once(daemon).chain(ours.iter().map(|(p, _)| *p)) {
        let (memfd, shm) = shared_maps(pid);
        assert!(
            memfd.iter().any(|m| m.starts_with("sluice-arena")),
            "{pid} does not map the arena memfd: {memfd:?}"
        );
        shm_used.extend(shm);
    }
    assert!(
        shm_used.is_empty(),
        "processes map /dev/shm files: {shm_used:?}"
    );

    d.kill9();
    // The NFs and templates die with the daemon (parent-death signals,
    // closed control sockets), within a short grace time.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<&(u32, String)> = ours.iter().filter(|(p, _)| running(*p)).collect();
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "5 s after kill -9 of the daemon these still run: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let leftover: Vec<String> = dev_shm().difference(&shm_before).cloned().collect();
    assert!(leftover.is_empty(), "/dev/shm leftovers: {leftover:?}");
    // The socket file stays behind (nobody removed it); the next daemon
    // replaces it since nobody answers on it.
    assert!(d.socket.exists());

    let d2 = Daemon::start_in(dir.path(), Options::default());
    let doc = d2.get("/v1/spec");
    assert_eq!(
        doc["resource_version"], version,
        "the version did not survive"
    );
    assert_eq!(doc["spec"]["nfs"][0]["name"], "acl");
    let first = d2.wait_traffic(20);
    std::thread::sleep(Duration::from_millis(500));
    let second = d2.packets_out();
    assert!(
        second > first,
        "traffic does not flow after the restart: {first} then {second}"
    );
    let procs = wait_nf_processes(d2.pid(), 2);
    for nf in ["nf:acl", "nf:mon"] {
        assert!(procs.iter().any(|(_, c)| c == nf), "no {nf} in {procs:?}");
    }
    // None of the new processes is an old one that survived.
    for (p, c) in &procs {
        assert!(
            !ours.iter().any(|(o, _)| o == p),
            "{p} ({c}) is from before the kill"
        );
    }
}

#[test]
fn sigterm_stops_the_nfs_and_removes_the_socket() {
    let mut d = Daemon::start();
    let (text, path) = quickstart();
    d.apply(&text, &path);
    d.wait_traffic(20);
    let procs: Vec<(u32, String)> = wait_nf_processes(d.pid(), 2)
        .into_iter()
        .filter(|(_, c)| c.starts_with("nf:") || c == "sluice-template")
        .collect();
    let status = d.stop(15).expect("the daemon should stop on SIGTERM");
    assert!(status.success(), "exit status {status}:\n{}", d.log_text());
    assert!(!d.socket.exists(), "the socket file is still there");
    let left: Vec<&(u32, String)> = procs.iter().filter(|(p, _)| running(*p)).collect();
    assert!(left.is_empty(), "still running after SIGTERM: {left:?}");
    let log = d.log_text();
    assert!(log.contains("0 leaked buffers"), "{log}");
    // The desired state is kept for the next start.
    assert!(d.state_dir.join("desired.json").exists());
}

#[test]
fn a_restart_with_an_unloadable_state_starts_empty_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    std::fs::write(
        state.join("desired.json"),
        r#"{"resource_version": 7, "spec": {"ports": [{"name": "p", "kind": "nonsense"}]}}"#,
    )
    .unwrap();
    let d = Daemon::start_in(dir.path(), Options::default());
    let doc = d.get("/v1/spec");
    assert!(doc["spec"].is_null(), "{doc:#}");
    assert!(
        d.log_text().contains("does not load"),
        "the log should say why: {}",
        d.log_text()
    );
}
