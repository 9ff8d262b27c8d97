//! Platform settings: what is fixed when the data plane starts (sizes,
//! capacities, workers) and what a spec may change while it runs (the
//! restart and wake-up policies).

use std::path::PathBuf;
use std::time::Duration;

use sluice_spec::{Location, RestartPolicy, SchedulerSettings, Spec, SpecError, WakeupSettings};

/// Settings of a running data plane.
#[derive(Debug, Clone)]
pub struct PlatformSettings {
    /// Worker threads (one per core share of the flows).
    pub workers: u16,
    /// Packet buffers of the platform's trust domain.
    pub buffers: u32,
    /// Named trust domains and their buffers (`settings.domains`).
    pub domains: Vec<sluice_spec::DomainSpec>,
    /// Slots per NF ring.
    pub ring_size: u32,
    /// Packets per batch.
    pub batch: u16,
    /// Ask for 2 MiB huge pages.
    pub hugepages: bool,
    /// 64 KiB buffers for super-packets (ports with `offload: true`; 0
    /// when none will come).
    pub large_buffers: u32,
    /// Flow-table entries per worker.
    pub flow_capacity: u32,
    /// Idle time after which a flow ends, ms.
    pub idle_timeout_ms: u64,
    /// Linger of a TCP flow after its FIN, ms.
    pub close_timeout_ms: u64,
    /// Restart policy of process NFs (a spec may change it).
    pub restart: RestartPolicy,
    /// Wake-up policy of process NFs (a spec may change it).
    pub wakeup: WakeupSettings,
    /// Scheduling of process NFs sharing a core (a spec may change it).
    pub scheduler: SchedulerSettings,
    /// Backpressure at chains' entries (a spec may change it).
    pub backpressure: sluice_spec::BackpressureSettings,
    /// Fork process NFs from shells (a spec may change it; NFs created
    /// after the change, and their restarts, follow it).
    pub shells: bool,
    /// Most NFs at once (arena slots per worker; a replaced NF holds two
    /// until its old instance has stopped).
    pub max_nfs: u32,
    /// Most ports.
    pub max_ports: u32,
    /// Most chains.
    pub max_chains: u32,
    /// The NF template program (see [`crate::host::ForkHost`]).
    pub template_program: PathBuf,
    /// Start each worker's NF template with the worker, not only when the
    /// first process NF comes (a daemon does; `sluice run` without process
    /// NFs does not).
    pub start_host: bool,
    /// How long new process NFs may take to start.
    pub start_timeout: Duration,
    /// Generators opened by this platform stop after this long (a
    /// foreground run's `--duration`).
    pub generator_duration_ns: Option<u64>,
}

impl PlatformSettings {
    /// A platform sized for exactly `spec` (`sluice run`).
    pub fn for_spec(spec: &Spec) -> PlatformSettings {
        let s = &spec.settings;
        PlatformSettings {
            workers: s.workers.max(1),
            buffers: s.buffers,
            domains: s.domains.clone(),
            ring_size: s.ring_size,
            batch: s.batch,
            hugepages: s.hugepages,
            large_buffers: if spec
                .ports
                .iter()
                .any(|p| sluice_nic::wants_offload(&p.kind))
            {
                crate::offload::LARGE_BUFFERS
            } else {
                0
            },
            flow_capacity: s.flow_table.capacity,
            idle_timeout_ms: s.flow_table.idle_timeout_ms,
            close_timeout_ms: s.flow_table.close_timeout_ms,
            restart: s.restart.clone(),
            wakeup: s.wakeup.clone(),
            scheduler: s.scheduler.clone(),
            backpressure: s.backpressure,
            shells: s.shells,
            // Every replica is an NF with a slot of its own.
            max_nfs: spec.nfs.iter().map(|n| n.instances()).sum::<u32>().max(1),
            max_ports: spec.ports.len().max(1) as u32,
            max_chains: spec.chains.len().max(1) as u32,
            template_program: std::env::current_exe().unwrap_or_default(),
            start_host: spec
                .nfs
                .iter()
                .any(|n| n.isolation == sluice_spec::Isolation::Process),
            start_timeout: Duration::from_secs(10),
            generator_duration_ns: None,
        }
    }

    /// The settings of a spec with no `settings:` section, with room for
    /// `max_nfs` NFs (a daemon's defaults).
    pub fn defaults(max_nfs: u32) -> PlatformSettings {
        let mut s = Self::for_spec(&Spec::default());
        s.max_nfs = max_nfs;
        s.max_ports = 256;
        s.max_chains = 4096;
        s.start_host = true;
        // A daemon may get offloading ports at any time.
        s.large_buffers = crate::offload::LARGE_BUFFERS;
        s
    }

    /// The arena's buffer counts of the named trust domains.
    pub fn domain_buffers(&self) -> [u32; sluice_mem::arena::MAX_DOMAINS - 1] {
        let mut out = [0; sluice_mem::arena::MAX_DOMAINS - 1];
        for (o, d) in out.iter_mut().zip(&self.domains) {
            *o = d.buffers;
        }
        out
    }

    /// Whether these settings can run at all (clear message if not).
    pub fn check(&self) -> Result<(), String> {
        if self.workers == 0 || self.max_nfs == 0 {
            return Err("workers and max_nfs must be at least 1".into());
        }
        let slots = u64::from(self.max_nfs) * u64::from(self.workers);
        if slots > 1 << 20 {
            return Err(format!(
                "{} NFs × {} workers is more arena slots than the platform supports (1,048,576)",
                self.max_nfs, self.workers
            ));
        }
        Ok(())
    }

    /// Whether a spec fits this running platform: the settings fixed at
    /// start must be the spec's too (the restart and wake-up policies may
    /// differ, and so may the scheduler's: applying the spec changes them).
    pub fn accepts(&self, spec: &Spec) -> Result<(), SpecError> {
        let s = &spec.settings;
        let fixed: [(&str, u64, u64); 8] = [
            (
                "workers",
                u64::from(s.workers.max(1)),
                u64::from(self.workers),
            ),
            ("buffers", u64::from(s.buffers), u64::from(self.buffers)),
            (
                "ring_size",
                u64::from(s.ring_size),
                u64::from(self.ring_size),
            ),
            ("batch", u64::from(s.batch), u64::from(self.batch)),
            (
                "hugepages",
                u64::from(s.hugepages),
                u64::from(self.hugepages),
            ),
            (
                "flow_table.capacity",
                u64::from(s.flow_table.capacity),
                u64::from(self.flow_capacity),
            ),
            (
                "flow_table.idle_timeout_ms",
                s.flow_table.idle_timeout_ms,
                self.idle_timeout_ms,
            ),
            (
                "flow_table.close_timeout_ms",
                s.flow_table.close_timeout_ms,
                self.close_timeout_ms,
            ),
        ];
        if s.domains != self.domains {
            let names = |d: &[sluice_spec::DomainSpec]| {
                let n: Vec<String> = d
                    .iter()
                    .map(|d| format!("{} ({})", d.name, d.buffers))
                    .collect();
                if n.is_empty() {
                    "none".to_string()
                } else {
                    n.join(", ")
                }
            };
            return Err(SpecError::new(
                spec.source.as_str(),
                Location::GENERATED,
                "settings.domains".to_string(),
                format!(
                    "are {} in the spec but {} on the running platform, and trust domains cannot \
                     change while the platform runs: each is a region of the packet arena (start \
                     the platform with the spec's settings)",
                    names(&s.domains),
                    names(&self.domains)
                ),
            ));
        }
        for (name, want, have) in fixed {
            if want != have {
                return Err(SpecError::new(
                    spec.source.as_str(),
                    Location::GENERATED,
                    format!("settings.{name}"),
                    format!(
                        "is {want} in the spec but {have} on the running platform, and it cannot \
                         change while the platform runs (start the platform with the spec's settings)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_spec::DomainSpec;

    #[test]
    fn trust_domains_are_fixed_when_the_platform_starts() {
        let mut with = Spec::default();
        with.settings.domains = vec![DomainSpec::new("red", 1024)];
        let running = PlatformSettings::for_spec(&with);
        assert_eq!(running.domain_buffers()[..2], [1024, 0]);
        assert!(running.accepts(&with).is_ok());
        for other in [Spec::default(), {
            let mut s = with.clone();
            s.settings.domains[0].buffers = 2048;
            s
        }] {
            let e = running.accepts(&other).unwrap_err().to_string();
            assert!(
                e.contains("settings.domains") && e.contains("red (1024)"),
                "{e}"
            );
        }
    }
}
