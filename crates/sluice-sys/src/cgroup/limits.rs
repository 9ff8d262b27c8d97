//! Memory and process-count limits per NF process: one control group per
//! NF under the memory and pids controllers (cgroup v2 `memory.max` and
//! `pids.max`; on hosts whose controllers are still on the legacy
//! hierarchy, v1's `memory.limit_in_bytes` and `pids.max`).
//!
//! The NF template owns them: it makes an NF's group and writes its limits
//! before it forks the NF, the NF joins the group first thing (so its own
//! code never runs unlimited), and after the NF is reaped the template
//! reads whether the kernel's OOM killer ended it, then removes the group.
//!
//! Layout: `<controller>/<the template's group>/sluice-<pid>-limits/nf-<key>`,
//! the middle group holding no process (cgroup v2's leaf rule). Groups left
//! by a template that was killed are removed by the next one (the same
//! sweep as the CPU groups').

use std::io;
use std::path::{Path, PathBuf};

use super::{locate, sweep, Flavor};

/// The limits of one NF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Memory it may use (anonymous and page cache), bytes; swap is not
    /// given on top.
    pub memory_bytes: Option<u64>,
    /// Processes and threads it may have.
    pub pids: Option<u32>,
}

impl Limits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.memory_bytes.is_some() || self.pids.is_some()
    }
}

/// One controller's root for this process's NFs.
#[derive(Debug)]
struct Root {
    flavor: Flavor,
    dir: PathBuf,
}

/// The limit groups of one template; removes them when dropped.
#[derive(Debug)]
pub struct LimitGroups {
    memory: Option<Root>,
    pids: Option<Root>,
}

impl LimitGroups {
    /// Finds the memory and pids controllers and makes this process's
    /// groups under them. An error names what is missing.
    pub fn open() -> io::Result<LimitGroups> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
        let own = std::fs::read_to_string("/proc/self/cgroup")?;
        let make = |controller: &str| -> io::Result<Option<Root>> {
            let Some((flavor, parent)) = locate(&mountinfo, &own, controller) else {
                return Ok(None);
            };
            sweep(&parent);
            let dir = parent.join(format!("sluice-{}-limits", std::process::id()));
            if flavor == Flavor::V2 {
                std::fs::write(
                    parent.join("cgroup.subtree_control"),
                    format!("+{controller}"),
                )?;
            }
            match std::fs::create_dir(&dir) {
                Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                _ => {}
            }
            if flavor == Flavor::V2 {
                std::fs::write(dir.join("cgroup.subtree_control"), format!("+{controller}"))?;
            }
            Ok(Some(Root { flavor, dir }))
        };
        Ok(LimitGroups {
            memory: make("memory")?,
            pids: make("pids")?,
        })
    }

    fn group(root: &Root, key: u32) -> PathBuf {
        root.dir.join(format!("nf-{key}"))
    }

    /// Makes NF `key`'s groups with `limits` (an unset limit is "max");
    /// returns the `cgroup.procs` files the NF must join. An error when a
    /// limit is set whose controller this host does not offer.
    pub fn prepare(&self, key: u32, limits: &Limits) -> io::Result<Vec<PathBuf>> {
        let mut join = Vec::new();
        if let Some(bytes) = limits.memory_bytes {
            let root = self.memory.as_ref().ok_or_else(|| missing("memory"))?;
            let g = Self::group(root, key);
            make_dir(&g)?;
            match root.flavor {
                Flavor::V2 => {
                    std::fs::write(g.join("memory.max"), bytes.to_string())?;
                    // Absent without swap accounting: nothing to add then.
                    let _ = std::fs::write(g.join("memory.swap.max"), "0");
                }
                Flavor::V1 => {
                    std::fs::write(g.join("memory.limit_in_bytes"), bytes.to_string())?;
                    let _ =
                        std::fs::write(g.join("memory.memsw.limit_in_bytes"), bytes.to_string());
                }
            }
            join.push(g.join("cgroup.procs"));
        }
        if let Some(n) = limits.pids {
            let root = self.pids.as_ref().ok_or_else(|| missing("pids"))?;
            let g = Self::group(root, key);
            make_dir(&g)?;
            std::fs::write(g.join("pids.max"), n.to_string())?;
            join.push(g.join("cgroup.procs"));
        }
        Ok(join)
    }

    /// In the NF process, first thing: moves the calling process into the
    /// groups [`Self::prepare`] made.
    pub fn join(procs: &[PathBuf]) -> io::Result<()> {
        for p in procs {
            std::fs::write(p, "0")?;
        }
        Ok(())
    }

    /// Whether the kernel's OOM killer killed a process of NF `key`'s
    /// memory group (read after the NF was reaped, before [`Self::remove`]).
    pub fn oom_killed(&self, key: u32) -> bool {
        let Some(root) = &self.memory else {
            return false;
        };
        let file = match root.flavor {
            Flavor::V2 => "memory.events",
            Flavor::V1 => "memory.oom_control",
        };
        std::fs::read_to_string(Self::group(root, key).join(file))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse::<u64>().ok())
            })
            .is_some_and(|n| n > 0)
    }

    /// Removes NF `key`'s groups (its process is gone).
    pub fn remove(&self, key: u32) {
        for root in [&self.memory, &self.pids].into_iter().flatten() {
            let _ = std::fs::remove_dir(Self::group(root, key));
        }
    }
}

impl Drop for LimitGroups {
    fn drop(&mut self) {
        for root in [&self.memory, &self.pids].into_iter().flatten() {
            if let Ok(entries) = std::fs::read_dir(&root.dir) {
                for e in entries.flatten() {
                    if e.path().is_dir() {
                        let _ = std::fs::remove_dir(e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(&root.dir);
        }
    }
}

fn make_dir(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

fn missing(controller: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no {controller} controller this process may use (cgroup v2 or v1 {controller})"),
    )
}
