//! What starting a process costs without sluice, for the benchmarks that
//! measure sluice's NF creation beside it: fork + exec of a minimal
//! program, and an OCI container start with Debian's `crun`.

use std::time::Instant;

use serde_json::Value;

use crate::bench_daemon::{spread, Spread};

/// fork + exec of `/bin/true` from this process, 200 times, µs.
pub(crate) fn fork_exec_us() -> Spread {
    let mut v = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        // `spawn` returns once the child has exec'd (std waits on a
        // close-on-exec pipe), so this is fork + exec.
        let Ok(mut child) = std::process::Command::new("/bin/true").spawn() else {
            continue;
        };
        v.push(t.elapsed().as_secs_f64() * 1e6);
        let _ = child.wait();
    }
    spread(v)
}

/// Runs `/bin/true` in an OCI container 20 times with crun, the host's
/// root as the container's (read-only) root file system.
pub(crate) fn crun_us() -> (Option<Spread>, Option<String>) {
    let dir = std::env::temp_dir().join(format!("sluice-bench-crun-{}", std::process::id()));
    let result = (|| -> Result<Spread, String> {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("crun")
            .arg("spec")
            .current_dir(&dir)
            .output()
            .map_err(|e| format!("crun is not installed ({e})"))?;
        if !out.status.success() {
            return Err(format!(
                "crun spec failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let path = dir.join("config.json");
        let mut config: Value =
            serde_json::from_slice(&std::fs::read(&path).map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        config["root"] = serde_json::json!({ "path": "/", "readonly": true });
        config["process"]["args"] = serde_json::json!(["/bin/true"]);
        config["process"]["terminal"] = Value::Bool(false);
        std::fs::write(&path, config.to_string()).map_err(|e| e.to_string())?;
        let mut v = Vec::new();
        for i in 0..20 {
            let t = Instant::now();
            let out = std::process::Command::new("crun")
                .args(["run", "--bundle"])
                .arg(&dir)
                .arg(format!("sluice-bench-{}-{i}", std::process::id()))
                .stdin(std::process::Stdio::null())
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!(
                    "crun run failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            v.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(spread(v))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    match result {
        Ok(s) => (Some(s), None),
        Err(e) => (None, Some(e)),
    }
}
