//! The web dashboard works in a real browser: headless Chromium opens
//! `/?token=...` on a daemon's TCP listener (the daemon answers with the
//! token cookie and a redirect to `/`), runs `app.js`, which fetches
//! `/v1/chains` and `/v1/stats` with that cookie, and the DOM it dumps
//! draws every chain of the applied spec, hop by hop, with the counters
//! the API returned. Skips with a message when Chromium is not installed;
//! the browser is killed if it has not finished within a minute.

mod daemon_util;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use daemon_util::{Daemon, Options};

/// Two chains from two generators into one sink, with inline NFs (light
/// on a shared machine). Names no other part of the page could contain.
const SPEC: &str = "settings:
  buffers: 4096
ports:
  - { name: wan, kind: generator, flows: 8, protocol: udp, size: 64, rate_pps: 2000 }
  - { name: ops, kind: generator, flows: 4, protocol: tcp, size: 64, rate_pps: 500 }
  - { name: lan, kind: sink }
nfs:
  - { name: guard, type: acl, isolation: inline, config: { default: accept } }
  - { name: meter, type: monitor, isolation: inline }
  - { name: tally, type: forwarder, isolation: inline }
chains:
  - { name: edge, from: wan, nfs: [guard, meter], to: lan }
  - { name: audit, from: ops, nfs: [tally], to: lan }
";

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// How long the browser may take before it is killed.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

/// The Chromium binary, if one is installed.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Loads `url` in headless Chromium and returns the DOM after the page's
/// scripts have run for a few seconds of virtual time.
fn dump_dom(browser: &Path, url: &str, dir: &Path) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let out_file = dir.join("dom.html");
    let err_file = dir.join("chromium.log");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--virtual-time-budget=4000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg(url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_file).unwrap())
        .stderr(std::fs::File::create(&err_file).unwrap())
        // Its own process group, so a hung browser goes with its helpers.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", browser.display()))?;
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            // The leader is not reaped yet, so its group id is still ours.
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            return Err(format!(
                "chromium did not finish within {BROWSER_TIMEOUT:?}; its log:\n{}",
                std::fs::read_to_string(&err_file).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = std::fs::read_to_string(&out_file).unwrap_or_default();
    if !status.success() || dom.is_empty() {
        return Err(format!(
            "chromium exited with {status} and {} bytes of DOM; its log:\n{}",
            dom.len(),
            std::fs::read_to_string(&err_file).unwrap_or_default()
        ));
    }
    Ok(dom)
}

/// The `data-name`s of the nodes drawn for chain `chain`, left to right.
fn hops(dom: &str, chain: &str) -> Vec<String> {
    let start = dom
        .find(&format!("data-chain=\"{chain}\""))
        .unwrap_or_else(|| panic!("no chain {chain} on the page:\n{dom}"));
    let section = &dom[start..];
    let end = section[1..]
        .find("data-chain=\"")
        .map_or(section.len(), |i| i + 1);
    section[..end]
        .split("data-name=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap_or_default().to_string())
        .collect()
}

/// The number after `label ` in the summary line (`… · in 1234 · …`).
fn summary_number(dom: &str, label: &str) -> u64 {
    let summary = dom
        .split("<div id=\"summary\">")
        .nth(1)
        .and_then(|s| s.split("</div>").next())
        .unwrap_or_else(|| panic!("no summary on the page:\n{dom}"));
    summary
        .split(" · ")
        .find_map(|part| part.strip_prefix(&format!("{label} ")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `{label} N` in the summary {summary:?}"))
}

#[test]
fn the_dashboard_draws_the_applied_chains_in_a_browser() {
    let Some(browser) = chromium() else {
        eprintln!(
            "skipping: chromium is not installed (no chromium or chromium-browser in PATH; \
             `apt-get install chromium`)"
        );
        return;
    };
    let d = Daemon::start_with(Options {
        token: Some(TOKEN.into()),
        args: Vec::new(),
    });
    let source = d.dir.join("dashboard.yaml");
    std::fs::write(&source, SPEC).unwrap();
    d.apply(SPEC, &source);
    d.wait_traffic(30);
    let (addr, token) = d.tcp.clone().unwrap();
    // Without the token, the page itself is refused.
    assert_eq!(d.tcp_req("GET", "/", &[]).status, 401);

    let dom = dump_dom(&browser, &format!("http://{addr}/?token={token}"), &d.dir)
        .unwrap_or_else(|e| panic!("{e}\nthe daemon's log:\n{}", d.log_text()));

    // app.js ran to the end of a refresh, and no request failed.
    assert!(
        dom.contains("data-ready=\"1\""),
        "the dashboard never completed a refresh:\n{dom}"
    );
    assert!(
        dom.contains("<div id=\"error\"></div>"),
        "the dashboard shows an error:\n{dom}"
    );
    // Every chain, as input port → its NFs → output port.
    assert_eq!(
        hops(&dom, "edge"),
        ["wan", "guard", "meter", "lan"],
        "{dom}"
    );
    assert_eq!(hops(&dom, "audit"), ["ops", "tally", "lan"], "{dom}");
    // The summary comes from /v1/chains and /v1/stats: two chains, three
    // NFs, and the packets that had already flowed.
    assert!(dom.contains("2 chains · 3 NFs"), "{dom}");
    assert!(summary_number(&dom, "in") > 0, "{dom}");
    assert!(summary_number(&dom, "out") > 0, "{dom}");
}
