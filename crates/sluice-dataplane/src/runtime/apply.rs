//! Applying a spec to the running data plane: compile it against the
//! running plan, diff, prepare the change on every worker (new ports, new
//! NF instances and their slots), then commit it everywhere or abort it
//! everywhere (see the module above and `worker::command`).

use super::*;

impl Runtime {
    fn target(&self) -> Target {
        Target {
            replicas: u32::from(self.settings.workers.max(1)),
            flow_capacity: self.settings.flow_capacity,
            max_ports: self.settings.max_ports as usize,
            max_nfs: self.settings.max_nfs as usize,
            max_chains: self.settings.max_chains as usize,
        }
    }

    /// Compiles `spec` against the running plan and says what applying it
    /// would change, changing nothing.
    pub fn dry_run(&self, spec: &Spec) -> Result<Diff, RunError> {
        self.settings.accepts(spec).map_err(RunError::Spec)?;
        let plan = compile(spec, self.registry, &self.target(), Some(&self.plan))?;
        Ok(Diff::between(&self.plan, &plan))
    }

    /// What applying `spec` to an empty platform with the spec's own
    /// settings would change (everything), changing nothing: the check a
    /// daemon with nothing running makes, as it restarts its data plane
    /// with a spec's settings.
    pub fn dry_run_from_empty(&self, spec: &Spec) -> Result<Diff, RunError> {
        let target = Target {
            replicas: u32::from(spec.settings.workers.max(1)),
            flow_capacity: spec.settings.flow_table.capacity,
            ..self.target()
        };
        let plan = compile(spec, self.registry, &target, None)?;
        Ok(Diff::between(&Plan::default(), &plan))
    }

    /// Makes `spec` the running configuration, changing only what differs
    /// (see the module docs). On error nothing changed.
    pub fn apply(&mut self, spec: &Spec) -> Result<Applied, RunError> {
        let t0 = sluice_sys::monotonic_ns();
        self.settings.accepts(spec).map_err(RunError::Spec)?;
        let plan = compile(spec, self.registry, &self.target(), Some(&self.plan))?;
        let applied = self.apply_plan(spec, plan, t0)?;
        self.compiled_from = Some(sluice_spec::Grown::of(spec));
        Ok(applied)
    }

    /// [`Runtime::apply`] for a spec validated already (against this
    /// runtime's NF types): it is not validated again. An addition to the
    /// spec that runs (the caller's word, checked by the lengths of its
    /// lists) is compiled alone, at a cost that does not grow with what
    /// runs.
    pub fn apply_valid(&mut self, spec: &ValidSpec) -> Result<Applied, RunError> {
        let t0 = sluice_sys::monotonic_ns();
        self.settings.accepts(spec).map_err(RunError::Spec)?;
        let target = self.target();
        let plan = match spec.grown_from() {
            Some(from) if self.compiled_from == Some(from) => {
                compile_addition(spec, self.registry, &target, &self.plan)?
            }
            _ => compile_checked(spec, self.registry, &target, Some(&self.plan))?,
        };
        let applied = self.apply_plan(spec, plan, t0)?;
        self.compiled_from = Some(sluice_spec::Grown::of(spec));
        Ok(applied)
    }

    /// Stops every port, NF and chain, as an apply of a spec without them
    /// would (no spec can be empty: it needs a chain); the live settings
    /// stay `running`'s, the spec that runs now. The data plane itself
    /// (workers, arena, template) stays up for the next apply.
    pub fn apply_nothing(&mut self, running: &Spec) -> Result<Applied, RunError> {
        let t0 = sluice_sys::monotonic_ns();
        let plan = crate::compile::nothing(&self.plan);
        let applied = self.apply_plan(running, plan, t0)?;
        self.compiled_from = None;
        Ok(applied)
    }

    fn apply_plan(&mut self, spec: &Spec, plan: Plan, t0: u64) -> Result<Applied, RunError> {
        if let Some(why) = self.failure() {
            return Err(RunError::Failed(why));
        }
        if crate::offload::large_buffers(&plan) > self.settings.large_buffers {
            return Err(RunError::Setup(
                "a port with `offload: true` needs the platform's large buffers, and this one \
                 started without: start it with a spec that has the port"
                    .into(),
            ));
        }
        let diff = Diff::between(&self.plan, &plan);
        let restart = spec.settings.restart.clone();
        let sched =
            SchedPolicy::from_settings(&spec.settings.scheduler, spec.settings.wakeup.busy_poll_us);
        let entry = EntryPolicy::from_settings(&spec.settings.backpressure);
        let live_settings_same = restart == self.settings.restart
            && spec.settings.wakeup == self.settings.wakeup
            && spec.settings.scheduler == self.settings.scheduler
            && spec.settings.backpressure == self.settings.backpressure;
        if diff.is_empty() && live_settings_same {
            // Shells only shape NFs created from now on: nothing to tell
            // the workers.
            self.settings.shells = spec.settings.shells;
            self.plan = Arc::new(Plan {
                generation: self.plan.generation,
                ..plan
            });
            return Ok(Applied {
                diff,
                ..Applied::default()
            });
        }
        let freed: Vec<(usize, Vec<u32>)> = (self.workers.iter().enumerate())
            .map(|(w, h)| (w, h.mail.take_freed()))
            .collect();
        for (w, slots) in freed {
            for slot in slots {
                self.free_slot(w, slot);
            }
        }
        let plan = Arc::new(plan);
        let compiled = sluice_sys::monotonic_ns();
        let mut changes =
            self.changes_for(&plan, &diff, &restart, (sched, entry), spec.settings.shells)?;
        // Prepare everywhere; all must succeed.
        let mut replies = Vec::new();
        for (w, change) in changes.drain(..).enumerate() {
            let (tx, rx) = sync_channel(1);
            self.post(w, Command::Prepare(Box::new(change.0), tx));
            replies.push((rx, change.1));
        }
        let timeout = self.settings.start_timeout;
        let mut failure = None;
        for (w, (rx, _)) in replies.iter().enumerate() {
            match rx.recv_timeout(timeout) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    failure.get_or_insert(e);
                }
                // The worker failed while it prepared (its mailbox
                // dropped the command): say that, not a timeout.
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    let why = self
                        .failure()
                        .unwrap_or_else(|| format!("worker {w} stopped"));
                    failure.get_or_insert(why);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    failure.get_or_insert(format!(
                        "worker {w}: new NFs did not start within {} ms",
                        timeout.as_millis()
                    ));
                }
            }
        }
        if let Some(e) = failure {
            for w in 0..self.workers.len() {
                let (tx, rx) = sync_channel(1);
                self.post(w, Command::Abort(tx));
                let _ = rx.recv_timeout(Duration::from_secs(10));
            }
            // Aborted instances free their slots once they are gone.
            return Err(RunError::Setup(e));
        }
        let prepared = sluice_sys::monotonic_ns();
        // Commit everywhere.
        let mut commits: Vec<std::sync::mpsc::Receiver<Committed>> = Vec::new();
        for w in 0..self.workers.len() {
            let (tx, rx): (Reply<Committed>, _) = sync_channel(1);
            self.post(w, Command::Commit(tx));
            commits.push(rx);
        }
        let mut applied = Applied {
            diff,
            ..Applied::default()
        };
        for rx in commits {
            if let Ok(c) = rx.recv_timeout(Duration::from_secs(30)) {
                applied.quiesce_us = applied.quiesce_us.max(c.quiesce_us);
                applied.quiesce_timed_out |= c.quiesce_timed_out;
                for f in c.reconfigure_failed {
                    if !applied.reconfigure_failed.contains(&f) {
                        applied.reconfigure_failed.push(f);
                    }
                }
            }
        }
        let workers = self.workers.len();
        for (w, (_, slots)) in replies.into_iter().enumerate() {
            for (id, slot) in slots {
                let per = self.nf_slots_mut(id);
                per.resize(workers, u32::MAX);
                per[w] = slot;
            }
        }
        for &id in &applied.diff.gone_nfs {
            if let Some(s) = self.nf_slots.get_mut(id as usize) {
                *s = None;
            }
        }
        self.settings.restart = restart;
        self.settings.wakeup = spec.settings.wakeup.clone();
        self.settings.scheduler = spec.settings.scheduler.clone();
        self.settings.backpressure = spec.settings.backpressure;
        self.settings.shells = spec.settings.shells;
        self.plan = plan;
        self.source = spec.source.as_str().to_string();
        let end = sluice_sys::monotonic_ns();
        applied.took_us = (end - t0) / 1000;
        applied.compile_us = (compiled - t0) / 1000;
        applied.prepare_us = (prepared - compiled) / 1000;
        applied.commit_us = (end - prepared) / 1000;
        Ok(applied)
    }

    fn nf_slots_mut(&mut self, id: u16) -> &mut Vec<u32> {
        if self.nf_slots.len() <= id as usize {
            self.nf_slots.resize(id as usize + 1, None);
        }
        self.nf_slots[id as usize].get_or_insert_with(Vec::new)
    }

    /// Per worker: its part of the change, and the slots it allocated
    /// (NF id, slot).
    #[allow(clippy::type_complexity)]
    fn changes_for(
        &mut self,
        plan: &Arc<Plan>,
        diff: &Diff,
        restart: &sluice_spec::RestartPolicy,
        (sched, entry): (SchedPolicy, EntryPolicy),
        shells: bool,
    ) -> Result<Vec<(Change, Vec<(u16, u32)>)>, RunError> {
        let workers = self.workers.len();
        // Open ports first, worker by worker and in id order: af_packet
        // fanout members join in that order, so member w is worker w.
        let mut ports: Vec<Vec<(u16, PortRt)>> = (0..workers).map(|_| Vec::new()).collect();
        for (w, list) in ports.iter_mut().enumerate() {
            for &id in &diff.new_ports {
                let p = plan.port(id).expect("diff names plan ports");
                let shard = Shard {
                    index: w as u32,
                    count: workers as u32,
                };
                let opened = PortRt::open(
                    &p.name,
                    &p.kind,
                    (
                        self.settings.generator_duration_ns,
                        plan.flow_capacity as usize,
                    ),
                    shard,
                    &self.arena,
                )
                .map_err(|e| RunError::Setup(e.to_string()))?;
                list.push((id, opened));
            }
        }
        let process: Vec<u16> = plan
            .nfs_in_order()
            .filter(|(_, n)| n.isolation == Isolation::Process)
            .map(|(i, _)| i)
            .collect();
        let mut out = Vec::new();
        let mut taken: Vec<Vec<u32>> = vec![Vec::new(); workers];
        for (w, ports) in ports.into_iter().enumerate() {
            let mut add = Vec::new();
            let mut slots = Vec::new();
            // The first process NF takes the slot its spare waits for,
            // whatever slots were given back since it was asked for.
            let mut spare_slot = self.spares[w].filter(|_| shells);
            for &id in &diff.new_nfs {
                let n = plan.nf(id).expect("diff names plan NFs");
                let domain = usize::from(n.domain);
                let want = match n.isolation {
                    Isolation::Process => spare_slot.take(),
                    Isolation::Inline => None,
                };
                let Some(slot) = self.slots[w]
                    .get_mut(domain)
                    .and_then(|s| s.take_preferring(want))
                else {
                    for (w, t) in taken.iter().enumerate() {
                        for &s in t {
                            self.free_slot(w, s);
                        }
                    }
                    return Err(RunError::Setup(format!(
                        "no free NF slot in trust domain {} on worker {w} (each domain holds {} \
                         NFs; replaced NFs need a second slot until their old instance has \
                         stopped)",
                        plan.domain_name(n.domain),
                        self.settings.max_nfs
                    )));
                };
                taken[w].push(slot);
                slots.push((id, slot));
                let exec = match n.isolation {
                    Isolation::Inline => {
                        NewExec::Inline(n.recipe.build(self.registry, 0).map_err(RunError::Spec)?)
                    }
                    Isolation::Process => NewExec::Process(Box::new(SpawnRequest {
                        slot,
                        generation: 0,
                        cpu: 0,
                        loop_cfg: LoopConfig::for_sharing(1, 1, None),
                        recipe: n.recipe.clone(),
                        name: n.name.clone(),
                        restarts: 0,
                        sandbox: n
                            .sandbox
                            .effective(sluice_sys::sandbox::can_change_identity()),
                        shell: shells,
                        domain: n.domain,
                        // Decided at each start by the worker's restart
                        // policy, which may change live.
                        standby: false,
                    })),
                };
                add.push(NewNf {
                    id,
                    slot,
                    name: n.name.clone(),
                    type_name: n.nf_type.name,
                    isolation: n.isolation,
                    drop_names: n.drop_reasons.clone(),
                    alloc_reserve: n.alloc_reserve,
                    exec,
                });
            }
            let mut last = None;
            for nf in &mut add {
                if let NewExec::Process(req) = &mut nf.exec {
                    let (cpu, cfg) = self.place(w as u32, nf.id, &process);
                    req.cpu = cpu as u32;
                    req.loop_cfg = cfg;
                    last = Some(&**req);
                }
            }
            // A change that started process NFs is most likely followed
            // by another like it (a platform scaling out): a spare like
            // its last one waits in the slot the next will take.
            let spare = last.filter(|_| shells).and_then(|req| {
                let slot = self.slots[w].get(usize::from(req.domain))?.peek()?;
                Some(SpawnRequest {
                    slot,
                    ..req.clone()
                })
            });
            if let Some(s) = &spare {
                self.spares[w] = Some(s.slot);
            }
            let mut reconfigure = Vec::new();
            for &id in &diff.reconfigure_nfs {
                let n = plan.nf(id).expect("diff names plan NFs");
                reconfigure.push(match n.isolation {
                    Isolation::Inline => Reconfigure::Inline(
                        id,
                        n.recipe.build(self.registry, 0).map_err(RunError::Spec)?,
                    ),
                    Isolation::Process => Reconfigure::Process(id, Box::new(n.recipe.clone())),
                });
            }
            out.push((
                Change {
                    plan: plan.clone(),
                    add_nfs: add,
                    remove_nfs: diff.gone_nfs.clone(),
                    reconfigure,
                    add_ports: ports,
                    remove_ports: diff.gone_ports.clone(),
                    quiesce: diff.quiesce,
                    added_chains: diff.only_adds().then(|| diff.new_chains.clone()),
                    spare,
                    restart: restart.clone(),
                    sched,
                    entry,
                },
                slots,
            ));
        }
        Ok(out)
    }

    /// Where a process NF runs and how it shares its core. One worker: the
    /// NFs take the other cores round-robin (in id order). Several: each
    /// worker's NFs share its core (every core already runs a worker),
    /// which also keeps the packets they touch in that core's caches.
    fn place(&self, w: u32, id: u16, process: &[u16]) -> (usize, LoopConfig) {
        let s = &self.settings;
        let batch = usize::from(s.batch);
        let busy = s.wakeup.busy_poll_us;
        if s.workers > 1 {
            return (
                self.placement.shard_cpu(w as usize),
                LoopConfig::beside_worker(batch, busy),
            );
        }
        let k = process.iter().position(|&i| i == id).unwrap_or(0);
        let cpu = self.placement.nf_cpu(k);
        let sharing = (0..process.len())
            .filter(|&j| self.placement.nf_cpu(j) == cpu)
            .count();
        (cpu, LoopConfig::for_sharing(batch, sharing, busy))
    }
}
