//! CPU weights through the kernel's cpu controller: one control group per
//! NF process under one group per platform, each weighted, so the kernel
//! shares a core between NFs in proportion to their weights, by CPU time
//! (HyperNF, seed 000 §3; cgroup v2 `cpu.weight`, or v1 `cpu.shares` on
//! hosts whose cpu controller is still on the legacy hierarchy).
//!
//! Why groups and not nice values: a process that yields after every
//! batch (an NF polling on its own) gives its turn away however heavy its
//! weight, so a cheap NF gets one batch's worth of CPU per round and an
//! expensive one the rest (seed 000 §4: ~80 %). A group is scheduled as
//! one entity: a yield inside it does not give the group's time away.
//!
//! Layout: `<cpu controller>/<the platform's own group>/sluice-<pid>-<n>/nf-<key>`
//! (n: one per [`CpuGroups`] of the process, e.g. one per worker; key: the
//! NF's slot). The `sluice-<pid>-<n>` group holds no process, so
//! cgroup v2's rule that only leaves hold processes is kept. A group left
//! by a platform that was killed is removed by the next one
//! ([`CpuGroups::open`] sweeps groups whose platform is gone).

use std::io;
use std::path::{Path, PathBuf};

use crate::Pid;

/// The weight every NF has unless given another (cgroup v2's default).
pub const DEFAULT_WEIGHT: u32 = 100;
/// The lightest and heaviest weight (cgroup v2's `cpu.weight` range).
pub const WEIGHTS: std::ops::RangeInclusive<u32> = 1..=10_000;

/// Which interface the kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// cgroup v2: `cpu.weight`, 1..=10000, default 100.
    V2,
    /// cgroup v1: `cpu.shares`, 2..=262144, default 1024.
    V1,
}

impl Flavor {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::V2 => "cgroup-v2",
            Flavor::V1 => "cgroup-v1",
        }
    }

    /// The file that holds a group's weight, and what to write to it for
    /// `weight` (on the v2 scale). v1's shares are v2's weights × 10.24,
    /// the ratio of their defaults, so relative weights are the same.
    fn weight_file(self, weight: u32) -> (&'static str, String) {
        let w = weight.clamp(*WEIGHTS.start(), *WEIGHTS.end());
        match self {
            Flavor::V2 => ("cpu.weight", w.to_string()),
            Flavor::V1 => ("cpu.shares", (u64::from(w) * 1024 / 100).max(2).to_string()),
        }
    }
}

/// The platform's CPU groups; removes them when dropped.
#[derive(Debug)]
pub struct CpuGroups {
    flavor: Flavor,
    /// `.../sluice-<pid>`.
    root: PathBuf,
    /// Keys with a group.
    groups: Vec<u32>,
}

impl CpuGroups {
    /// Creates this platform's group under its own cpu group, after
    /// removing those of platforms that are gone. An error when the kernel
    /// has no cpu controller this process may use (not root, a container
    /// without delegation, a v2 group that already holds processes).
    pub fn open() -> io::Result<CpuGroups> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        let own = std::fs::read_to_string("/proc/self/cgroup")?;
        let (flavor, parent) = locate(&mountinfo, &own, "cpu").ok_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "no cpu controller is mounted")
        })?;
        sweep(&parent);
        static OPENED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = parent.join(format!("sluice-{}-{n}", std::process::id()));
        if flavor == Flavor::V2 {
            // The parent must hand the cpu controller to its children.
            std::fs::write(parent.join("cgroup.subtree_control"), "+cpu")?;
        }
        match std::fs::create_dir(&root) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        if flavor == Flavor::V2 {
            if let Err(e) = std::fs::write(root.join("cgroup.subtree_control"), "+cpu") {
                let _ = std::fs::remove_dir(&root);
                return Err(e);
            }
        }
        Ok(CpuGroups {
            flavor,
            root,
            groups: Vec::new(),
        })
    }

    /// The interface in use.
    pub fn flavor(&self) -> Flavor {
        self.flavor
    }

    fn dir(&self, key: u32) -> PathBuf {
        self.root.join(format!("nf-{key}"))
    }

    /// Puts process `pid` in group `key` (created on first use) with
    /// `weight`.
    pub fn place(&mut self, key: u32, pid: Pid, weight: u32) -> io::Result<()> {
        let dir = self.dir(key);
        if !self.groups.contains(&key) {
            match std::fs::create_dir(&dir) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            self.groups.push(key);
        }
        self.set_weight(key, weight)?;
        std::fs::write(dir.join("cgroup.procs"), pid.as_raw_nonzero().to_string())
    }

    /// Changes the weight of group `key`.
    pub fn set_weight(&self, key: u32, weight: u32) -> io::Result<()> {
        let (file, value) = self.flavor.weight_file(weight);
        std::fs::write(self.dir(key).join(file), value)
    }

    /// The weight file's content of group `key`, as the kernel shows it.
    pub fn weight_raw(&self, key: u32) -> io::Result<String> {
        let (file, _) = self.flavor.weight_file(DEFAULT_WEIGHT);
        Ok(std::fs::read_to_string(self.dir(key).join(file))?
            .trim()
            .to_string())
    }

    /// The directory of group `key` (for tests and diagnostics).
    pub fn path(&self, key: u32) -> PathBuf {
        self.dir(key)
    }

    /// Moves `pid` back to the platform's own group (its weight no longer
    /// counts).
    pub fn release(&self, pid: Pid) -> io::Result<()> {
        std::fs::write(
            self.parent().join("cgroup.procs"),
            pid.as_raw_nonzero().to_string(),
        )
    }

    fn parent(&self) -> &Path {
        self.root.parent().unwrap_or(&self.root)
    }

    /// Removes group `key` once its process has exited; `false` while it
    /// still holds one (the caller retries later).
    pub fn remove(&mut self, key: u32) -> bool {
        let gone = match std::fs::remove_dir(self.dir(key)) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        if gone {
            self.groups.retain(|&k| k != key);
        }
        gone
    }
}

impl Drop for CpuGroups {
    fn drop(&mut self) {
        for key in std::mem::take(&mut self.groups) {
            // Processes still inside (a platform stopping before its NFs
            // exited) go back to the platform's group, so none is left.
            let dir = self.dir(key);
            let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines() {
                let _ = std::fs::write(self.parent().join("cgroup.procs"), pid);
            }
            let _ = std::fs::remove_dir(dir);
        }
        let _ = std::fs::remove_dir(&self.root);
    }
}

/// Where `controller` is and this process's group in it: v2 when the
/// unified hierarchy offers it, else the v1 hierarchy that has it.
fn locate(mountinfo: &str, own: &str, controller: &str) -> Option<(Flavor, PathBuf)> {
    let mut v1 = None;
    let mut v2 = None;
    for line in mountinfo.lines() {
        // "36 25 0:31 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mount) = left.split_ascii_whitespace().nth(4) else {
            continue;
        };
        let mut r = right.split_ascii_whitespace();
        let fstype = r.next().unwrap_or("");
        let opts = r.nth(1).unwrap_or("");
        match fstype {
            "cgroup2" => v2 = Some(PathBuf::from(mount)),
            "cgroup" if opts.split(',').any(|o| o == controller) => v1 = Some(PathBuf::from(mount)),
            _ => {}
        }
    }
    let group = |controller: Option<&str>| {
        own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, list, path) = (f.next()?, f.next()?, f.next()?);
            let matches = match controller {
                None => list.is_empty(),
                Some(c) => list.split(',').any(|x| x == c),
            };
            matches.then(|| path.trim_start_matches('/').to_string())
        })
    };
    if let (Some(mount), Some(path)) = (&v2, group(None)) {
        let dir = mount.join(path);
        let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).ok();
        if controllers.is_some_and(|c| c.split_ascii_whitespace().any(|x| x == controller)) {
            return Some((Flavor::V2, dir));
        }
    }
    Some((Flavor::V1, v1?.join(group(Some(controller))?)))
}

/// Removes the groups of platforms that are gone (killed before they could
/// clean up); groups that still hold a process stay.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("sluice-"))
            .and_then(|p| p.split('-').next()?.parse::<i32>().ok())
        else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(children) = std::fs::read_dir(e.path()) {
            for c in children.flatten() {
                if c.path().is_dir() {
                    let _ = std::fs::remove_dir(c.path());
                }
            }
        }
        let _ = std::fs::remove_dir(e.path());
    }
}

mod limits;
pub use limits::{LimitGroups, Limits};

#[cfg(test)]
mod tests;
