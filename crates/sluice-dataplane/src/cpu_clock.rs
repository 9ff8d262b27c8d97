//! CPU time of an NF across its instances (HyperNF, seed 000 §3: charge
//! each NF the CPU it uses, its ring I/O included).
//!
//! A process NF reads and writes its rings itself, so the kernel's count
//! of its process's time on a CPU (`/proc/PID/schedstat`) includes its
//! ring I/O; the platform reads it, so an NF cannot misreport it. The
//! count ends with the process, so the worker reads it periodically and
//! keeps what earlier instances of the NF used. It keeps the current
//! instance's file open ([`sluice_sys::CpuTimesFile`]): a read is then a
//! `pread`, not a path walk and an open.

use std::sync::Arc;

use sluice_sys::CpuTimesFile;

/// The CPU time of one NF's instances, and how often the kernel put them
/// on a CPU (their context switches: what sleeping, waking and yielding
/// cost, seed 001 §4.3). A clone shares the open file (the worker hands
/// one to whoever asks for a report, who reads it on its own thread).
#[derive(Debug, Clone, Default)]
pub struct CpuClock {
    /// CPU time and switches of instances before the current one.
    done_ns: u64,
    done_switches: u64,
    /// The current instance's process, and its counts at the last look.
    pid: i32,
    last_ns: u64,
    last_switches: u64,
    /// The process whose file `file` is (tried once per process: `None`
    /// when it could not be kept, and then it is read by path).
    file_pid: i32,
    file: Option<Arc<CpuTimesFile>>,
}

impl CpuClock {
    /// Records that process `pid` had run `on_cpu_ns` in `switches` times
    /// on a CPU when last looked at. A new pid is a new instance: the old
    /// one's last reading is kept.
    pub fn observe(&mut self, pid: i32, on_cpu_ns: u64, switches: u64) {
        if pid != self.pid {
            self.done_ns += self.last_ns;
            self.done_switches += self.last_switches;
            self.pid = pid;
            self.last_ns = 0;
            self.last_switches = 0;
        }
        // The kernel's counts only grow; a smaller one is not this process.
        self.last_ns = self.last_ns.max(on_cpu_ns);
        self.last_switches = self.last_switches.max(switches);
    }

    /// Looks at process `pid` now (nothing if it is gone or `pid` is 0).
    pub fn sample(&mut self, pid: i32) {
        let Some(p) = sluice_sys::Pid::from_raw(pid) else {
            return;
        };
        if pid != self.file_pid {
            self.file_pid = pid;
            self.file = CpuTimesFile::open(p).ok().flatten().map(Arc::new);
        }
        let read = match &self.file {
            Some(f) => f.read(),
            None => sluice_sys::cpu_times(p),
        };
        if let Ok((on_cpu_ns, switches)) = read {
            self.observe(pid, on_cpu_ns, switches);
        }
    }

    /// CPU time of all instances, ns, as of the last look.
    pub fn total_ns(&self) -> u64 {
        self.done_ns + self.last_ns
    }

    /// Times the kernel put any instance on a CPU, as of the last look.
    pub fn switches(&self) -> u64 {
        self.done_switches + self.last_switches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_time_of_instances_that_ended() {
        let mut c = CpuClock::default();
        c.observe(10, 5_000, 3);
        c.observe(10, 7_000, 4);
        assert_eq!((c.total_ns(), c.switches()), (7_000, 4));
        c.observe(11, 1_000, 1);
        assert_eq!(
            (c.total_ns(), c.switches()),
            (8_000, 5),
            "a restart keeps the old instance's counts"
        );
        c.observe(11, 500, 0);
        assert_eq!((c.total_ns(), c.switches()), (8_000, 5), "never goes back");
    }

    #[test]
    fn reads_a_live_process_and_ignores_a_missing_one() {
        let mut c = CpuClock::default();
        c.sample(0);
        c.sample(i32::MAX);
        assert_eq!(c.total_ns(), 0);
        let t0 = sluice_sys::thread_cpu_ns();
        while sluice_sys::thread_cpu_ns() - t0 < 5_000_000 {
            std::hint::black_box(0);
        }
        // This test's thread (the harness's main thread may be idle).
        let tid = sluice_sys::gettid().as_raw_nonzero().get();
        c.sample(tid);
        assert!(c.total_ns() >= 5_000_000, "{}", c.total_ns());
        assert!(c.switches() >= 1, "it was put on a CPU to run");
    }

    #[test]
    fn keeps_one_file_per_process_and_a_clone_reads_it_too() {
        let tid = sluice_sys::gettid().as_raw_nonzero().get();
        let mut c = CpuClock::default();
        c.sample(tid);
        let file = c.file.clone().expect("kept");
        c.sample(tid);
        assert!(Arc::ptr_eq(&file, c.file.as_ref().unwrap()), "opened once");
        let mut asker = c.clone();
        let before = asker.total_ns();
        let t0 = sluice_sys::thread_cpu_ns();
        while sluice_sys::thread_cpu_ns() - t0 < 5_000_000 {
            std::hint::black_box(0);
        }
        asker.sample(tid);
        assert!(Arc::ptr_eq(&file, asker.file.as_ref().unwrap()), "shared");
        assert!(asker.total_ns() >= before + 5_000_000);
        c.sample(0);
        assert!(c.file.is_some(), "no pid: nothing changes");
    }
}
