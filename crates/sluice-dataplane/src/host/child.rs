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

/// Runs the NF of `req` as this process (a fresh fork of the template):
/// `built` is its NF from a shell, or `None` to build it from the recipe.
///
/// What it writes on stderr is its log: a pipe the template relays to the
/// platform as `Log` events (`sluice logs NF`), so it uses `eprintln!`.
///
/// Confinement ([`super::SandboxPlan`]) comes in two steps: `no_new_privs`
/// before the NF's own code runs, the rest (namespaces, uid, capabilities,
/// the allow-list) once the NF is built and has opened its handles, before
/// its first packet.
pub(super) fn nf_main(
    arena: &mut Arena,
    worker: u32,
    req: &SpawnRequest,
    nf: (&[NfType], Option<Box<dyn sluice_nf::NetworkFunction>>),
    template: Pid,
    filter: Option<&RunFilter>,
) -> i32 {
    let ctl = arena.nf_control(req.slot);
    // The platform learns the pid here before the template's word arrives.
    ctl.pid.store(
        sluice_sys::getpid().as_raw_nonzero().get() as u32,
        Ordering::Relaxed,
    );
    let registry = nf.0;
    match prepare(arena, req, nf, template, filter) {
        Ok(nf) => run(arena, (worker, registry), req, req.restarts, nf),
        Err(code) => {
            // Said on stderr already; the platform reads the state.
            let ctl = arena.nf_control(req.slot);
            ctl.state
                .store(sluice_mem::control::state::FAILED, Ordering::Release);
            code
        }
    }
}

/// Runs a standby of `req`'s slot (`super::standby`): made ready exactly
/// as [`nf_main`] makes an instance, sandbox closed, without touching the
/// slot (another instance may run in it), then parked on its stdin until
/// the template hands it a start. A failure before that is the
/// template's to see; the end of its stdin (the template let it go) is a
/// clean exit.
pub(super) fn standby_main(
    arena: &mut Arena,
    worker: u32,
    req: &SpawnRequest,
    nf: (&[NfType], Option<Box<dyn sluice_nf::NetworkFunction>>),
    template: Pid,
    filter: Option<&RunFilter>,
) -> i32 {
    let registry = nf.0;
    let name = &req.recipe.name;
    let nf = match prepare(arena, req, nf, template, filter) {
        Ok(nf) => nf,
        Err(code) => return code,
    };
    // Not `nf:NAME` while it stands by: what looks for the NF's process
    // by name finds the one that serves.
    sluice_sys::set_thread_name(&format!("sb:{name}"));
    let Some(start) = super::standby::wait_for_start() else {
        return exit_code::STOPPED;
    };
    if let Err(e) = start.check(req) {
        eprintln!("sluice: standby of NF {name}: {e}");
        return exit_code::SPAWN_FAILED;
    }
    // Allowed by its filter (`prctl(PR_SET_NAME)`): renaming itself is
    // all the hand-over needs; the sandbox closed before it waited.
    sluice_sys::set_thread_name(&format!("nf:{name}"));
    arena.nf_control(req.slot).pid.store(
        sluice_sys::getpid().as_raw_nonzero().get() as u32,
        Ordering::Relaxed,
    );
    run(arena, (worker, registry), req, start.restarts, nf)
}

/// Everything before the first packet: trust domain, sandbox, pinning,
/// the NF (from its shell or built) and its handles. An error is printed
/// and returned as the exit code.
fn prepare(
    arena: &mut Arena,
    req: &SpawnRequest,
    (registry, built): (&[NfType], Option<Box<dyn sluice_nf::NetworkFunction>>),
    template: Pid,
    filter: Option<&RunFilter>,
) -> Result<Box<dyn sluice_nf::NetworkFunction>, i32> {
    let name = &req.recipe.name;
    // Another trust domain's packets leave this address space before any
    // of the NF's own code runs (its shell was built in the template).
    let kept = arena.keep_domain(usize::from(req.domain));
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
    sluice_sys::set_thread_name(&format!("nf:{name}"));
    if let Err(e) = sluice_sys::pin_to_cpu(req.cpu as usize) {
        eprintln!("sluice: NF {name} cannot be pinned to CPU {}: {e}", req.cpu);
    }
    let built = match built {
        Some(nf) => Ok(nf),
        None => req.recipe.build(registry, req.restarts),
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
    if let Err(e) = req.sandbox.confine(req.slot, template, filter) {
        return Err(sandbox_failed("close", e));
    }
    Ok(nf)
}

/// The NF loop, from the first packet on.
fn run(
    arena: &Arena,
    (worker, registry): (u32, &[NfType]),
    req: &SpawnRequest,
    restarts: u32,
    mut nf: Box<dyn sluice_nf::NetworkFunction>,
) -> i32 {
    let rebuild = |bytes: &[u8]| -> Result<Box<dyn sluice_nf::NetworkFunction>, String> {
        let recipe: crate::recipe::NfRecipe =
            postcard::from_bytes(bytes).map_err(|e| format!("unreadable config message: {e}"))?;
        recipe.build(registry, restarts).map_err(|e| e.to_string())
    };
    run_nf_loop(
        arena,
        req.slot,
        worker,
        usize::from(req.domain),
        req.loop_cfg,
        nf.as_mut(),
        &rebuild,
    )
}
