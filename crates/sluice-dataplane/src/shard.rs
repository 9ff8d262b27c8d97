//! Several workers, each with its own share of the flows
//! (`settings.workers = N > 1`).
//!
//! Shared-nothing, as NIC RSS queues with one core each: worker `w` runs
//! its own copy of every port (a generator sends flow slots `i` with
//! `i % N == w`), its own flow table and its own inline instance of every
//! NF, pinned to its own CPU. Packets of one flow (both directions) never
//! leave their worker, so per-flow NF state needs no locks. Workers share
//! the arena and the buffer pool (each with a private cache). The spec
//! validator admits only what shards this way: generator, sink and
//! `af_packet` ports, inline NFs.
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
use crate::worker::Worker;

/// Runs `workers` sharded workers to completion and merges their reports.
pub(crate) fn run_sharded(
    spec: &Spec,
    plan: &Plan,
    arena: &Arena,
    workers: u32,
    opts: &RunOptions,
) -> Result<RunReport, RunError> {
    let pool = BufferPool::new(arena.buffers());
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
            .map(|w| {
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
                    if parts.is_err() {
                        failed.store(true, Ordering::Release);
                    }
                    barrier.wait();
                    let (ports, nfs) = parts?;
                    if failed.load(Ordering::Acquire) {
                        return Ok(None);
                    }
                    let mut cfg = worker_config(spec, opts);
                    cfg.live &= w == 0;
                    let mut worker =
                        Worker::new(arena, pool, plan, nfs, ports, flow_table(spec), None, cfg);
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
