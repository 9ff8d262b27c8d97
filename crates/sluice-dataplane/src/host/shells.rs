//! Shells: NFs the template has already built, so an instance starts as a
//! fork and nothing more (LightVM's pre-created shells, seed 000 §2; the
//! lifecycle issue's item 1).
//!
//! Without a shell every NF process builds its NF after the fork: parsing
//! its config, allocating its tables, compiling its rules. That is most of
//! a start for the heavier types (a router's longest-prefix tables took
//! 19 ms per restart in the soak, a forwarder's nothing), and it is paid
//! again at every restart and by every instance of the same recipe. With
//! shells the template builds each recipe once, keeps the built NF, and
//! every fork inherits it copy-on-write: the child takes its own copy out
//! of its own address space and goes straight to confinement and its loop.
//!
//! The contract that makes this sound, checked here:
//!
//! - **A build opens no descriptors.** Files and sockets come from
//!   `NetworkFunction::open_handles`, which every instance runs after the
//!   fork. A child closes every inherited descriptor first thing, so an NF
//!   whose build opened one would hold a dead number. The template checks
//!   its lowest free descriptor number before and after each build; an NF
//!   type that kept one gets no shell (its instances build themselves, as
//!   before).
//! - **A build that fails or panics is not cached**: the child builds
//!   itself and reports the error in its own log, exactly as without
//!   shells.
//! - The key is the recipe (type, config, recorded answers, and the name
//!   if the build read it: `sluice_nf::NfName`), and whether the instance
//!   is a restart when its build asked that (`Resolver::restarts`: a
//!   restarted pcap mirror appends to its file), the one thing besides the
//!   recipe a build may read. Most builds ask neither, so one shell serves
//!   every NF of a type and config, first starts and restarts alike.
//!
//! The template is the only user and runs one thread, so this is plain
//! owned state. At most `SHELLS_MAX` shells stay, least recently used
//! first out: a restart (exit, then a spawn of the same recipe) finds its
//! shell, and the template's memory, which every fork copies the page
//! tables of, stays bounded.

use std::collections::HashMap;

use sluice_nf::{NetworkFunction, NfType};

use super::proto::SpawnRequest;

/// Shells kept per template, in use or idle (least recently used go
/// first). Each fork copies the template's page tables, so the shells it
/// holds make every start dearer: unbounded, 200 distinct forwarders'
/// shells took private memory per NF from 84 to 104 KiB and starts from
/// 0.6 to 1.1 ms over the run (`bench instantiate`).
pub const SHELLS_MAX: usize = 64;

/// Which shell a child was forked from.
pub type ShellId = u64;

/// The serialised recipe, and whether the instance is a restart if its
/// build asked (`None`: the build is the same either way).
type Key = (Vec<u8>, Option<bool>);

struct Shell {
    nf: Box<dyn NetworkFunction>,
    key: Key,
    /// Its build did not read the NF's name: `key` has none.
    name_free: bool,
    /// `Shells::clock` when it was last used (for eviction).
    last_used: u64,
}

/// The built NFs of one template.
pub struct Shells {
    by_key: HashMap<Key, ShellId>,
    shells: HashMap<ShellId, Shell>,
    next_id: ShellId,
    clock: u64,
    /// Recipe types that opened descriptors in their build: never shelled.
    unshellable: Vec<String>,
    /// Says whether a build kept a descriptor: compared before and after
    /// it (the lowest free number; tests, which share the process with
    /// other threads opening files, count their own).
    descriptors: fn() -> Option<usize>,
    /// Data pages of the process at its last collapse onto huge pages.
    collapsed_at: u64,
    /// The process runs at the template's raised priority
    /// (`template::TEMPLATE_NICE`), which builds leave for the NFs'.
    raised: bool,
}

impl Default for Shells {
    fn default() -> Self {
        Shells {
            by_key: HashMap::new(),
            shells: HashMap::new(),
            next_id: 0,
            clock: 0,
            unshellable: Vec::new(),
            descriptors: lowest_free_descriptor,
            collapsed_at: 0,
            raised: false,
        }
    }
}

impl Shells {
    /// The shells of a template running at `template::TEMPLATE_NICE`.
    pub fn raised() -> Shells {
        Shells {
            raised: true,
            ..Shells::default()
        }
    }

    /// The shell for `req`, built now if there is none, counted as used by
    /// one more instance; `None` when the instance must build itself (no
    /// shell wanted, or its build failed or opened descriptors).
    pub fn acquire(&mut self, req: &SpawnRequest, registry: &[NfType]) -> Option<ShellId> {
        if let Some(id) = self.find(req) {
            return Some(id);
        }
        if !req.shell || self.unshellable.contains(&req.recipe.type_name) {
            return None;
        }
        let restarted = req.restarts > 0;
        let before = (self.descriptors)();
        // A build can take tens of milliseconds (a router's tables) on a
        // core where NFs carry traffic: at the NFs' priority, not the
        // template's raised one.
        let raised = self.raised.then(sluice_sys::own_nice).flatten();
        if raised.is_some() {
            let _ = sluice_sys::set_own_nice(0);
        }
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            req.recipe.build_telling(registry, req.restarts)
        }));
        if let Some(n) = raised {
            let _ = sluice_sys::set_own_nice(n);
        }
        let (nf, looked) = match built {
            Ok((Ok(nf), looked)) => (nf, looked),
            // The child builds again and reports it in its own log.
            Ok((Err(_), _)) | Err(_) => return None,
        };
        let key = (
            req.recipe.key(!looked.name),
            looked.restarts.then_some(restarted),
        );
        if before.is_none() || (self.descriptors)() != before {
            // Dropped here, in the template, where its descriptors are
            // valid, so they are closed properly.
            drop(nf);
            self.unshellable.push(req.recipe.type_name.clone());
            return None;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.by_key.insert(key.clone(), id);
        self.shells.insert(
            id,
            Shell {
                nf,
                key,
                name_free: !looked.name,
                last_used: self.clock,
            },
        );
        self.evict();
        // Every fork copies the template's page tables: on 2 MiB pages the
        // shells' tables cost a fork 0.3 ms instead of up to 1.4 ms (the
        // realistic chain's four shells, ~120 MB, measured in the template).
        // Only after real growth: collapsing walks all of the template's
        // memory, which after every small build (a forwarder's) made each
        // start dearer than the last.
        let data = data_pages();
        if data >= self.collapsed_at + COLLAPSE_GROWTH_PAGES {
            sluice_sys::collapse_private_memory();
            self.collapsed_at = data;
        }
        Some(id)
    }

    /// The shell for `req` if there is one, counted as used by one more
    /// instance; builds nothing.
    pub fn find(&mut self, req: &SpawnRequest) -> Option<ShellId> {
        if !req.shell {
            return None;
        }
        let restarted = req.restarts > 0;
        self.clock += 1;
        // Built without reading its name (one shell for every NF of the
        // recipe's type and config), or for this name.
        let id = [true, false].into_iter().find_map(|name_free| {
            let recipe = req.recipe.key(name_free);
            [None, Some(restarted)]
                .into_iter()
                .find_map(|r| self.by_key.get(&(recipe.clone(), r)).copied())
        })?;
        let s = self.shells.get_mut(&id).expect("index and shells agree");
        s.last_used = self.clock;
        Some(id)
    }

    /// The id the next shell built will have: every shell held now has a
    /// lower one.
    pub fn next_id(&self) -> ShellId {
        self.next_id
    }

    /// One instance of `id` is gone (exited, or its fork failed): the
    /// shell counts as just used, since a restart usually follows.
    pub fn release(&mut self, id: ShellId) {
        if let Some(s) = self.shells.get_mut(&id) {
            self.clock += 1;
            s.last_used = self.clock;
        }
    }

    /// Whether shell `id` serves every start of its recipe (its build did
    /// not ask for the restart count), so a standby made from it before
    /// its start is what that start would have built.
    pub fn serves_every_start(&self, id: ShellId) -> bool {
        self.shells.get(&id).is_some_and(|s| s.key.1.is_none())
    }

    /// Whether shell `id` serves NFs of any name (its build did not read
    /// its name).
    pub fn name_free(&self, id: ShellId) -> bool {
        self.shells.get(&id).is_some_and(|s| s.name_free)
    }

    /// In a freshly forked child: its own copy of shell `id`'s NF. The
    /// template's copy is untouched (the child's address space is its
    /// own), and the rest of this child's copy of the table is never used.
    pub fn take_in_child(&mut self, id: ShellId) -> Option<Box<dyn NetworkFunction>> {
        self.shells.remove(&id).map(|s| s.nf)
    }

    /// Shells held (in use or idle).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.shells.len()
    }

    /// Drops the least recently used shells beyond [`SHELLS_MAX`].
    fn evict(&mut self) {
        if self.shells.len() <= SHELLS_MAX {
            return;
        }
        // Evicting a shell in use is safe: its instances have their own
        // copies; its NF's next start builds a new one.
        let mut old: Vec<(u64, ShellId)> = self
            .shells
            .iter()
            .map(|(&id, s)| (s.last_used, id))
            .collect();
        old.sort_unstable();
        for &(_, id) in &old[..old.len() - SHELLS_MAX] {
            if let Some(s) = self.shells.remove(&id) {
                self.by_key.remove(&s.key);
            }
        }
    }
}

/// Growth of the template's data pages (16 MiB of 4 KiB pages) that makes
/// it move its memory to huge pages again.
const COLLAPSE_GROWTH_PAGES: u64 = 4096;

/// This process's data and stack pages (`/proc/self/statm`; 0 if unknown).
fn data_pages() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_ascii_whitespace().nth(5)?.parse().ok())
        .unwrap_or(0)
}

/// The lowest free descriptor number of this process (`None` if none is
/// free).
fn lowest_free_descriptor() -> Option<usize> {
    // The lowest free number: a descriptor the build kept takes it, so it
    // moves. Two system calls, where reading /proc/self/fd cost a walk
    // over every NF's output pipe per build.
    let probe = rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdin(), 0).ok()?;
    use std::os::fd::AsRawFd;
    Some(probe.as_raw_fd() as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_nf::{Batch, BuildContext, Context, FrameNeeds};
    use sluice_spec::SpecError;

    struct Quiet;
    impl NetworkFunction for Quiet {
        fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
    }

    thread_local! {
        /// Descriptors opened by this thread's builds (the test's count:
        /// other tests' threads open and close files at the same time).
        static OPENED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    }

    fn shells() -> Shells {
        Shells {
            descriptors: || Some(OPENED.get()),
            ..Shells::default()
        }
    }

    /// Holds a descriptor it opened in its build (what a shell must refuse).
    struct Holder(#[allow(dead_code)] std::fs::File);
    impl NetworkFunction for Holder {
        fn process(&mut self, _: &mut Batch<'_>, _: &mut Context<'_>) {}
    }

    fn quiet(_: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
        Ok(Box::new(Quiet))
    }
    fn holder(_: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
        OPENED.set(OPENED.get() + 1);
        Ok(Box::new(Holder(
            std::fs::File::open("/proc/self/stat").unwrap(),
        )))
    }
    /// Builds differently for a restart (as a pcap mirror appends).
    fn asking(c: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
        let _appends = c.resolver.restarts() > 0;
        Ok(Box::new(Quiet))
    }
    /// Reads its name (as an NF that logs it or names a file after it).
    fn naming(c: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
        let _label = format!("nf {}", c.name);
        Ok(Box::new(Quiet))
    }
    fn failing(c: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
        Err(c.config.error("refused"))
    }
    fn panicking(_: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
        panic!("build panicked")
    }

    const fn ty(name: &'static str, build: sluice_nf::BuildFn) -> NfType {
        NfType {
            name,
            summary: "",
            drop_reasons: &[],
            counters: &[],
            build,
            frames: FrameNeeds::MtuFrames,
        }
    }

    static REGISTRY: [NfType; 6] = [
        ty("quiet", quiet),
        ty("naming", naming),
        ty("asking", asking),
        ty("holder", holder),
        ty("failing", failing),
        ty("panicking", panicking),
    ];

    fn req(type_name: &str, name: &str, restarts: u32, shell: bool) -> SpawnRequest {
        let mut r = SpawnRequest::test_request(0);
        r.recipe.name = name.into();
        r.name = name.into();
        r.recipe.type_name = type_name.into();
        r.restarts = restarts;
        r.shell = shell;
        r
    }

    #[test]
    fn one_build_serves_every_instance_of_a_recipe() {
        let mut s = shells();
        let a = s.acquire(&req("quiet", "a", 0, true), &REGISTRY).unwrap();
        let a2 = s.acquire(&req("quiet", "a", 0, true), &REGISTRY).unwrap();
        assert_eq!(a, a2);
        // Its restarts too: its build never asked about restarts.
        assert_eq!(s.acquire(&req("quiet", "a", 3, true), &REGISTRY), Some(a));
        // And NFs of other names: its build never read its name.
        assert_eq!(s.acquire(&req("quiet", "b", 0, true), &REGISTRY), Some(a));
        assert!(s.name_free(a));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_build_that_reads_its_name_gets_a_shell_per_name() {
        let mut s = shells();
        let a = s.acquire(&req("naming", "a", 0, true), &REGISTRY).unwrap();
        let b = s.acquire(&req("naming", "b", 0, true), &REGISTRY).unwrap();
        assert_ne!(a, b);
        assert!(!s.name_free(a));
        assert_eq!(s.acquire(&req("naming", "a", 2, true), &REGISTRY), Some(a));
        // A name-free shell of another type is not one of them.
        let q = s.acquire(&req("quiet", "a", 0, true), &REGISTRY).unwrap();
        assert!(![a, b].contains(&q));
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn a_build_that_asks_about_restarts_gets_a_shell_per_answer() {
        let mut s = shells();
        let first = s.acquire(&req("asking", "m", 0, true), &REGISTRY).unwrap();
        let restarted = s.acquire(&req("asking", "m", 1, true), &REGISTRY).unwrap();
        assert_ne!(first, restarted);
        // Every later restart shares the restarted one.
        assert_eq!(
            s.acquire(&req("asking", "m", 7, true), &REGISTRY),
            Some(restarted)
        );
        assert_eq!(
            s.acquire(&req("asking", "m", 0, true), &REGISTRY),
            Some(first)
        );
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn a_shell_survives_its_last_instance_so_a_restart_finds_it() {
        let mut s = shells();
        let id = s.acquire(&req("quiet", "a", 1, true), &REGISTRY).unwrap();
        s.release(id);
        assert_eq!(s.acquire(&req("quiet", "a", 2, true), &REGISTRY), Some(id));
    }

    #[test]
    fn shells_are_bounded_least_recently_used_first() {
        let mut s = shells();
        let ids: Vec<ShellId> = (0..SHELLS_MAX + 10)
            .map(|i| {
                let id = s
                    .acquire(&req("naming", &format!("n{i}"), 0, true), &REGISTRY)
                    .unwrap();
                s.release(id);
                id
            })
            .collect();
        assert_eq!(s.len(), SHELLS_MAX);
        // The oldest went, the newest stayed.
        assert!(s.take_in_child(ids[0]).is_none());
        assert!(s.take_in_child(ids[SHELLS_MAX + 9]).is_some());
    }

    #[test]
    fn shells_in_use_count_toward_the_bound_and_a_used_one_stays() {
        let mut s = shells();
        let first = s.acquire(&req("naming", "n0", 0, true), &REGISTRY).unwrap();
        for i in 1..SHELLS_MAX + 5 {
            s.acquire(&req("naming", &format!("n{i}"), 0, true), &REGISTRY)
                .unwrap();
            // n0 restarts now and then: it stays among the recent.
            if i % 8 == 0 {
                assert_eq!(
                    s.acquire(&req("naming", "n0", 1, true), &REGISTRY),
                    Some(first)
                );
            }
        }
        assert_eq!(s.len(), SHELLS_MAX);
        assert!(s.shells.contains_key(&first));
    }

    #[test]
    fn builds_that_fail_panic_or_lowest_free_descriptor_get_no_shell() {
        let mut s = shells();
        assert_eq!(s.acquire(&req("failing", "f", 0, true), &REGISTRY), None);
        assert_eq!(s.acquire(&req("panicking", "p", 0, true), &REGISTRY), None);
        assert_eq!(s.acquire(&req("holder", "h", 0, true), &REGISTRY), None);
        // The type is remembered: no second build to find out again.
        assert_eq!(s.unshellable, vec!["holder".to_string()]);
        assert_eq!(s.acquire(&req("holder", "h2", 0, true), &REGISTRY), None);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn a_request_without_shell_builds_in_its_child() {
        let mut s = shells();
        assert_eq!(s.acquire(&req("quiet", "a", 0, false), &REGISTRY), None);
        assert_eq!(s.len(), 0);
    }

    #[test]
    fn the_child_takes_the_built_nf() {
        let mut s = shells();
        let id = s.acquire(&req("quiet", "a", 0, true), &REGISTRY).unwrap();
        assert!(s.take_in_child(id).is_some());
        assert!(s.take_in_child(id).is_none());
    }
}
