//! An NF's sandbox (`nfs[].sandbox`): what a process NF may do.
//!
//! Process NFs are sandboxed unless their spec relaxes it:
//!
//! ```yaml
//! sandbox: strict          # the default: every field below at its default
//! sandbox: off             # no sandbox (the NF runs as the platform does)
//! sandbox:                 # or field by field; unnamed fields keep their default
//!   seccomp: true          # the system call lists (default true)
//!   user: isolated         # isolated: a uid and gid of its own (default) | platform
//!   capabilities: false    # keep the platform's capabilities (default false)
//!   namespaces: [ipc, uts] # default; also net (~0.6 ms per start) and mount; [] none
//!   memory_max_mib: 256    # a memory limit (control group), MiB; default none
//!   pids_max: 4            # a process and thread limit; default none
//! ```
//!
//! The spec only says what is wanted; the platform says in its report what
//! each NF got (a platform that is not root cannot give an NF a uid of its
//! own or namespaces, and says so).

use crate::config_node::ConfigNode;
use crate::fields::{self, Fields, Res};
use crate::limits;

/// Whose uid an NF runs as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SandboxUser {
    /// A uid and gid of its own, one per NF slot (`isolated`).
    #[default]
    Isolated,
    /// The platform's (`platform`).
    Platform,
}

spec_names!(SandboxUser {
    Isolated = "isolated",
    Platform = "platform",
});

/// A namespace an NF can be given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Namespace {
    /// `net`: a network namespace with only a loopback device.
    Net,
    /// `ipc`: System V IPC and POSIX message queues.
    Ipc,
    /// `uts`: host name.
    Uts,
    /// `mount`: the mount table.
    Mount,
}

spec_names!(Namespace {
    Net = "net",
    Ipc = "ipc",
    Uts = "uts",
    Mount = "mount",
});

/// What a process NF may do (`nfs[].sandbox`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Sandbox {
    /// The system call lists (`seccomp`).
    pub seccomp: bool,
    /// Whose uid it runs as (`user`).
    pub user: SandboxUser,
    /// Keeps the platform's capabilities (`capabilities`).
    pub capabilities: bool,
    /// Namespaces of its own (`namespaces`), in the order written, no
    /// repeats.
    pub namespaces: Vec<Namespace>,
    /// Memory limit in MiB (`memory_max_mib`).
    pub memory_max_mib: Option<u32>,
    /// Process and thread limit (`pids_max`).
    pub pids_max: Option<u32>,
}

impl Default for Sandbox {
    /// `strict`.
    fn default() -> Sandbox {
        Sandbox::strict()
    }
}

/// The keys of a sandbox mapping.
const KEYS: [&str; 6] = [
    "seccomp",
    "user",
    "capabilities",
    "namespaces",
    "memory_max_mib",
    "pids_max",
];

impl Sandbox {
    /// The default: filters, its own uid, no capabilities, IPC and UTS
    /// namespaces.
    pub fn strict() -> Sandbox {
        Sandbox {
            seccomp: true,
            user: SandboxUser::Isolated,
            capabilities: false,
            namespaces: vec![Namespace::Ipc, Namespace::Uts],
            memory_max_mib: None,
            pids_max: None,
        }
    }

    /// No sandbox: the NF runs as the platform does.
    pub fn off() -> Sandbox {
        Sandbox {
            seccomp: false,
            user: SandboxUser::Platform,
            capabilities: true,
            namespaces: Vec::new(),
            memory_max_mib: None,
            pids_max: None,
        }
    }

    /// Whether it has `namespace`.
    pub fn has(&self, namespace: Namespace) -> bool {
        self.namespaces.contains(&namespace)
    }

    /// The shortest spelling: `"strict"`, `"off"`, or a mapping of the
    /// fields that differ from `strict`.
    pub fn emit(&self) -> serde_json::Value {
        if *self == Sandbox::strict() {
            return serde_json::json!("strict");
        }
        if *self == Sandbox::off() {
            return serde_json::json!("off");
        }
        let d = Sandbox::strict();
        let mut m = serde_json::Map::new();
        if self.seccomp != d.seccomp {
            m.insert("seccomp".into(), self.seccomp.into());
        }
        if self.user != d.user {
            m.insert("user".into(), self.user.name().into());
        }
        if self.capabilities != d.capabilities {
            m.insert("capabilities".into(), self.capabilities.into());
        }
        if self.namespaces != d.namespaces {
            let names: Vec<&str> = self.namespaces.iter().map(|n| n.name()).collect();
            m.insert("namespaces".into(), names.into());
        }
        if let Some(v) = self.memory_max_mib {
            m.insert("memory_max_mib".into(), v.into());
        }
        if let Some(v) = self.pids_max {
            m.insert("pids_max".into(), v.into());
        }
        serde_json::Value::Object(m)
    }
}

fn opt_limit(f: &Fields<'_>, key: &str, limit: limits::Limit) -> Res<Option<u32>> {
    f.opt(key).map(|n| fields::int_as(n, limit)).transpose()
}

/// `strict`, `off`, or a mapping of [`KEYS`].
pub(crate) fn decode(node: &ConfigNode) -> Res<Sandbox> {
    if node.as_str().is_some() {
        let presets = [("strict", true), ("off", false)];
        let strict = fields::choice(node, "sandbox (or a mapping of its fields)", &presets)?;
        return Ok(if strict {
            Sandbox::strict()
        } else {
            Sandbox::off()
        });
    }
    let f = Fields::of(node, "a sandbox (strict, off, or a mapping)")?;
    f.deny_unknown("sandbox", &KEYS)?;
    let d = Sandbox::strict();
    let namespaces = match f.opt("namespaces") {
        None => d.namespaces,
        Some(n) => {
            let items = n
                .as_seq()
                .ok_or_else(|| fields::type_error(n, "a list of namespaces"))?;
            let mut out = Vec::new();
            for item in items {
                let ns = fields::choice(item, "namespace", &Namespace::ALL)?;
                if out.contains(&ns) {
                    return Err(item.error(format!("namespace {} is listed twice", ns.name())));
                }
                out.push(ns);
            }
            out
        }
    };
    Ok(Sandbox {
        seccomp: f
            .opt("seccomp")
            .map(fields::boolean)
            .transpose()?
            .unwrap_or(d.seccomp),
        user: match f.opt("user") {
            Some(n) => fields::choice(n, "sandbox user", &SandboxUser::ALL)?,
            None => d.user,
        },
        capabilities: f
            .opt("capabilities")
            .map(fields::boolean)
            .transpose()?
            .unwrap_or(d.capabilities),
        namespaces,
        memory_max_mib: opt_limit(&f, "memory_max_mib", limits::MEMORY_MAX_MIB)?,
        pids_max: opt_limit(&f, "pids_max", limits::PIDS_MAX)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Res<Sandbox> {
        decode(&ConfigNode::from_yaml_str(yaml).expect("yaml"))
    }

    #[test]
    fn presets_and_fields() {
        assert_eq!(parse("strict").unwrap(), Sandbox::strict());
        assert_eq!(parse("off").unwrap(), Sandbox::off());
        let s = parse("{ seccomp: false, namespaces: [net, ipc] }").unwrap();
        assert!(!s.seccomp);
        assert_eq!(s.user, SandboxUser::Isolated);
        assert!(s.has(Namespace::Net) && s.has(Namespace::Ipc) && !s.has(Namespace::Uts));
        assert_eq!(parse("{}").unwrap(), Sandbox::strict());
    }

    #[test]
    fn bad_sandboxes_are_named() {
        let e = |y| parse(y).unwrap_err().to_string();
        assert!(
            e("strikt").contains("did you mean \"strict\""),
            "{}",
            e("strikt")
        );
        assert!(e("{ seccomp: 1 }").contains("boolean"));
        assert!(e("{ user: root }").contains("isolated, platform"));
        assert!(e("{ namespaces: [pid] }").contains("unknown namespace \"pid\""));
        assert!(e("{ namespaces: [ipc, ipc] }").contains("listed twice"));
        assert!(e("{ namespaces: ipc }").contains("a list of namespaces"));
        assert!(e("{ memory: 1 }").contains("memory"));
        assert!(
            e("{ memory_max_mib: 0 }").contains("1"),
            "{}",
            e("{ memory_max_mib: 0 }")
        );
        assert!(e("{ pids_max: -1 }").contains("pids_max") || e("{ pids_max: -1 }").contains("1"));
        assert!(e("7").contains("sandbox"));
    }

    #[test]
    fn emit_round_trips() {
        for y in [
            "strict",
            "off",
            "{ seccomp: false }",
            "{ user: platform, capabilities: true }",
            "{ namespaces: [] }",
            "{ namespaces: [mount, net] }",
            "{ memory_max_mib: 64, pids_max: 2 }",
        ] {
            let s = parse(y).unwrap();
            let back = decode(&ConfigNode::from_json(s.emit())).unwrap();
            assert_eq!(back, s, "{y}");
        }
    }
}
