//! How a hosted NF is confined: the plan's form of `nfs[].sandbox`, what
//! this platform can actually give (a platform that is not root cannot
//! change an NF's uid or make namespaces), and the two steps the NF
//! process takes ([`sluice_sys::sandbox`] holds the mechanisms and the
//! reasons).

use serde::{Deserialize, Serialize};
use sluice_spec::{Namespace, Sandbox, SandboxUser};
use sluice_sys::sandbox::{Confinement, Namespaces, RunFilter, SANDBOX_ID_BASE};
use sluice_sys::{ExitStatus, LimitGroups};

/// What an NF process may do, as compiled from its spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxPlan {
    /// The run-phase system call allow-list.
    pub seccomp: bool,
    /// A uid and gid of its own.
    pub own_user: bool,
    /// Keeps the platform's capabilities.
    pub capabilities: bool,
    /// Network namespace.
    pub net: bool,
    /// IPC namespace.
    pub ipc: bool,
    /// UTS namespace.
    pub uts: bool,
    /// Mount namespace.
    pub mount: bool,
    /// Memory limit, MiB.
    pub memory_max_mib: Option<u32>,
    /// Process and thread limit.
    pub pids_max: Option<u32>,
}

impl SandboxPlan {
    /// The plan of `s`.
    pub fn of(s: &Sandbox) -> SandboxPlan {
        SandboxPlan {
            seccomp: s.seccomp,
            own_user: s.user == SandboxUser::Isolated,
            capabilities: s.capabilities,
            net: s.has(Namespace::Net),
            ipc: s.has(Namespace::Ipc),
            uts: s.has(Namespace::Uts),
            mount: s.has(Namespace::Mount),
            memory_max_mib: s.memory_max_mib,
            pids_max: s.pids_max,
        }
    }

    /// Its control-group limits.
    pub fn limits(&self) -> sluice_sys::Limits {
        sluice_sys::Limits {
            memory_bytes: self.memory_max_mib.map(|m| u64::from(m) << 20),
            pids: self.pids_max,
        }
    }

    /// No confinement at all (`sandbox: off`; limits are applied by the
    /// template, apart from this).
    pub fn is_off(&self) -> bool {
        SandboxPlan {
            memory_max_mib: None,
            pids_max: None,
            ..*self
        } == SandboxPlan::of(&Sandbox::off())
    }

    /// What a platform with (`privileged`) or without root rights gives:
    /// without, the NF keeps the platform's uid and gets no namespaces
    /// (the filters, `no_new_privs` and the capability drop need no
    /// rights).
    pub fn effective(&self, privileged: bool) -> SandboxPlan {
        if privileged {
            return *self;
        }
        SandboxPlan {
            own_user: false,
            net: false,
            ipc: false,
            uts: false,
            mount: false,
            ..*self
        }
    }

    /// The uid and gid of the NF in `slot` when it has its own.
    pub fn uid(&self, slot: u32) -> Option<u32> {
        self.own_user.then(|| SANDBOX_ID_BASE.saturating_add(slot))
    }

    /// The names of its namespaces.
    pub fn namespaces(&self) -> Vec<&'static str> {
        [
            (self.net, "net"),
            (self.ipc, "ipc"),
            (self.uts, "uts"),
            (self.mount, "mount"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect()
    }

    /// Step 1, first thing in the forked NF process.
    pub fn enter_build_phase(&self) -> std::io::Result<()> {
        if self.is_off() {
            return Ok(());
        }
        sluice_sys::sandbox::enter_build_phase()
    }

    /// Step 2, after the NF was built and opened its handles; `filter` is
    /// the template's compiled allow-list.
    pub fn confine(
        &self,
        slot: u32,
        template: sluice_sys::Pid,
        filter: Option<&RunFilter>,
    ) -> std::io::Result<()> {
        if self.is_off() {
            return Ok(());
        }
        let c = Confinement {
            user: self.uid(slot),
            namespaces: Namespaces {
                net: self.net,
                ipc: self.ipc,
                uts: self.uts,
                mount: self.mount,
            },
            drop_capabilities: !self.capabilities,
            seccomp: self.seccomp,
        };
        sluice_sys::sandbox::confine(&c, template, filter)
    }
}

/// What an NF's process may do, as a report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SandboxReport {
    /// The system call lists are on.
    pub seccomp: bool,
    /// Its uid (and gid), or `None` when it keeps the platform's.
    pub uid: Option<u32>,
    /// It keeps the platform's capabilities.
    pub capabilities: bool,
    /// Its own namespaces.
    pub namespaces: Vec<String>,
    /// Its memory limit, MiB.
    pub memory_max_mib: Option<u32>,
    /// Its process and thread limit.
    pub pids_max: Option<u32>,
}

impl SandboxPlan {
    /// The report of an NF in `slot` confined by `self`.
    pub fn report(&self, slot: u32) -> SandboxReport {
        SandboxReport {
            seccomp: self.seccomp,
            uid: self.uid(slot),
            capabilities: self.capabilities,
            namespaces: self.namespaces().into_iter().map(String::from).collect(),
            memory_max_mib: self.memory_max_mib,
            pids_max: self.pids_max,
        }
    }
}

/// In the template, before the fork: NF `slot`'s limit groups, made with
/// `plan`'s limits (the template's groups opened at the first NF that has
/// any); the `cgroup.procs` files the NF joins. Empty without limits.
pub(super) fn prepare_limits(
    groups: &mut Option<LimitGroups>,
    slot: u32,
    plan: &SandboxPlan,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    let limits = plan.limits();
    if !limits.any() {
        return Ok(Vec::new());
    }
    if groups.is_none() {
        *groups = Some(LimitGroups::open()?);
    }
    groups
        .as_ref()
        .map_or(Ok(Vec::new()), |g| g.prepare(slot, &limits))
}

/// In the template, once the NF in `slot` was reaped: removes its limit
/// groups and says how it ended. A SIGKILL with an OOM kill counted in
/// its memory group is the kernel enforcing its memory limit.
pub(super) fn release_limits(groups: &LimitGroups, slot: u32, status: ExitStatus) -> ExitStatus {
    // 9: SIGKILL on every Linux architecture.
    let status = if status == ExitStatus::Signal(9) && groups.oom_killed(slot) {
        ExitStatus::OutOfMemory
    } else {
        status
    };
    groups.remove(slot);
    status
}

impl Default for SandboxPlan {
    /// `strict`.
    fn default() -> SandboxPlan {
        SandboxPlan::of(&Sandbox::strict())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_off_and_what_a_plain_user_gets() {
        let strict = SandboxPlan::default();
        assert!(strict.seccomp && strict.own_user && !strict.capabilities);
        assert_eq!(strict.namespaces(), ["ipc", "uts"]);
        assert_eq!(strict.uid(3), Some(SANDBOX_ID_BASE + 3));
        assert!(!strict.is_off());
        let off = SandboxPlan::of(&Sandbox::off());
        assert!(off.is_off() && off.uid(3).is_none());
        let plain = strict.effective(false);
        assert!(plain.seccomp && !plain.own_user && plain.namespaces().is_empty());
        assert_eq!(strict.effective(true), strict);
    }
}
