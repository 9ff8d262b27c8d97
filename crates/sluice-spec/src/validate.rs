//! Checks on the typed spec: value ranges, names, each NF (in
//! `validate_nfs`) and cross-references (in `validate_chains`). Works for parsed specs (errors are
//! located through the document tree) and for specs built by code (errors
//! are located at the enclosing port, NF or chain).

use foldhash::{HashMap, HashMapExt};

use crate::check::{name, port_range, Ctx, Locate, SpecLocator};
use crate::decode_ports::prefix_family_error;
use crate::error::SpecError;
use crate::fields::Res;
use crate::index::{Grown, SpecIndex};
use crate::limits;
use crate::model::Spec;
use crate::net;
use crate::ports::{GeneratorSpec, PortKind, SizeSpec};
use crate::validate_chains::{self, Names};

impl Spec {
    /// Validates the whole spec, e.g. one built by code. `known_nf_types`
    /// lists the NF types that exist; an NF of any other type is an error.
    /// Errors are located at the enclosing port, NF or chain (for parsed
    /// specs, [`crate::load`] reports exact positions).
    ///
    /// # Errors
    /// The first problem found, as a [`SpecError`].
    pub fn validate(&self, known_nf_types: &[&str]) -> Result<(), SpecError> {
        validate(self, known_nf_types, &SpecLocator(self))
    }
}

/// Validates `spec` completely; `known_nf_types` lists the NF types that exist.
pub(crate) fn validate(spec: &Spec, known_nf_types: &[&str], locator: &dyn Locate) -> Res<()> {
    let whole = Ctx {
        spec,
        locator,
        from: Grown::NOTHING,
        base: None,
    };
    validate_in(&whole, known_nf_types)
}

/// Validates `spec`, a valid spec indexed by `base` with objects appended
/// whose names it does not hold (see [`crate::index`]): checks the added
/// objects only, and gives the error a whole validation would give first.
pub(crate) fn validate_addition(
    spec: &Spec,
    known_nf_types: &[&str],
    locator: &dyn Locate,
    base: &SpecIndex,
) -> Res<()> {
    let added = Ctx {
        spec,
        locator,
        from: base.of_lengths(),
        base: Some(base),
    };
    validate_in(&added, known_nf_types)
}

/// The checks, in the order that decides which error comes first, over
/// the objects from `cx.from` on. Settings are checked whatever the
/// scope: an addition cannot change them, and they cost nothing.
fn validate_in(cx: &Ctx<'_>, known_nf_types: &[&str]) -> Res<()> {
    let (cx, spec, from) = (cx, cx.spec, cx.from);
    settings(cx)?;
    crate::validate_domains::settings(cx)?;
    if spec.ports.is_empty() {
        return Err(cx.err("ports", "no ports defined: a spec needs at least one port"));
    }
    for (i, p) in spec.ports.iter().enumerate().skip(from.ports) {
        name(cx, || format!("ports[{i}].name"), &p.name)?;
        port(cx, &format!("ports[{i}]"), &p.kind)?;
    }
    for (i, nf) in spec.nfs.iter().enumerate().skip(from.nfs) {
        crate::validate_nfs::nf(cx, i, nf, known_nf_types)?;
    }
    crate::validate_domains::nfs(cx)?;
    crate::wakeup_resolve::validate(cx)?;
    if spec.chains.is_empty() {
        return Err(cx.err(
            "chains",
            "no chains defined: a spec needs at least one chain",
        ));
    }
    for (i, c) in spec.chains.iter().enumerate().skip(from.chains) {
        name(cx, || format!("chains[{i}].name"), &c.name)?;
    }
    unique_names(cx)?;
    sharding(cx)?;
    // Built once names are known unique: the chains' references and
    // tenancy look names up in it.
    let names = Names::of(cx);
    validate_chains::chains(cx, &names)?;
    crate::validate_tenants::tenants(cx, &names)
}

/// With `workers > 1` every worker runs its own copy of the data plane
/// (flow table, NF instances, port queues) on a share of the flows, as
/// RSS queues would: that needs ports that can be split by flow. NFs are
/// replicated per worker, inline or as processes.
fn sharding(cx: &Ctx<'_>) -> Res<()> {
    let workers = cx.spec.settings.workers;
    if workers <= 1 {
        return Ok(());
    }
    for (i, p) in cx.spec.ports.iter().enumerate().skip(cx.from.ports) {
        match &p.kind {
            PortKind::Sink(_) => {}
            PortKind::AfPacket(n) => {
                // Every worker's copy joins one fanout group; only the hash
                // mode keeps a flow (both directions) on one worker.
                if let Some(mode) = n.options.get("fanout") {
                    if mode.as_str() != Some("hash") {
                        return Err(mode.error(format!(
                            "port {} has fanout `{}`, but settings.workers = {workers} spreads its packets over the workers with the kernel's fanout, and only `hash` (symmetric: both directions of a flow reach the same worker) keeps each flow on one worker; use `fanout: hash` or set `workers: 1`",
                            p.name,
                            mode.as_str().unwrap_or("?")
                        )));
                    }
                }
            }
            PortKind::Generator(g) if g.flows >= u32::from(workers) => {}
            PortKind::Generator(g) => {
                return Err(cx.err(
                    format!("ports[{i}].flows"),
                    format!(
                        "generator {} has {} flows but settings.workers = {workers}: each worker sends its own share of the flows, so it needs at least one flow per worker",
                        p.name, g.flows
                    ),
                ))
            }
            other => {
                return Err(cx.err(
                    format!("ports[{i}].kind"),
                    format!(
                        "port {} is of kind `{}`, which one worker serves; settings.workers = {workers} is supported with generator, sink and af_packet ports (set `workers: 1`)",
                        p.name,
                        other.kind_name()
                    ),
                ))
            }
        }
    }
    Ok(())
}

fn settings(cx: &Ctx<'_>) -> Res<()> {
    let s = &cx.spec.settings;
    cx.limit("settings.buffers", limits::BUFFERS, s.buffers.into())?;
    cx.limit("settings.ring_size", limits::RING_SIZE, s.ring_size.into())?;
    cx.limit("settings.batch", limits::BATCH, s.batch.into())?;
    cx.limit("settings.workers", limits::WORKERS, s.workers.into())?;
    cx.limit(
        "settings.restart.max_restarts",
        limits::MAX_RESTARTS,
        s.restart.max_restarts.into(),
    )?;
    cx.limit(
        "settings.flow_table.capacity",
        limits::FLOW_CAPACITY,
        s.flow_table.capacity.into(),
    )?;
    cx.limit(
        "settings.flow_table.idle_timeout_ms",
        limits::IDLE_TIMEOUT_MS,
        s.flow_table.idle_timeout_ms,
    )?;
    cx.limit(
        "settings.flow_table.close_timeout_ms",
        limits::CLOSE_TIMEOUT_MS,
        s.flow_table.close_timeout_ms,
    )?;
    if let Some(us) = s.wakeup.busy_poll_us {
        cx.limit("settings.wakeup.busy_poll_us", limits::BUSY_POLL_US, us)?;
    }
    if s.restart.standby && !s.shells {
        return Err(cx.err(
            "settings.restart.standby",
            "a standby is forked from its NF's shell: `standby: true` needs `shells: true`",
        ));
    }
    if u32::from(s.batch) > s.ring_size {
        return Err(cx.err(
            "settings.batch",
            format!(
                "batch ({}) must not exceed ring_size ({})",
                s.batch, s.ring_size
            ),
        ));
    }
    Ok(())
}

fn port(cx: &Ctx<'_>, at: &str, kind: &PortKind) -> Res<()> {
    let field = |f: &str| format!("{at}.{f}");
    match kind {
        PortKind::Generator(g) => generator(cx, at, g),
        PortKind::Sink(_) => Ok(()),
        PortKind::PcapIn(p) => {
            if !p.path.is_file() {
                let what = if p.path.exists() {
                    "is not a regular file"
                } else {
                    "does not exist"
                };
                return Err(cx.err(
                    field("path"),
                    format!(
                        "pcap file {} {what} (relative paths are resolved against the spec file's directory)",
                        p.path.display()
                    ),
                ));
            }
            if let Some(pace) = p.pace {
                if !(pace.is_finite() && pace > 0.0) {
                    return Err(cx.err(
                        field("pace"),
                        format!("pace must be a speed factor above 0, got {pace}"),
                    ));
                }
            }
            Ok(())
        }
        PortKind::PcapOut(p) => {
            if p.path.is_dir() {
                return Err(cx.err(
                    field("path"),
                    format!("{} is a directory, not a file name", p.path.display()),
                ));
            }
            if let Some(dir) = p.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    return Err(cx.err(
                        field("path"),
                        format!(
                            "directory {} for pcap file {} does not exist",
                            dir.display(),
                            p.path.display()
                        ),
                    ));
                }
            }
            cx.limit(field("snaplen"), limits::SNAPLEN, p.snaplen.into())
        }
        PortKind::AfXdp(n) | PortKind::AfPacket(n) | PortKind::Tap(n) | PortKind::Dpdk(n) => {
            if n.interface.is_empty() {
                return Err(cx.err(field("interface"), "interface must not be empty"));
            }
            Ok(())
        }
    }
}

fn generator(cx: &Ctx<'_>, at: &str, g: &GeneratorSpec) -> Res<()> {
    let field = |f: &str| format!("{at}.{f}");
    cx.limit(field("flows"), limits::FLOWS, g.flows.into())?;
    if let SizeSpec::Fixed(size) = g.size {
        cx.limit(field("size"), limits::FRAME_SIZE, size.into())?;
    }
    if let Some(rate) = g.rate_pps {
        cx.limit(field("rate_pps"), limits::RATE_PPS, rate)?;
    }
    cx.limit(
        field("packets_per_flow"),
        limits::PACKETS_PER_FLOW,
        g.packets_per_flow.into(),
    )?;
    for (key, p) in [("src_prefix", &g.src_prefix), ("dst_prefix", &g.dst_prefix)] {
        net::check_prefix(p).map_err(|m| cx.err(field(key), m))?;
        if let Some(m) = prefix_family_error(key, p, g.ip_version) {
            return Err(cx.err(field(key), m));
        }
    }
    port_range(cx, &field("src_ports"), &g.src_ports)?;
    port_range(cx, &field("dst_ports"), &g.dst_ports)
}

/// Names are unique across ports, NFs and chains: those checked (an
/// addition's names were checked free in the spec before it, see
/// `crate::add_to`).
fn unique_names(cx: &Ctx<'_>) -> Res<()> {
    let (spec, from) = (cx.spec, cx.from);
    // Where a name is, as (list, index): its path is made only for an
    // error.
    let all = (spec.ports.iter().enumerate().skip(from.ports))
        .map(|(i, p)| (&p.name, ("port", "ports", i)))
        .chain(
            (spec.nfs.iter().enumerate().skip(from.nfs)).map(|(i, n)| (&n.name, ("NF", "nfs", i))),
        )
        .chain(
            (spec.chains.iter().enumerate().skip(from.chains))
                .map(|(i, c)| (&c.name, ("chain", "chains", i))),
        );
    let mut seen: HashMap<&str, (&str, &str, usize)> = HashMap::with_capacity(
        (spec.ports.len() - from.ports)
            + (spec.nfs.len() - from.nfs)
            + (spec.chains.len() - from.chains),
    );
    for (name, (what, list, i)) in all {
        if let Some(&(first_what, first_list, k)) = seen.get(name.as_str()) {
            let first_at = format!("{first_list}[{k}]");
            let first_name = format!("{first_at}.name");
            return Err(cx.err(
                format!("{list}[{i}].name"),
                format!(
                    "duplicate name \"{name}\": already used by {first_what} {first_at}{}; \
                     names must be unique across ports, NFs and chains",
                    cx.line_note(&first_name)
                ),
            ));
        }
        seen.insert(name, (what, list, i));
    }
    Ok(())
}
