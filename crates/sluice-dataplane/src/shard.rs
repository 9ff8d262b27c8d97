//! Several workers, each with its own share of the flows
//! (`settings.workers = N > 1`).
//!
//! Shared-nothing, as NIC RSS queues with one core each: worker `w` runs
//! its own copy of every port (a generator sends flow slots `i` with
//! `i % N == w`), its own flow table and its own instance of every NF,
//! pinned to its own CPU. Packets of one flow (both directions) never
//! leave their worker, so per-flow NF state needs no locks. Workers share
//! the arena and the buffer pool (each with a private cache). The spec
//! validator admits only what shards this way: generator, sink and
//! `af_packet` ports.
//!
//! A process NF runs once per worker, forked by that worker's own template
//! and pinned to that worker's CPU: every core already runs a worker, and
//! the packets the NF touches stay in the caches of the core that
//! classified them. The two take turns on the core: the worker fills the
//! NF's ring and yields when it can do nothing else; the NF empties it and
//! sleeps.
//!
//! An `af_packet` port is opened once per worker, every copy a member of
//! one `PACKET_FANOUT_HASH` group: the kernel spreads flows over the
//! members with a symmetric hash, and member `i` of every port's group is
//! worker `i`'s copy because workers open their ports in turn (the kernel
//! numbers members in join order). So both directions of a flow, arriving
//! on two ports, reach the same worker.
//!
//! Start-up is all or nothing: every worker builds its ports and NFs, then
//! all meet at a barrier; if any failed, none runs.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Barrier;

use sluice_mem::{Arena, BufferPool};
use sluice_ports::Shard;
use sluice_spec::Spec;

use crate::plan::Plan;
use crate::report::{merged_sink, RunReport};
use crate::report_merge::ShardResult;
use crate::run::{build_nfs, flow_table, open_ports, worker_config, RunError, RunOptions};
use crate::template::Template;
use crate::worker::Worker;

/// Runs one sharded worker per entry of `templates` (each worker's NF
/// template, if the plan has process NFs) to completion and merges their
/// reports.
pub(crate) fn run_sharded(
    spec: &Spec,
    plan: &Plan,
    arena: &Arena,
    templates: Vec<Option<Template>>,
    opts: &RunOptions,
) -> Result<RunReport, RunError> {
    let workers = templates.len() as u32;
    let pool = BufferPool::for_arena(arena);
    let placement = sluice_sys::Placement::current();
    let duration_ns = opts.duration.map(|d| d.as_nanos() as u64);
    let barrier = Barrier::new(workers as usize);
    let failed = AtomicBool::new(false);
    // Whose turn it is to open its ports (fanout members join in order).
    let turn = AtomicU32::new(0);
    let nf_count = plan.nfs.len() as u32;
    if opts.live {
        eprintln!("sluice: {workers} workers; live rates are worker 0's share");
    }
    // Ok(None): the worker stood down because another one failed to start.
    let results: Vec<Result<Option<ShardResult>, RunError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .zip(templates)
            .map(|(w, template)| {
                let (pool, barrier, failed, placement, turn) =
                    (&pool, &barrier, &failed, &placement, &turn);
                s.spawn(move || {
                    let cpu = placement.shard_cpu(w as usize);
                    if let Err(e) = sluice_sys::pin_to_cpu(cpu) {
                        eprintln!("sluice: cannot pin worker {w} to CPU {cpu}: {e}");
                    }
                    let shard = Shard {
                        index: w,
                        count: workers,
                    };
                    while turn.load(Ordering::Acquire) != w {
                        std::thread::yield_now();
                    }
                    let ports = open_ports(plan, duration_ns, shard);
                    turn.store(w + 1, Ordering::Release);
                    let parts = ports
                        .and_then(|ports| Ok((ports, build_nfs(spec, plan, arena, w * nf_count)?)));
                    let mut cfg = worker_config(spec, opts);
                    cfg.index = w;
                    cfg.nfs_share_core = template.is_some();
                    cfg.live &= w == 0;
                    let started = match parts {
                        Ok((ports, nfs)) => {
                            let flows = flow_table(spec);
                            let mut worker =
                                Worker::new(arena, pool, plan, nfs, ports, flows, template, cfg);
                            match worker.start_nfs(opts.start_timeout.as_nanos() as u64) {
                                Ok(()) => Ok(worker),
                                Err(e) => {
                                    worker.finish();
                                    Err(RunError::Setup(e))
                                }
                            }
                        }
                        Err(e) => {
                            if let Some(t) = template {
                                t.shutdown();
                            }
                            Err(e)
                        }
                    };
                    if started.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    barrier.wait();
                    let mut worker = started?;
                    if failed.load(Ordering::Acquire) {
                        worker.finish();
                        return Ok(None);
                    }
                    let deadline = duration_ns.map(|d| sluice_sys::monotonic_ns() + d);
                    worker.run(&opts.stop, deadline);
                    worker.finish();
                    Ok(Some(ShardResult {
                        report: RunReport::from_worker(spec.source.as_str(), &worker),
                        sink: merged_sink(&worker),
                    }))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(RunError::Setup("a worker thread panicked".into())))
            })
            .collect()
    });
    let parts: Vec<Option<ShardResult>> = results.into_iter().collect::<Result<_, _>>()?;
    let parts: Vec<ShardResult> = parts.into_iter().flatten().collect();
    RunReport::merge_shards(parts, pool.audit(), arena)
        .ok_or_else(|| RunError::Setup("no worker ran".into()))
}
