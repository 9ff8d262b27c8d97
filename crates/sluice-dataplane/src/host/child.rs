//! What a freshly forked NF process does (the template's child): enter
//! the build phase of its sandbox, take its NF from the template's shell
//! or build it, open its handles, close the sandbox and run the NF loop;
//! or, as a standby, do all of that but the loop and wait to be handed a
//! start.
//! Apart from the template's own loop (`template/`) because this code
//! runs in another process, after the fork, with none of the template's
//! descriptors.

use std::sync::atomic::Ordering;

use sluice_mem::Arena;
use sluice_nf::NfType;
use sluice_sys::sandbox::RunFilter;
use sluice_sys::Pid;

use super::proto::SpawnRequest;
use crate::nf_loop::{exit_code, run_nf_loop};

/// What a freshly forked NF process starts from.
pub(super) struct Fork<'a> {
    /// The template's arena, this process's copy of the mapping.
    pub arena: &'a mut Arena,
    /// The worker its NF wakes.
    pub worker: u32,
    /// What to run.
    pub req: &'a SpawnRequest,
    /// The NF types the platform knows.
    pub registry: &'a [NfType],
    /// Its NF from a shell, or `None` to build it from the recipe.
    pub built: Option<Box<dyn sluice_nf::NetworkFunction>>,
    /// The template (its parent).
    pub template: Pid,
    /// The template's compiled allow-list.
    pub filter: Option<&'a RunFilter>,
    /// A standby made as the worker's spare: for any NF of the request's
    /// recipe, so named `sluice-spare` until it knows which.
    pub spare: bool,
}

/// Runs the NF of `f.req` as this process (a fresh fork of the template).
///
/// What it writes on stderr is its log: a pipe the template relays to the
/// platform as `Log` events (`sluice logs NF`), so it uses `eprintln!`.
///
/// Confinement ([`super::SandboxPlan`]) comes in two steps: `no_new_privs`
/// before the NF's own code runs, the rest (namespaces, uid, capabilities,
/// the allow-list) once the NF is built and has opened its handles, before
/// its first packet.
pub(super) fn nf_main(mut f: Fork<'_>) -> i32 {
    // The platform learns the pid here before the template's word arrives.
    record_pid(f.arena, f.req.slot);
    match prepare(&mut f, "nf") {
        Ok(nf) => run(&f, f.req.restarts, f.req.loop_cfg, nf),
        Err(code) => {
            // Said on stderr already; the platform reads the state.
            let ctl = f.arena.nf_control(f.req.slot);
            ctl.state
                .store(sluice_mem::control::state::FAILED, Ordering::Release);
            code
        }
    }
}

/// Runs a standby of `f.req`'s slot (`super::standby`): made ready
/// exactly as [`nf_main`] makes an instance, sandbox closed, without
/// touching the slot (another instance may run in it), then parked on its
/// stdin until the template hands it a start. A failure before that is
/// the template's to see; the end of its stdin (the template let it go)
/// is a clean exit.
pub(super) fn standby_main(mut f: Fork<'_>) -> i32 {
    // Not `nf:NAME` while it stands by: what looks for the NF's process
    // by name finds the one that serves.
    let nf = match prepare(&mut f, "sb") {
        Ok(nf) => nf,
        Err(code) => return code,
    };
    let Some(start) = super::standby::wait_for_start() else {
        return exit_code::STOPPED;
    };
    // A spare serves an NF of another name than the request it was made
    // from: the start names it.
    let name = &start.name;
    if let Err(e) = start.check(f.req) {
        eprintln!("sluice: standby of NF {name}: {e}");
        return exit_code::SPAWN_FAILED;
    }
    // Allowed by its filter (`prctl(PR_SET_NAME)`): renaming itself is
    // all the hand-over needs; the sandbox closed before it waited.
    sluice_sys::set_thread_name(&format!("nf:{name}"));
    record_pid(f.arena, f.req.slot);
    run(&f, start.restarts, start.loop_cfg, nf)
}

/// Writes this process's pid into `slot`'s control block.
fn record_pid(arena: &Arena, slot: u32) {
    arena.nf_control(slot).pid.store(
        sluice_sys::getpid().as_raw_nonzero().get() as u32,
        Ordering::Relaxed,
    );
}

/// Everything before the first packet: trust domain, sandbox, pinning,
/// the NF (from its shell or built) and its handles; the process is named
/// `{prefix}:NAME`. An error is printed and returned as the exit code.
fn prepare(f: &mut Fork<'_>, prefix: &str) -> Result<Box<dyn sluice_nf::NetworkFunction>, i32> {
    let req = f.req;
    let name = &req.name;
    // Another trust domain's packets leave this address space before any
    // of the NF's own code runs (its shell was built in the template).
    let kept = f.arena.keep_domain(usize::from(req.domain));
    let sandbox_failed = |step: &str, e: std::io::Error| {
        eprintln!("sluice: NF {name} cannot {step} its sandbox: {e}");
        exit_code::SANDBOX_FAILED
    };
    if let Err(e) = req.sandbox.enter_build_phase() {
        return Err(sandbox_failed("enter", e));
    }
    if let Err(e) = kept {
        return Err(sandbox_failed("enter", e));
    }
    if f.spare {
        sluice_sys::set_thread_name("sluice-spare");
    } else {
        sluice_sys::set_thread_name(&format!("{prefix}:{name}"));
    }
    if let Err(e) = sluice_sys::pin_to_cpu(req.cpu as usize) {
        eprintln!("sluice: NF {name} cannot be pinned to CPU {}: {e}", req.cpu);
    }
    let built = match f.built.take() {
        Some(nf) => Ok(nf),
        None => req.recipe.build(f.registry, req.restarts),
    };
    let mut nf = match built {
        Ok(nf) => nf,
        Err(e) => {
            eprintln!("sluice: NF {name} failed to build: {e}");
            return Err(exit_code::BUILD_FAILED);
        }
    };
    nf.open_handles();
    if req.sandbox.seccomp {
        // A backtrace (RUST_BACKTRACE) reads the binary and the working
        // directory, which the filter forbids: the NF would die of SIGSYS
        // instead of reporting its panic. Print the message and place.
        std::panic::set_hook(Box::new(|info| eprintln!("{info}")));
    }
    // Back to the NFs' priority (the template's, inherited, is for the
    // start only), before the sandbox closes over setpriority.
    let _ = sluice_sys::set_own_nice(0);
    if let Err(e) = req.sandbox.confine(req.slot, f.template, f.filter) {
        return Err(sandbox_failed("close", e));
    }
    Ok(nf)
}

/// The NF loop, from the first packet on.
fn run(
    f: &Fork<'_>,
    restarts: u32,
    loop_cfg: crate::polling::LoopConfig,
    mut nf: Box<dyn sluice_nf::NetworkFunction>,
) -> i32 {
    let (req, registry) = (f.req, f.registry);
    let rebuild = |bytes: &[u8]| -> Result<Box<dyn sluice_nf::NetworkFunction>, String> {
        let recipe: crate::recipe::NfRecipe =
            postcard::from_bytes(bytes).map_err(|e| format!("unreadable config message: {e}"))?;
        recipe.build(registry, restarts).map_err(|e| e.to_string())
    };
    run_nf_loop(
        f.arena,
        req.slot,
        f.worker,
        usize::from(req.domain),
        loop_cfg,
        nf.as_mut(),
        &rebuild,
    )
}
