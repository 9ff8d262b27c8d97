//! The state directory: the desired state, persisted so a restarted
//! daemon runs what it ran before.
//!
//! `desired.json` holds `{"resource_version": N, "spec": {...}}`; it is
//! written to a temporary file, synced and renamed over the old one, so a
//! crash mid-write leaves the previous state, never half of one.
//!
//! Additions (`POST /v1/spec/additions`) are not written whole: writing
//! the whole desired state made each create cost what the platform holds
//! (a third of the control thread's time at 1,000 NFs was spent turning
//! the spec into JSON). Each is appended to `desired.journal` instead,
//! one JSON line `{"resource_version": N, "source": ..., "add": TEXT}`,
//! synced; a restart replays the lines above `desired.json`'s version on
//! top of it. Every whole save (any other change, or every
//! [`JOURNAL_LIMIT`] additions) starts the journal afresh. A line cut
//! short by a crash was never acknowledged: it is ignored.
//!
//! An addition's line is written, and its sync started, before the
//! addition is applied, so the sync overlaps the apply (`syncer.rs`);
//! the answer waits for both. An addition that then fails is revoked by a
//! second line, `{"revoked": N}`, synced before the refusal is answered:
//! the replay skips the addition it names. A crash before the revocation
//! is durable leaves the addition in the journal, but its request was
//! never answered, so its outcome was unknown to the client, as for any
//! request a crash cuts short.
//! `last-run.json` is the data plane's final report when the daemon last
//! stopped (its totals, drops and leaked buffers), written the same way.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The desired state as persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Persisted {
    /// The version of the whole spec in `desired.json`.
    pub version: u64,
    /// That spec as JSON text (`None`: nothing runs).
    pub spec: Option<String>,
    /// Additions made since, in order.
    pub additions: Vec<Addition>,
}

/// One addition in the journal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Addition {
    /// The version it made.
    pub resource_version: u64,
    /// Where its text came from (relative paths in it resolve there).
    pub source: String,
    /// Its text, as received.
    pub add: String,
}

/// A journal line that takes back the addition above it (its apply
/// failed after the line was written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Revoked {
    revoked: u64,
}

/// A daemon's state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    path: PathBuf,
}

const DESIRED: &str = "desired.json";
/// Additions since `desired.json` was written.
const JOURNAL: &str = "desired.journal";
/// Additions after which the desired state is written whole again.
pub const JOURNAL_LIMIT: usize = 256;
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

    /// The persisted desired state; `None` if there is none or it is not
    /// JSON.
    pub fn load(&self) -> Option<Persisted> {
        let text = std::fs::read_to_string(self.path.join(DESIRED)).ok()?;
        let v: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!("{}: {e}", self.path.join(DESIRED).display());
                return None;
            }
        };
        let version = v["resource_version"].as_u64()?;
        let spec = (!v["spec"].is_null()).then(|| v["spec"].to_string());
        Some(Persisted {
            version,
            spec,
            additions: self.journal(version),
        })
    }

    /// The journal's additions above `base`, in order. A line that does
    /// not read is the end of the journal (a crash cut it short: its
    /// change was never acknowledged).
    fn journal(&self, base: u64) -> Vec<Addition> {
        let Ok(text) = std::fs::read_to_string(self.path.join(JOURNAL)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for line in text.split_inclusive('\n') {
            let line = line.strip_suffix('\n');
            if let Some(r) = line.and_then(|l| serde_json::from_str::<Revoked>(l).ok()) {
                if out
                    .last()
                    .is_some_and(|a: &Addition| a.resource_version == r.revoked)
                {
                    out.pop();
                }
                continue;
            }
            let entry = line.and_then(|l| serde_json::from_str::<Addition>(l).ok());
            let Some(a) = entry else {
                tracing::warn!(
                    "{}: a line cut short ends the journal",
                    self.path.join(JOURNAL).display()
                );
                break;
            };
            if a.resource_version > base {
                out.push(a);
            }
        }
        out
    }

    /// Appends an addition made at `version` to the journal, synced.
    pub fn append(&self, a: &Addition) -> std::io::Result<()> {
        self.append_unsynced(a)?.sync_data()
    }

    /// Appends an addition to the journal, not yet synced: the caller
    /// syncs the file it gets back before it acknowledges the addition.
    pub fn append_unsynced(&self, a: &Addition) -> std::io::Result<std::fs::File> {
        self.append_line(serde_json::to_vec(a)?)
    }

    /// Takes back the addition of `version` the journal ends with (its
    /// apply failed), synced.
    pub fn revoke(&self, version: u64) -> std::io::Result<()> {
        let line = serde_json::to_vec(&Revoked { revoked: version })?;
        self.append_line(line)?.sync_data()
    }

    fn append_line(&self, mut line: Vec<u8>) -> std::io::Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        line.push(b'\n');
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(self.path.join(JOURNAL))?;
        f.write_all(&line)?;
        Ok(f)
    }

    /// Moves the desired state aside (to `desired.rejected.json`, replacing
    /// an older one) when it cannot be re-applied, so the next change does
    /// not overwrite what the operator had; returns where it went.
    pub fn set_aside(&self) -> std::io::Result<PathBuf> {
        let to = self.path.join(REJECTED);
        std::fs::rename(self.path.join(DESIRED), &to)?;
        // Its additions go with it (beside, under the same name).
        let journal = self.path.join(JOURNAL);
        if journal.exists() {
            std::fs::rename(journal, self.path.join(format!("{REJECTED}.journal")))?;
        }
        Ok(to)
    }

    /// Persists version `version` of the desired state, atomically
    /// (`Value::Null`: nothing runs).
    pub fn save(&self, version: u64, spec: &Value) -> std::io::Result<()> {
        let body = json!({ "resource_version": version, "spec": spec });
        self.write_atomically(DESIRED, &body)?;
        // The journal's lines are at or below `version` now: a crash
        // before this removal leaves lines the next load skips.
        match std::fs::remove_file(self.path.join(JOURNAL)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
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
        s.append(&addition(8)).unwrap();
        let kept = s.set_aside().unwrap();
        assert!(s.load().is_none());
        assert!(d.path().join("desired.rejected.json.journal").exists());
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
        assert_eq!(s.load().unwrap().version, 1);
    }

    #[test]
    fn the_last_saved_state_loads_back() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        assert!(s.load().is_none());
        s.save(3, &json!({"ports": []})).unwrap();
        s.save(4, &json!({"ports": [1]})).unwrap();
        let p = s.load().unwrap();
        assert_eq!(p.version, 4);
        assert_eq!(
            serde_json::from_str::<Value>(&p.spec.unwrap()).unwrap(),
            json!({"ports": [1]})
        );
        // Nothing running is a version too.
        s.save(5, &Value::Null).unwrap();
        let p = s.load().unwrap();
        assert_eq!((p.version, p.spec), (5, None));
    }

    fn addition(v: u64) -> Addition {
        Addition {
            resource_version: v,
            source: "add.yaml".into(),
            add: format!("nfs:\n  - {{ name: n{v}, type: forwarder }}\n"),
        }
    }

    #[test]
    fn additions_replay_above_the_whole_state_and_a_save_starts_afresh() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.save(3, &json!({"ports": []})).unwrap();
        for v in 4..=6 {
            s.append(&addition(v)).unwrap();
        }
        assert_eq!(
            s.load().unwrap().additions,
            [addition(4), addition(5), addition(6)]
        );
        // A whole save includes them: the journal starts afresh.
        s.save(6, &json!({"ports": [6]})).unwrap();
        assert!(s.load().unwrap().additions.is_empty());
        s.append(&addition(7)).unwrap();
        assert_eq!(s.load().unwrap().additions, [addition(7)]);
    }

    #[test]
    fn a_revoked_addition_is_not_replayed_and_its_version_is_taken_again() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.save(3, &json!({"ports": []})).unwrap();
        s.append(&addition(4)).unwrap();
        // 5 was written ahead of its apply, which failed.
        drop(s.append_unsynced(&addition(5)).unwrap());
        s.revoke(5).unwrap();
        // The next addition makes version 5.
        let mut again = addition(5);
        again.add = "nfs:\n  - { name: other, type: forwarder }\n".into();
        s.append(&again).unwrap();
        assert_eq!(s.load().unwrap().additions, [addition(4), again.clone()]);
        // A revocation names only the line just above it.
        s.revoke(4).unwrap();
        assert_eq!(s.load().unwrap().additions, [addition(4), again]);
    }

    #[test]
    fn lines_at_or_below_the_whole_state_and_a_torn_last_line_are_skipped() {
        let d = tempfile::tempdir().unwrap();
        let s = StateDir::open(d.path()).unwrap();
        s.save(5, &json!({"ports": []})).unwrap();
        // A crash between a whole save and the journal's removal.
        for v in [4, 5, 6] {
            s.append(&addition(v)).unwrap();
        }
        // A crash in the middle of an append.
        let mut torn = serde_json::to_vec(&addition(7)).unwrap();
        torn.truncate(torn.len() / 2);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.path().join(JOURNAL))
            .unwrap();
        f.write_all(&torn).unwrap();
        assert_eq!(s.load().unwrap().additions, [addition(6)]);
    }
}
