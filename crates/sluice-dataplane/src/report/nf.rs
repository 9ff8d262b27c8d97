//! One NF's row of the report, and how a worker makes it from what it
//! knows of the NF ([`nf_report`]): the counters its control block
//! publishes and what the worker itself counted.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::Serialize;
use sluice_mem::NF_COUNTERS;
use sluice_spec::Isolation;

use crate::nf_rt::NfRt;

/// One NF's summary.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct NfReport {
    /// Instance name.
    pub name: String,
    /// NF type.
    #[serde(rename = "type")]
    pub nf_type: String,
    /// `inline` or `process`.
    pub isolation: String,
    /// Packets processed (all instances).
    pub packets: u64,
    /// CPU time charged: nanoseconds inside the NF's batch handler.
    pub cpu_ns: u64,
    /// `cpu_ns / packets`.
    pub ns_per_packet: f64,
    /// Restarts after crashes.
    pub restarts: u32,
    /// Instances discarded and forked afresh for their pool's next flow
    /// (`reset: refork`; a fresh instance's counters start at zero).
    pub reforks: u64,
    /// How the last instance ended, if one crashed.
    pub last_exit: Option<String>,
    /// Instances its sandbox killed for a system call outside its list
    /// (process NFs).
    #[serde(default)]
    pub sandbox_kills: u32,
    /// Instances killed at their memory limit (`sandbox.memory_max_mib`).
    #[serde(default)]
    pub oom_kills: u32,
    /// What its process may do (process NFs), as this platform gives it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sandbox: Option<crate::host::SandboxReport>,
    /// Spawn-to-running time of each start, µs (process NFs; the first
    /// 256 starts per NF and worker).
    pub startup_us: Vec<f64>,
    /// Starts forked from a shell: the NF was built once in the template
    /// and the start was a fork (process NFs; `settings.shells`).
    #[serde(default)]
    pub shell_starts: u32,
    /// Processes started for it: its first and each restart's (process
    /// NFs; `shell_starts` and `standby_starts` of them came from a
    /// shell and a standby).
    #[serde(default)]
    pub starts: u32,
    /// Starts a standby took over: an instance forked, built and confined
    /// before the start (process NFs; `settings.restart.standby`).
    #[serde(default)]
    pub standby_starts: u32,
    /// Starts a spare took: a process its template forked ahead, before
    /// anyone knew which NF it would run, for the slot the NF took
    /// (process NFs; `settings.shells`).
    #[serde(default)]
    pub spare_starts: u32,
    /// Its trust domain (`nfs[].domain`; `platform` unless named).
    #[serde(default)]
    pub domain: String,
    /// Packets copied into its trust domain on their way to it, from a
    /// port or an NF of another domain (process NFs).
    #[serde(default)]
    pub domain_copies: u64,
    /// Restarts after crashes that came back, and how long they took
    /// from the exit seen to the new instance running (process NFs).
    #[serde(default)]
    pub restart_times: crate::nf_rt::RestartTimes,
    /// Drops under this NF's own reasons.
    pub drops: BTreeMap<String, u64>,
    /// NF-specific counters. With several workers: the sum over workers,
    /// which is right for counts and sizes of per-flow state but not for
    /// gauges such as maxima, percentiles or configured table sizes; read
    /// those in `counters_by_worker`.
    pub counters: BTreeMap<String, u64>,
    /// With several workers: each worker's instance's counters.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub counters_by_worker: Vec<BTreeMap<String, u64>>,
    /// Times the NF slept for lack of work.
    pub sleeps: u64,
    /// Times it yielded the CPU: after a full batch, or waiting for room
    /// in its output ring.
    pub yields: u64,
    /// Turns of its core it took (`settings.scheduler`; 0 when it
    /// schedules itself).
    #[serde(default)]
    pub turns: u64,
    /// Batches it ran without its core's turn because its receive ring was
    /// three quarters full (turns were too slow to come: an overcommitted
    /// host or an overloaded chain).
    #[serde(default)]
    pub out_of_turn: u64,
    /// Time from a turn being handed to it until it ran with it, summed
    /// over its turns, µs (divided by `turns`: how long a hand-over took).
    #[serde(default)]
    pub turn_wait_us: u64,
    /// Times its loop was held off the CPU for more than 50 µs between two
    /// polls without sleeping (the kernel, the hypervisor, other tasks or
    /// NFs sharing its core ran); process NFs only.
    pub stalls: u64,
    /// Total time of those stalls, µs.
    pub stalled_us: u64,
    /// Futex wake-ups the platform issued to it.
    pub wakeups: u64,
    /// Of those, wake-ups for packets held back (a wake-up policy with a
    /// threshold) until the timeout.
    pub wakeups_by_timeout: u64,
    /// Its wake-up policy (`auto`, `hybrid`, `every_packet`, `threshold`,
    /// `adaptive`; empty for inline NFs).
    #[serde(default)]
    pub wakeup: String,
    /// Turns the scheduler took back from it because it kept one too long
    /// while NFs sharing its core waited (a spin loop, a stopped process).
    #[serde(default)]
    pub turns_revoked: u64,
    /// Turns the scheduler handed to a waiting NF because this one, holding
    /// one, waited for a CPU the host gave to other tasks (it keeps taking
    /// turns).
    #[serde(default)]
    pub turns_held_off: u64,
    /// CPU time its processes used, µs, their ring I/O included (read
    /// from the kernel: `/proc/PID/schedstat`; 0 for inline NFs, whose
    /// time is their worker's).
    #[serde(default)]
    pub process_cpu_us: u64,
    /// Times the kernel put its processes on a CPU: their context
    /// switches (each wake-up, yield or preemption ends in one; from
    /// `/proc/PID/schedstat`; 0 for inline NFs).
    #[serde(default)]
    pub process_switches: u64,
    /// Ring entries it returned that were not buffers it owned (rejected).
    pub invalid_handles: u64,
    /// Packets the NF created (reject replies, flood copies, …).
    pub originated: u64,
    /// Extended counters (e.g. hits per rule), up to the last non-zero one.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub ext_counters: Vec<u64>,
    /// An instance of a `per_flow` pool: the flows it serves now (0: idle
    /// in the pool); absent for other NFs.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pool_flows: Option<u64>,
}

pub(crate) fn nf_report(nf: &NfRt<'_>, counter_names: &[(usize, String)]) -> NfReport {
    let packets = nf.packets();
    let cpu_ns = nf.busy_ns();
    let s = &nf.control.stats;
    NfReport {
        name: nf.name.clone(),
        nf_type: nf.type_name.to_string(),
        isolation: match nf.isolation {
            Isolation::Inline => "inline",
            Isolation::Process => "process",
        }
        .to_string(),
        packets,
        cpu_ns,
        ns_per_packet: if packets > 0 {
            cpu_ns as f64 / packets as f64
        } else {
            0.0
        },
        restarts: nf.restarts,
        reforks: nf.reforks,
        last_exit: nf.last_exit.clone(),
        sandbox_kills: nf.sandbox_kills,
        oom_kills: nf.oom_kills,
        sandbox: nf.process_ref().map(|p| p.spawn.sandbox.report(nf.slot)),
        startup_us: nf.startup_us.clone(),
        shell_starts: nf.shell_starts,
        starts: nf.starts,
        standby_starts: nf.standby_starts,
        spare_starts: nf.spare_starts,
        domain: String::new(),
        domain_copies: nf.domain_copies,
        restart_times: nf.restart_times,
        drops: nf
            .drop_names
            .iter()
            .zip(&nf.local_drops)
            .filter(|(_, &n)| n > 0)
            .map(|(name, &n)| (name.to_string(), n))
            .collect(),
        counters: counter_names
            .iter()
            .filter_map(|(i, name)| {
                let c = match i.checked_sub(NF_COUNTERS) {
                    None => nf.control.counters.get(*i),
                    Some(e) => nf.control.ext.0.get(e),
                }?;
                Some((name.clone(), c.load(Ordering::Relaxed)))
            })
            .collect(),
        counters_by_worker: Vec::new(),
        sleeps: nf.retired.sleeps + s.sleeps.load(Ordering::Relaxed),
        yields: nf.retired.yields + s.yields.load(Ordering::Relaxed),
        turns: nf.retired.turns + s.turns.load(Ordering::Relaxed),
        out_of_turn: nf.retired.out_of_turn + s.out_of_turn.load(Ordering::Relaxed),
        turn_wait_us: (nf.retired.turn_wait_ns + s.turn_wait_ns.load(Ordering::Relaxed)) / 1000,
        stalls: nf.retired.stalls + s.stalls.load(Ordering::Relaxed),
        stalled_us: (nf.retired.stalled_ns + s.stalled_ns.load(Ordering::Relaxed)) / 1000,
        wakeups: nf.wakeups,
        wakeups_by_timeout: nf.wakeups_by_timeout,
        wakeup: String::new(),
        turns_revoked: nf.turns_revoked,
        turns_held_off: nf.turns_held_off,
        process_cpu_us: nf.cpu.total_ns() / 1000,
        process_switches: nf.cpu.switches(),
        invalid_handles: nf.invalid_handles,
        originated: nf.originated,
        ext_counters: {
            let ext: Vec<u64> = nf
                .control
                .ext
                .0
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect();
            let used = ext.iter().rposition(|&v| v > 0).map_or(0, |i| i + 1);
            ext[..used].to_vec()
        },
        // Filled by the worker, which knows the pools.
        pool_flows: None,
    }
}
