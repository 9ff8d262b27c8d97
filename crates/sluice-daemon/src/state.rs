//! The state directory: the desired state, persisted so a restarted
//! daemon runs what it ran before.
//!
//! `desired.json` holds `{"resource_version": N, "spec": {...}}`; it is
//! written to a temporary file, synced and renamed over the old one, so a
//! crash mid-write leaves the previous state, never half of one.
//! `last-run.json` is the data plane's final report when the daemon last
//! stopped (its totals, drops and leaked buffers), written the same way.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// A daemon's state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

const DESIRED: &str = "desired.json";
/// Where a desired state that could not be re-applied is kept.
const REJECTED: &str = "desired.rejected.json";
/// The final report of the daemon's last stop.
pub const LAST_RUN: &str = "last-run.json";

impl StateDir {
    /// Uses (and creates, mode 0700) `path`.
    pub fn open(path: &Path) -> std::io::Result<StateDir> {
        std::fs::create_dir_all(path)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
        Ok(StateDir {
            path: path.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The persisted desired state: its version and the spec as JSON text
    /// (`None`: nothing, after everything moved away).
    pub fn load(&self) -> Option<(u64, Option<String>)> {
        let text = std::fs::read_to_string(self.path.join(DESIRED)).ok()?;
        let v: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!("{}: {e}", self.path.join(DESIRED).display());
                return None;
            }
        };
        let spec = (!v["spec"].is_null()).then(|| v["spec"].to_string());
        Some((v["resource_version"].as_u64()?, spec))
    }

    /// Moves the desired state aside (to `desired.rejected.json`, replacing
    /// an older one) when it cannot be re-applied, so the next change does
    /// not overwrite what the operator had; returns where it went.
    pub fn set_aside(&self) -> std::io::Result<PathBuf> {
        let to = self.path.join(REJECTED);
        std::fs::rename(self.path.join(DESIRED), &to)?;
        Ok(to)
    }

    /// Persists version `version` of the desired state, atomically
    /// (`Value::Null`: nothing runs).
    pub fn save(&self, version: u64, spec: &Value) -> std::io::Result<()> {
        let body = json!({ "resource_version": version, "spec": spec });
        self.write_atomically(DESIRED, &body)
    }

    /// Keeps the data plane's final report (`last-run.json`), atomically.
    pub fn save_last_run(&self, report: &Value) -> std::io::Result<()> {
        self.write_atomically(LAST_RUN, report)
    }

    fn write_atomically(&self, name: &str, body: &Value) -> std::io::Result<()> {
        let tmp = self.path.join(format!("{name}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(serde_json::to_string_pretty(body)?.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, self.path.join(name))?;
        if let Ok(d) = std::fs::File::open(&self.path) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_set_aside_no_longer_loads_and_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.save(7, &json!({"ports": [1]})).unwrap();
        let kept = s.set_aside().unwrap();
        assert!(s.load().is_none());
        let text = std::fs::read_to_string(kept).unwrap();
        assert!(text.contains("\"resource_version\": 7"), "{text}");
    }

    #[test]
    fn the_last_run_is_kept_whole_beside_the_desired_state() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.save(1, &json!({"ports": []})).unwrap();
        s.save_last_run(&json!({"packets_in": 5, "leaked_buffers": 0}))
            .unwrap();
        let text = std::fs::read_to_string(d.path().join(LAST_RUN)).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["packets_in"], 5);
        assert!(!d.path().join(format!("{LAST_RUN}.tmp")).exists());
        assert_eq!(s.load().unwrap().0, 1);
    }

    #[test]
    fn the_last_saved_state_loads_back() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        assert!(s.load().is_none());
        s.save(3, &json!({"ports": []})).unwrap();
        s.save(4, &json!({"ports": [1]})).unwrap();
        let (v, text) = s.load().unwrap();
        assert_eq!(v, 4);
        assert_eq!(
            serde_json::from_str::<Value>(&text.unwrap()).unwrap(),
            json!({"ports": [1]})
        );
        // Nothing running is a version too.
        s.save(5, &Value::Null).unwrap();
        assert_eq!(s.load(), Some((5, None)));
    }
}
