//! One NF's row of the report, and how it is made: its worker copies the
//! numbers ([`nf_numbers`]: the counters its control block publishes and
//! what the worker itself counted), and whoever asked names them from the
//! plan ([`RowLists::name_rows`]), off the worker's thread.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::Ordering;

use serde::Serialize;
use sluice_mem::NF_COUNTERS;
use sluice_spec::Isolation;

use crate::nf_rt::NfRt;
use crate::plan::Plan;

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

/// Where one row's lists lie in its shard's [`RowLists`], and what the
/// asker needs to name the row from the plan.
#[derive(Debug, Clone)]
struct RowRefs {
    /// The NF's id in the plan.
    id: u16,
    /// Its arena slot (its sandbox's uid depends on it).
    slot: u32,
    /// It runs in a process of its own now.
    process: bool,
    /// Its local drops, in the order of the plan's `drop_reasons`.
    drops: Range<usize>,
    /// Its counters, in the order of the plan's `counters`.
    counters: Range<usize>,
    /// Its extended counters, up to the last non-zero one.
    ext: Range<usize>,
    /// In `RowLists::startups`: its start times.
    startups: Range<usize>,
}

/// The list-valued numbers of a worker's NF rows, flat: a report costs
/// the worker a few allocations, not a dozen per NF.
///
/// A report at 1,000 NFs cost its worker ~2.6 ms (a profile of the
/// worker thread under `GET /v1/stats` in a loop), time in which its
/// packets wait: each row's name, type and domain strings, its counter
/// and drop maps keyed by name, its sandbox's list of namespaces. The
/// worker now copies numbers only ([`nf_numbers`]); whoever asked names
/// the rows from the plan the worker ran ([`RowLists::name_rows`]).
#[derive(Debug, Default)]
pub(crate) struct RowLists {
    refs: Vec<RowRefs>,
    values: Vec<u64>,
    startups: Vec<f64>,
}

/// `values[range]` pushed onto `into`, and where they landed.
fn push_all(into: &mut Vec<u64>, values: impl Iterator<Item = u64>) -> Range<usize> {
    let start = into.len();
    into.extend(values);
    start..into.len()
}

/// NF `nf`'s row as its worker reads it: every number, and nothing that
/// needs a name (its name, type, domain, sandbox, drops, counters and
/// start times are filled in by [`RowLists::name_rows`] from `lists`).
/// `counter_names` are the plan's counters of the NF: only their indices
/// are read here.
pub(crate) fn nf_numbers(
    nf: &NfRt<'_>,
    counter_names: &[(usize, String)],
    lists: &mut RowLists,
) -> NfReport {
    let packets = nf.packets();
    let cpu_ns = nf.busy_ns();
    let s = &nf.control.stats;
    let c = &nf.control;
    let drops = push_all(&mut lists.values, nf.local_drops.iter().copied());
    let counters = push_all(
        &mut lists.values,
        counter_names.iter().map(|(i, _)| {
            match i.checked_sub(NF_COUNTERS) {
                None => c.counters.get(*i),
                Some(e) => c.ext.0.get(e),
            }
            .map_or(0, |v| v.load(Ordering::Relaxed))
        }),
    );
    let in_use = c.ext_in_use();
    let used = in_use.iter().rposition(|v| v.load(Ordering::Relaxed) > 0);
    let ext = push_all(
        &mut lists.values,
        in_use[..used.map_or(0, |i| i + 1)]
            .iter()
            .map(|v| v.load(Ordering::Relaxed)),
    );
    let start = lists.startups.len();
    lists.startups.extend_from_slice(&nf.startup_us);
    lists.refs.push(RowRefs {
        id: nf.id,
        slot: nf.slot,
        process: nf.process_ref().is_some(),
        drops,
        counters,
        ext,
        startups: start..lists.startups.len(),
    });
    NfReport {
        name: String::new(),
        nf_type: String::new(),
        isolation: String::new(),
        packets,
        cpu_ns,
        ns_per_packet: if packets > 0 {
            cpu_ns as f64 / packets as f64
        } else {
            0.0
        },
        restarts: nf.restarts,
        reforks: nf.reforks,
        // A crashed instance's last words: rare, so cloned here.
        last_exit: nf.last_exit.clone(),
        sandbox_kills: nf.sandbox_kills,
        oom_kills: nf.oom_kills,
        sandbox: None,
        startup_us: Vec::new(),
        shell_starts: nf.shell_starts,
        starts: nf.starts,
        standby_starts: nf.standby_starts,
        spare_starts: nf.spare_starts,
        domain: String::new(),
        domain_copies: nf.domain_copies,
        restart_times: nf.restart_times,
        drops: BTreeMap::new(),
        counters: BTreeMap::new(),
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
        ext_counters: Vec::new(),
        // Filled by the worker, which knows the pools.
        pool_flows: None,
    }
}

impl RowLists {
    /// Finishes `rows` (made by [`nf_numbers`], in the same order) from
    /// `plan`, the plan of the worker that made them: names, type,
    /// isolation, domain, wake-up policy, sandbox, and the lists keyed by
    /// the plan's names. Rows whose NF `plan` lacks keep their numbers.
    pub(crate) fn name_rows(self, rows: &mut [NfReport], plan: &Plan) {
        let v = &self.values;
        for (r, refs) in rows.iter_mut().zip(&self.refs) {
            let Some(p) = plan.nf(refs.id) else {
                continue;
            };
            r.name.clone_from(&p.name);
            r.nf_type = p.nf_type.name.to_string();
            r.isolation = p.isolation.name().to_string();
            r.domain = plan.domain_name(p.domain).to_string();
            if p.isolation == Isolation::Process {
                r.wakeup = p.wakeup.policy.name().to_string();
            }
            if refs.process {
                r.sandbox = Some(p.sandbox.report(refs.slot));
            }
            r.drops = (p.drop_reasons.iter())
                .zip(&v[refs.drops.clone()])
                .filter(|(_, &n)| n > 0)
                .map(|(name, &n)| (name.clone(), n))
                .collect();
            r.counters = (p.counters.iter())
                .zip(&v[refs.counters.clone()])
                .map(|((_, name), &n)| (name.clone(), n))
                .collect();
            r.ext_counters = v[refs.ext.clone()].to_vec();
            r.startup_us = self.startups[refs.startups.clone()].to_vec();
        }
    }
}
