//! Decoding the `policer` config into meters, a classifier and actions.

use serde::Deserialize;
use sluice_nf::BuildContext;
use sluice_spec::SpecError;

use super::meter::{Color, Meter, MeterKind};
use super::rate::Quantity;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum MeterName {
    #[default]
    Srtcm,
    Trtcm,
}

/// What a policer meters separately.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Key {
    /// One bucket pair for all traffic.
    #[default]
    Global,
    /// One bucket pair per flow (by flow id; both directions share it).
    Flow,
    /// One bucket pair per class, a class being a set of DSCP values.
    Dscp,
}

/// What happens to a packet of a colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Forward unchanged.
    Pass,
    /// Forward with this DSCP (0–63).
    Mark(u8),
    /// Drop, counted under the colour's drop reason.
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Unclassified {
    #[default]
    Pass,
    Drop,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Actions {
    #[serde(default = "pass")]
    green: Action,
    #[serde(default = "pass")]
    yellow: Action,
    #[serde(default = "drop")]
    red: Action,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            green: Action::Pass,
            yellow: Action::Pass,
            red: Action::Drop,
        }
    }
}

fn pass() -> Action {
    Action::Pass
}
fn drop() -> Action {
    Action::Drop
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rates {
    cir: Option<Quantity>,
    cbs: Option<Quantity>,
    ebs: Option<Quantity>,
    pir: Option<Quantity>,
    pbs: Option<Quantity>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClassCfg {
    dscp: Vec<u8>,
    cir: Option<Quantity>,
    cbs: Option<Quantity>,
    ebs: Option<Quantity>,
    pir: Option<Quantity>,
    pbs: Option<Quantity>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ColorAware {
    #[serde(default)]
    yellow: Vec<u8>,
    #[serde(default)]
    red: Vec<u8>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    meter: MeterName,
    cir: Option<Quantity>,
    cbs: Option<Quantity>,
    ebs: Option<Quantity>,
    pir: Option<Quantity>,
    pbs: Option<Quantity>,
    #[serde(default)]
    key: Key,
    #[serde(default)]
    classes: Vec<ClassCfg>,
    #[serde(default)]
    unclassified: Unclassified,
    color_aware: Option<ColorAware>,
    #[serde(default)]
    actions: Actions,
}

/// A decoded policer config.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// What is metered separately.
    pub key: Key,
    /// One meter (global, flow) or one per class (dscp).
    pub meters: Vec<Meter>,
    /// DSCP → class index (`key: dscp`), `u8::MAX` for no class.
    pub class_of_dscp: [u8; 64],
    /// Whether packets of no class are dropped (else passed unmetered).
    pub drop_unclassified: bool,
    /// DSCP → pre-colour, when colour-aware.
    pub pre_color: Option<[Color; 64]>,
    /// Action per colour (by `Color as usize`).
    pub actions: [Action; 3],
}

fn meter(
    ctx: &BuildContext<'_>,
    kind: MeterName,
    prefix: &str,
    r: &Rates,
) -> Result<Meter, SpecError> {
    let at = |f: &str, m: String| ctx.config.error_at_path(&format!("{prefix}{f}"), m);
    let need = |f: &str, q: &Option<Quantity>| {
        q.clone()
            .ok_or_else(|| at(f, format!("`{f}` is required for this meter")))
    };
    let rate = |f: &str, q: &Option<Quantity>| need(f, q)?.rate().map_err(|m| at(f, m));
    let size = |f: &str, q: &Option<Quantity>| need(f, q)?.size().map_err(|m| at(f, m));
    let forbid = |f: &str, q: &Option<Quantity>, m: &str| match q {
        Some(_) => Err(at(f, format!("`{f}` is not a parameter of {m}"))),
        None => Ok(()),
    };
    let k = match kind {
        MeterName::Srtcm => {
            forbid("pir", &r.pir, "srtcm (RFC 2697); use meter: trtcm")?;
            forbid("pbs", &r.pbs, "srtcm (RFC 2697); use meter: trtcm")?;
            MeterKind::SrTcm {
                cir: rate("cir", &r.cir)?,
                cbs: size("cbs", &r.cbs)?,
                ebs: match &r.ebs {
                    None => 0,
                    Some(q) => q.size().map_err(|m| at("ebs", m))?,
                },
            }
        }
        MeterName::Trtcm => {
            forbid("ebs", &r.ebs, "trtcm (RFC 2698)")?;
            MeterKind::TrTcm {
                cir: rate("cir", &r.cir)?,
                cbs: size("cbs", &r.cbs)?,
                pir: rate("pir", &r.pir)?,
                pbs: size("pbs", &r.pbs)?,
            }
        }
    };
    Meter::new(k).map_err(|m| {
        let field = if m.starts_with("pir") { "pir" } else { "cbs" };
        at(field, m)
    })
}

fn check_dscp(ctx: &BuildContext<'_>, path: &str, v: &[u8]) -> Result<(), SpecError> {
    match v.iter().position(|d| *d > 63) {
        Some(i) => Err(ctx.config.error_at_path(
            &format!("{path}[{i}]"),
            format!("DSCP {} is not in 0-63", v[i]),
        )),
        None => Ok(()),
    }
}

/// Decodes and validates the config of a `policer`.
pub fn compile(ctx: &BuildContext<'_>) -> Result<Compiled, SpecError> {
    let cfg: Config = if ctx.config.is_null() {
        Config::default()
    } else {
        ctx.config.deserialize()?
    };
    let top = Rates {
        cir: cfg.cir.clone(),
        cbs: cfg.cbs.clone(),
        ebs: cfg.ebs.clone(),
        pir: cfg.pir.clone(),
        pbs: cfg.pbs.clone(),
    };
    let mut class_of_dscp = [u8::MAX; 64];
    let meters = if cfg.key == Key::Dscp {
        if cfg.classes.is_empty() {
            return Err(ctx
                .config
                .error_at_path("classes", "key: dscp needs at least one class"));
        }
        if top.cir.is_some() || top.cbs.is_some() || top.pir.is_some() {
            return Err(ctx.config.error_at_path(
                "cir",
                "with key: dscp the rates belong to each class, not to the top level",
            ));
        }
        if cfg.classes.len() > 64 {
            return Err(ctx.config.error_at_path("classes", "at most 64 classes"));
        }
        let mut ms = Vec::with_capacity(cfg.classes.len());
        for (i, c) in cfg.classes.iter().enumerate() {
            let path = format!("classes[{i}].dscp");
            check_dscp(ctx, &path, &c.dscp)?;
            for d in &c.dscp {
                let slot = &mut class_of_dscp[usize::from(*d)];
                if *slot != u8::MAX {
                    return Err(ctx
                        .config
                        .error_at_path(&path, format!("DSCP {d} is already in classes[{slot}]")));
                }
                *slot = i as u8;
            }
            let r = Rates {
                cir: c.cir.clone(),
                cbs: c.cbs.clone(),
                ebs: c.ebs.clone(),
                pir: c.pir.clone(),
                pbs: c.pbs.clone(),
            };
            ms.push(meter(ctx, cfg.meter, &format!("classes[{i}]."), &r)?);
        }
        ms
    } else {
        if !cfg.classes.is_empty() {
            return Err(ctx
                .config
                .error_at_path("classes", "classes are only used with key: dscp"));
        }
        vec![meter(ctx, cfg.meter, "", &top)?]
    };
    let pre_color = match &cfg.color_aware {
        None => None,
        Some(ca) => {
            check_dscp(ctx, "color_aware.yellow", &ca.yellow)?;
            check_dscp(ctx, "color_aware.red", &ca.red)?;
            let mut t = [Color::Green; 64];
            for d in &ca.yellow {
                t[usize::from(*d)] = Color::Yellow;
            }
            for d in &ca.red {
                t[usize::from(*d)] = Color::Red;
            }
            Some(t)
        }
    };
    let actions = [cfg.actions.green, cfg.actions.yellow, cfg.actions.red];
    for (a, name) in actions.iter().zip(["green", "yellow", "red"]) {
        if let Action::Mark(d) = a {
            if *d > 63 {
                return Err(ctx.config.error_at_path(
                    &format!("actions.{name}.mark"),
                    format!("DSCP {d} is not in 0-63"),
                ));
            }
        }
    }
    Ok(Compiled {
        key: cfg.key,
        meters,
        class_of_dscp,
        drop_unclassified: cfg.unclassified == Unclassified::Drop,
        pre_color,
        actions,
    })
}
