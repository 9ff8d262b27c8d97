//! From the located YAML tree to a [`Spec`]: structure, types, unknown keys,
//! enumerated choices and value ranges, each reported at the offending node.
//! Cross-references are checked afterwards by `validate`.

use std::path::Path;

use crate::config_node::{ConfigNode, ConfigValue};
use crate::fields::{self, opt_int, Fields, Res};
use crate::limits;
use crate::location::SourceName;
use crate::model::{Isolation, NfSpec, Spec, Steer};
use crate::settings::{
    BackpressureMode, BackpressureSettings, FlowTableSettings, InlinePanic, KernelClass,
    RestartMode, RestartPolicy, SchedulerPolicy, SchedulerSettings, Settings, WakeupSettings,
};
use crate::{decode_chains, decode_ports};

/// Top-level keys.
const TOP_KEYS: [&str; 5] = ["version", "settings", "ports", "nfs", "chains"];

/// Builds the spec from the document tree. Relative file paths in ports
/// resolve against `base_dir`.
pub(crate) fn decode(root: &ConfigNode, source: &SourceName, base_dir: &Path) -> Res<Spec> {
    if root.is_null() {
        return Err(
            root.error("the spec is empty: expected a mapping with at least `ports` and `chains`")
        );
    }
    let top = Fields::of(root, "a spec")?;
    top.deny_unknown("the spec", &TOP_KEYS)?;
    if let Some(v) = top.opt("version") {
        if v.as_i64() != Some(1) {
            return Err(v.error(format!(
                "unsupported spec version {} (this sluice reads version 1)",
                v
            )));
        }
    }
    let settings = match top.opt("settings") {
        Some(node) => settings(node)?,
        None => Settings::default(),
    };
    let ports = list(&top, "ports", |node| decode_ports::port(node, base_dir))?;
    let nfs = list(&top, "nfs", nf)?;
    let chains = list(&top, "chains", decode_chains::chain_entry)?
        .into_iter()
        .flatten()
        .collect();
    Ok(Spec {
        source: source.clone(),
        settings,
        ports,
        nfs,
        chains,
    })
}

/// The sequence under `key` (absent or null = empty), each element decoded.
fn list<T>(top: &Fields<'_>, key: &str, item: impl Fn(&ConfigNode) -> Res<T>) -> Res<Vec<T>> {
    let Some(node) = top.opt(key) else {
        return Ok(Vec::new());
    };
    let items = node
        .as_seq()
        .ok_or_else(|| fields::type_error(node, "a sequence (a list of `- ...` entries)"))?;
    items.iter().map(item).collect()
}

fn settings(node: &ConfigNode) -> Res<Settings> {
    let f = Fields::of(node, "settings")?;
    f.deny_unknown(
        "settings",
        &[
            "buffers",
            "ring_size",
            "batch",
            "hugepages",
            "workers",
            "restart",
            "flow_table",
            "wakeup",
            "scheduler",
            "backpressure",
            "shells",
            "domains",
        ],
    )?;
    let d = Settings::default();
    let s = Settings {
        buffers: opt_int(&f, "buffers", limits::BUFFERS)?.unwrap_or(d.buffers),
        ring_size: opt_int(&f, "ring_size", limits::RING_SIZE)?.unwrap_or(d.ring_size),
        batch: opt_int(&f, "batch", limits::BATCH)?.unwrap_or(d.batch),
        hugepages: f
            .opt("hugepages")
            .map(fields::boolean)
            .transpose()?
            .unwrap_or(d.hugepages),
        workers: opt_int(&f, "workers", limits::WORKERS)?.unwrap_or(d.workers),
        restart: match f.opt("restart") {
            Some(n) => restart(n)?,
            None => d.restart,
        },
        flow_table: match f.opt("flow_table") {
            Some(n) => flow_table(n)?,
            None => d.flow_table,
        },
        wakeup: match f.opt("wakeup") {
            Some(n) => wakeup(n)?,
            None => d.wakeup,
        },
        scheduler: match f.opt("scheduler") {
            Some(n) => scheduler(n)?,
            None => d.scheduler,
        },
        backpressure: match f.opt("backpressure") {
            Some(n) => backpressure(n)?,
            None => d.backpressure,
        },
        shells: f
            .opt("shells")
            .map(fields::boolean)
            .transpose()?
            .unwrap_or(d.shells),
        domains: match f.opt("domains") {
            Some(n) => crate::domains::decode(n)?,
            None => d.domains,
        },
    };
    if u32::from(s.batch) > s.ring_size {
        if let Some(n) = f.opt("batch") {
            return Err(n.error(format!(
                "batch ({}) must not exceed ring_size ({})",
                s.batch, s.ring_size
            )));
        }
    }
    Ok(s)
}

fn restart(node: &ConfigNode) -> Res<RestartPolicy> {
    let f = Fields::of(node, "a restart policy")?;
    f.deny_unknown(
        "restart",
        &[
            "policy",
            "max_restarts",
            "backoff_ms",
            "hold_ms",
            "standby",
            "inline_panic",
        ],
    )?;
    let d = RestartPolicy::default();
    Ok(RestartPolicy {
        policy: match f.opt("policy") {
            Some(n) => fields::choice(n, "restart policy", &RestartMode::ALL)?,
            None => d.policy,
        },
        max_restarts: opt_int(&f, "max_restarts", limits::MAX_RESTARTS)?.unwrap_or(d.max_restarts),
        backoff_ms: opt_int(&f, "backoff_ms", limits::BACKOFF_MS)?.unwrap_or(d.backoff_ms),
        hold_ms: opt_int(&f, "hold_ms", limits::HOLD_MS)?.unwrap_or(d.hold_ms),
        standby: f
            .opt("standby")
            .map(fields::boolean)
            .transpose()?
            .unwrap_or(d.standby),
        inline_panic: match f.opt("inline_panic") {
            Some(n) => fields::choice(n, "inline panic policy", &InlinePanic::ALL)?,
            None => d.inline_panic,
        },
    })
}

fn flow_table(node: &ConfigNode) -> Res<FlowTableSettings> {
    let f = Fields::of(node, "flow table settings")?;
    f.deny_unknown(
        "flow_table",
        &["capacity", "idle_timeout_ms", "close_timeout_ms"],
    )?;
    let d = FlowTableSettings::default();
    Ok(FlowTableSettings {
        capacity: opt_int(&f, "capacity", limits::FLOW_CAPACITY)?.unwrap_or(d.capacity),
        idle_timeout_ms: opt_int(&f, "idle_timeout_ms", limits::IDLE_TIMEOUT_MS)?
            .unwrap_or(d.idle_timeout_ms),
        close_timeout_ms: opt_int(&f, "close_timeout_ms", limits::CLOSE_TIMEOUT_MS)?
            .unwrap_or(d.close_timeout_ms),
    })
}

fn wakeup(node: &ConfigNode) -> Res<WakeupSettings> {
    let f = Fields::of(node, "wake-up settings")?;
    let mut keys = crate::wakeup::RULE_KEYS.to_vec();
    keys.push("busy_poll_us");
    f.deny_unknown("wakeup", &keys)?;
    Ok(WakeupSettings {
        rule: crate::wakeup::decode(&f)?,
        busy_poll_us: opt_int(&f, "busy_poll_us", limits::BUSY_POLL_US)?,
    })
}

fn scheduler(node: &ConfigNode) -> Res<SchedulerSettings> {
    let f = Fields::of(node, "scheduler settings")?;
    f.deny_unknown(
        "scheduler",
        &["policy", "slice_us", "yield_every", "kernel_class"],
    )?;
    let d = SchedulerSettings::default();
    Ok(SchedulerSettings {
        policy: match f.opt("policy") {
            Some(n) => fields::choice(n, "scheduler policy", &SchedulerPolicy::ALL)?,
            None => d.policy,
        },
        slice_us: opt_int(&f, "slice_us", limits::SLICE_US)?.unwrap_or(d.slice_us),
        yield_every: opt_int(&f, "yield_every", limits::YIELD_EVERY)?,
        kernel_class: match f.opt("kernel_class") {
            Some(n) => fields::choice(n, "kernel class", &KernelClass::ALL)?,
            None => d.kernel_class,
        },
    })
}

fn backpressure(node: &ConfigNode) -> Res<BackpressureSettings> {
    let f = Fields::of(node, "backpressure settings")?;
    f.deny_unknown("backpressure", &["mode", "watermark_pct", "red_min_pct"])?;
    let d = BackpressureSettings::default();
    let s = BackpressureSettings {
        mode: match f.opt("mode") {
            Some(n) => fields::choice(n, "backpressure mode", &BackpressureMode::ALL)?,
            None => d.mode,
        },
        watermark_pct: opt_int(&f, "watermark_pct", limits::WATERMARK_PCT)?
            .unwrap_or(d.watermark_pct),
        red_min_pct: opt_int(&f, "red_min_pct", limits::RED_MIN_PCT)?.unwrap_or(d.red_min_pct),
    };
    if s.red_min_pct >= s.watermark_pct {
        let at = f
            .opt("red_min_pct")
            .or(f.opt("watermark_pct"))
            .unwrap_or(node);
        return Err(at.error(format!(
            "red_min_pct ({}) must be below watermark_pct ({}): early drops start below \
             the mark where every packet is dropped",
            s.red_min_pct, s.watermark_pct
        )));
    }
    Ok(s)
}

fn nf(node: &ConfigNode) -> Res<NfSpec> {
    let f = Fields::of(node, "an NF")?;
    f.deny_unknown(
        "an NF",
        &[
            "name",
            "type",
            "isolation",
            "config",
            "cpu_weight",
            "wakeup",
            "sandbox",
            "tenant",
            "domain",
            "replicas",
            "steer",
            "class",
            "reset",
            "fallback",
            "pool",
            "generation",
            "draining",
        ],
    )?;
    let name = fields::string(f.req("name", "every NF needs a unique name")?)?;
    let nf_type = fields::string(f.req("type", "the NF type, e.g. acl")?)?;
    let isolation = match f.opt("isolation") {
        Some(n) => fields::choice(n, "isolation", &Isolation::ALL)?,
        None => Isolation::default(),
    };
    let config = match node.get("config") {
        Some(c) => c.clone(),
        None => ConfigNode::new(
            ConfigValue::Map(Vec::new()),
            node.location(),
            crate::path::join_key(node.path(), "config"),
            node.source().clone(),
        ),
    };
    let pool = f.opt("pool").map(pool_bounds).transpose()?;
    Ok(NfSpec {
        name: name.to_string(),
        nf_type: nf_type.to_string(),
        isolation,
        config,
        cpu_weight: opt_int(&f, "cpu_weight", limits::CPU_WEIGHT)?,
        wakeup: f
            .opt("wakeup")
            .map(crate::wakeup::decode_rule)
            .transpose()?,
        sandbox: f.opt("sandbox").map(crate::sandbox::decode).transpose()?,
        tenant: f
            .opt("tenant")
            .map(|n| fields::string(n).map(str::to_string))
            .transpose()?,
        domain: f
            .opt("domain")
            .map(|n| fields::string(n).map(str::to_string))
            .transpose()?,
        // A pool starts at its least.
        replicas: opt_int(&f, "replicas", limits::REPLICAS)?
            .unwrap_or(pool.map_or(1, |p: crate::model::PoolBounds| p.min)),
        steer: match f.opt("steer") {
            Some(n) => fields::choice(n, "steer", &Steer::ALL)?,
            None => Steer::default(),
        },
        class: f.opt("class").map(crate::classes::decode).transpose()?,
        reset: match f.opt("reset") {
            Some(n) => fields::choice(n, "reset", &crate::model::ResetMode::ALL)?,
            None => crate::model::ResetMode::default(),
        },
        fallback: match f.opt("fallback") {
            Some(n) => fields::choice(n, "fallback", &crate::model::Fallback::ALL)?,
            None => crate::model::Fallback::default(),
        },
        pool,
        generation: opt_int(&f, "generation", limits::GENERATION)?.unwrap_or(0),
        draining: f.opt("draining").map(draining).transpose()?,
        location: node.location(),
    })
}

/// `nfs[].pool`: a `per_flow` pool's bounds.
fn pool_bounds(node: &ConfigNode) -> Res<crate::model::PoolBounds> {
    let f = Fields::of(node, "pool bounds")?;
    f.deny_unknown("pool", &["min", "max"])?;
    Ok(crate::model::PoolBounds {
        min: fields::int_as(f.req("min", "the fewest instances")?, limits::REPLICAS)?,
        max: fields::int_as(f.req("max", "the most instances")?, limits::REPLICAS)?,
    })
}

/// `nfs[].draining`: the version a rollout is retiring.
fn draining(node: &ConfigNode) -> Res<crate::model::Draining> {
    let f = Fields::of(node, "a draining version")?;
    f.deny_unknown("draining", &["generation", "config", "replicas"])?;
    Ok(crate::model::Draining {
        generation: fields::int_as(
            f.req("generation", "the generation of the version being retired")?,
            limits::GENERATION,
        )?,
        config: f
            .req("config", "the config the version being retired runs")?
            .clone(),
        replicas: opt_int(&f, "replicas", limits::REPLICAS)?.unwrap_or(1),
    })
}
