//! The runtime's worker threads: each started with its own NF host (the
//! template process), flow table and configuration, asked by posting to
//! its mailbox, watched for failure, and stopped.

use std::sync::mpsc::sync_channel;
use std::sync::Arc;

use crate::backpressure::EntryPolicy;
use crate::flow_table::FlowTable;
use crate::host::{ForkHost, HostConfig, NfHost};
use crate::sched::SchedPolicy;
use crate::worker::{Command, Mailbox, Worker, WorkerConfig};

use super::Runtime;

/// The runtime's end of one worker thread.
pub(super) struct WorkerHandle {
    pub(super) mail: Arc<Mailbox>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Runtime {
    /// Starts worker `w` and waits until it serves (or failed to start).
    pub(super) fn start_worker(&self, w: u32) -> Result<WorkerHandle, String> {
        let mail = Arc::new(Mailbox::default());
        let (arena, pool, s) = (self.arena.clone(), self.pool.clone(), self.settings.clone());
        let cpu = if s.workers > 1 {
            self.placement.shard_cpu(w as usize)
        } else {
            self.placement.worker_cpu()
        };
        let template_cpu = self.placement.template_cpu(w as usize, s.workers as usize);
        let (ready_tx, ready_rx) = sync_channel::<Result<(), String>>(1);
        let thread_mail = mail.clone();
        let logbook = self.logbook.clone();
        let registry = self.registry;
        let thread = std::thread::Builder::new()
            .name(format!("sluice-worker-{w}"))
            .spawn(move || {
                if let Err(e) = sluice_sys::pin_to_cpu(cpu) {
                    tracing::warn!("cannot pin worker {w} to CPU {cpu}: {e}");
                }
                // The template's parent-death signal follows this thread,
                // which lives as long as the worker: start it here.
                let host: Option<Box<dyn NfHost>> = if s.start_host {
                    let cfg = HostConfig {
                        program: s.template_program.clone(),
                        worker: w,
                        cpu: Some(template_cpu),
                    };
                    match ForkHost::start(cfg, &arena) {
                        Ok(h) => Some(Box::new(h)),
                        Err(e) => {
                            let _ = ready_tx
                                .send(Err(format!("cannot start the NF template process: {e}")));
                            return;
                        }
                    }
                } else {
                    None
                };
                let flows = FlowTable::new(
                    s.flow_capacity,
                    s.idle_timeout_ms.saturating_mul(1_000_000),
                    s.close_timeout_ms.saturating_mul(1_000_000),
                );
                let cfg = WorkerConfig {
                    index: w,
                    nfs_share_core: s.workers > 1,
                    batch: usize::from(s.batch),
                    restart: s.restart.clone(),
                    drain_timeout_ns: 2_000_000_000,
                    sched: SchedPolicy::from_settings(&s.scheduler, s.wakeup.busy_poll_us),
                    entry: EntryPolicy::from_settings(&s.backpressure),
                    registry,
                };
                let mut worker = Worker::new(&arena, &pool, flows, host, thread_mail, logbook, cfg);
                let _ = ready_tx.send(Ok(()));
                worker.serve_or_fail();
            })
            .map_err(|e| format!("cannot start worker {w}: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(WorkerHandle {
                mail,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(format!("worker {w} stopped while starting"))
            }
        }
    }

    /// Why the data plane has failed, if it has: the first worker that
    /// stopped without being asked to (its code panicked; see
    /// `worker::failure`). A failed runtime applies nothing; whoever runs
    /// it should stop it and say why.
    pub fn failure(&self) -> Option<String> {
        self.workers
            .iter()
            .find_map(|h| h.mail.failure())
            .map(str::to_string)
    }

    /// Every failed worker's reason, in worker order.
    pub(super) fn failures(&self) -> Vec<String> {
        (self.workers.iter())
            .filter_map(|h| h.mail.failure())
            .map(str::to_string)
            .collect()
    }

    /// Posts `c` to worker `w` and wakes it.
    pub(super) fn post(&self, w: usize, c: Command) {
        self.workers[w].mail.post(c);
        self.arena.worker_wake(w as u32).wake();
    }

    /// Stops every worker thread that still runs and waits for it.
    pub(super) fn stop_workers(&mut self) {
        for (w, h) in self.workers.iter_mut().enumerate() {
            if let Some(t) = h.thread.take() {
                if !t.is_finished() {
                    let (tx, _rx) = sync_channel(1);
                    h.mail.post(Command::Stop(tx));
                    self.arena.worker_wake(w as u32).wake();
                }
                let _ = t.join();
            }
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_workers();
    }
}
