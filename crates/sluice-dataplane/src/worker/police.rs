//! The worker's side of its scheduler's watchdog (`crate::sched`): it runs
//! the watchdog, tells it what the kernel says of its NF processes, and
//! acts on and logs what it did.

use super::Worker;
use crate::sched::Revocation;

/// Process NFs whose CPU time the worker reads per millisecond pass (each
/// read is a few microseconds; 1,000 NFs are all read about every 0.25 s).
const CPU_READS_PER_PASS: usize = 4;

impl Worker<'_> {
    /// Reads the CPU time of up to `n` process NFs, taking turns.
    pub(super) fn sample_cpu(&mut self, n: usize) {
        let ids = &self.derived.process_ids;
        for _ in 0..n.min(ids.len()) {
            self.cpu_cursor = (self.cpu_cursor + 1) % ids.len();
            let Some(nf) = self.nfs[ids[self.cpu_cursor] as usize].as_mut() else {
                continue;
            };
            let pid = nf.process_ref().map_or(0, |p| p.pid);
            nf.cpu.sample(pid);
        }
    }

    /// Runs the scheduler's watchdog (about every millisecond).
    pub(super) fn police(&mut self, now: u64) {
        let mut revoked = Vec::new();
        let nfs = &self.nfs;
        let mut times = |slot: u32| {
            let nf = nfs.iter().flatten().find(|n| n.slot == slot)?;
            let pid = sluice_sys::Pid::from_raw(nf.process_ref()?.pid)?;
            sluice_sys::sched_times(pid).ok()
        };
        self.sched.police(self.arena, now, &mut times, &mut revoked);
        for (slot, why) in revoked {
            self.revoked(slot, why);
        }
        self.sample_cpu(CPU_READS_PER_PASS);
    }

    /// Counts the watchdog's verdict on the NF in `slot` and acts on it.
    fn revoked(&mut self, slot: u32, why: Revocation) {
        let Some(nf) = self.nfs.iter_mut().flatten().find(|n| n.slot == slot) else {
            return;
        };
        let what = match why {
            Revocation::HeldOff => {
                nf.turns_held_off += 1;
                return;
            }
            Revocation::Stranger => return,
            Revocation::Hog => "kept its core's turn too long, running,",
            Revocation::Blocked => "kept its core's turn too long, blocked,",
        };
        nf.turns_revoked += 1;
        // A hog out of the turns would still take half the core from the NF
        // holding the turn (the kernel shares the core between two runnable
        // tasks): lower its priority too. A blocked NF uses no CPU; lowering
        // it would only starve it on a busy host.
        let pid = nf.process_ref().map_or(0, |p| p.pid);
        let lowered = why == Revocation::Hog
            && sluice_sys::Pid::from_raw(pid).is_some_and(|p| sluice_sys::deprioritize(p).is_ok());
        let line = format!(
            "{what} while other NFs waited: the scheduler took it back and it schedules itself \
             from now on{}",
            if lowered {
                ", at a lower CPU priority (nice 19)"
            } else {
                ""
            }
        );
        self.logbook
            .push(&nf.name, self.cfg.index, "platform", line);
    }
}
