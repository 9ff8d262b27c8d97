//! The 2 MiB huge pages the peers need (OVS-DPDK refuses to start
//! without them; testpmd and sluice use them too, so all three keep their
//! packets in the same kind of memory). If too few are free, the pool is
//! grown for the benchmark and given back to its old size afterwards.

const POOL: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";

/// Huge pages added for the benchmark; dropping it removes them.
pub(crate) struct Reserve {
    /// The pool's size before, if it was changed.
    restore: Option<u64>,
}

impl Reserve {
    /// Makes sure at least `pages` huge pages are free.
    pub fn at_least(pages: u64) -> Result<Reserve, String> {
        let free = read("free_hugepages")?;
        if free >= pages {
            return Ok(Reserve { restore: None });
        }
        let total = read("nr_hugepages")?;
        let want = total + (pages - free);
        std::fs::write(format!("{POOL}/nr_hugepages"), want.to_string()).map_err(|e| {
            format!(
                "needs {pages} free 2 MiB huge pages, {free} are free, and cannot add more: {e} \
                 (run as root, or `echo {want} > {POOL}/nr_hugepages`)"
            )
        })?;
        let reserve = Reserve {
            restore: Some(total),
        };
        let now = read("free_hugepages")?;
        if now < pages {
            return Err(format!(
                "needs {pages} free 2 MiB huge pages; the kernel found only {now} \
                 (memory too fragmented or too small)"
            ));
        }
        Ok(reserve)
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        if let Some(n) = self.restore {
            let _ = std::fs::write(format!("{POOL}/nr_hugepages"), n.to_string());
        }
    }
}

fn read(name: &str) -> Result<u64, String> {
    std::fs::read_to_string(format!("{POOL}/{name}"))
        .map_err(|e| format!("cannot read {POOL}/{name}: {e} (no 2 MiB huge pages here?)"))?
        .trim()
        .parse()
        .map_err(|e| format!("{POOL}/{name}: {e}"))
}
