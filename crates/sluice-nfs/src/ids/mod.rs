//! `ids`: signature-based intrusion detection and prevention with a
//! subset of Snort 2/3 rules.
//!
//! Every IP packet is checked against the rules in order. A rule's header
//! (protocol, addresses, ports, direction) and `flow` option are checked
//! first; its payload options (`content` with `nocase`, `offset`, `depth`,
//! `distance`, `within`; `pcre`) are verified only for rules whose fast
//! pattern one Aho–Corasick pass over the payload found. `alert` rules log
//! and go on; `drop` rules log and, in `mode: ips`, drop the packet
//! (`rule_drop`) and stop; `pass` rules stop evaluation silently. Matches
//! are counted per rule as extended counters (index = rule order).
//!
//! TCP contents split across two consecutive in-order segments of a flow
//! direction still match: the tail of the previous segment (longest
//! content − 1 bytes) is kept per flow and direction. Out-of-order
//! segments, gaps and retransmissions drop the carry-over and are counted.
//!
//! | config key | type | default | meaning |
//! |---|---|---|---|
//! | `mode` | `ids`/`ips` | `ids` | `ips`: `drop` rules drop packets; `ids`: they only alert |
//! | `rules_file` | path | — | Snort rules file (relative to the spec's directory) |
//! | `rules` | list of strings | `[]` | inline rules, evaluated after the file's |
//! | `vars` | map | `{}` | rule variables, e.g. `HOME_NET: "[10.0.0.0/8]"` |
//! | `alert_log` | path | none | JSON-lines alert log (relative to the spec's directory; created by the run's first instance, appended to after a restart, untouched by `sluice validate`) |
//! | `alert_log_max_bytes` | integer | 67108864 | the log never grows past this |
//! | `alert_buffer` | integer | 4096 | alerts buffered between writes |
//! | `stream` | bool | `true` | cross-segment matching for TCP |
//!
//! Counters: `packets_inspected`, `bytes_inspected`, `alerts`, `drops`,
//! `stream_reassembled_matches`, `stream_gaps`, `passes`,
//! `alert_log_dropped`. Drop reasons: `rule_drop`; malformed frames are
//! dropped as `malformed:<why>`. Non-IP frames pass uninspected.
//!
//! ```yaml
//! - name: ids
//!   type: ids
//!   config:
//!     mode: ips
//!     vars: { HOME_NET: "10.1.0.0/16" }
//!     alert_log: alerts.json
//!     rules:
//!       - 'drop tcp any any -> $HOME_NET 80 (msg:"cmd.exe"; flow:to_server,established; content:"cmd.exe"; nocase; sid:1000001;)'
//! ```

pub mod alert_log;
pub mod engine;
pub mod matcher;
pub mod pcre;
pub mod rule;
pub mod rule_parser;
pub mod stream;

use std::collections::BTreeMap;

use serde::Deserialize;
use sluice_nf::{Batch, BuildContext, Context, DropReason, NetworkFunction, NfType};
use sluice_spec::{ConfigNode, SpecError};

use alert_log::{AlertLog, LogFile};
use engine::{Decision, Engine, EngineConfig};
use matcher::Matcher;
use rule::Rule;
use rule_parser::{check_unique_sids, parse_rule, parse_rules_text, Vars};

/// Drop reason of packets dropped by a `drop` rule (IPS mode).
pub const RULE_DROP: DropReason = DropReason::nf_local(0);

/// Counter indices, as named in [`TYPE`].
pub mod counters {
    /// IP packets inspected.
    pub const PACKETS_INSPECTED: usize = 0;
    /// Payload bytes inspected.
    pub const BYTES_INSPECTED: usize = 1;
    /// Alerts raised.
    pub const ALERTS: usize = 2;
    /// Packets dropped by rules.
    pub const DROPS: usize = 3;
    /// Matches found only across a TCP segment boundary.
    pub const STREAM_REASSEMBLED_MATCHES: usize = 4;
    /// Out-of-order TCP segments (carry-over reset).
    pub const STREAM_GAPS: usize = 5;
    /// `pass` rules that stopped evaluation.
    pub const PASSES: usize = 6;
    /// Alerts not written to the log.
    pub const ALERT_LOG_DROPPED: usize = 7;
}

#[derive(Debug, Clone, Copy, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Mode {
    #[default]
    Ids,
    Ips,
}

fn yes() -> bool {
    true
}
fn default_log_max() -> u64 {
    64 << 20
}
fn default_buffer() -> usize {
    4096
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    rules_file: Option<String>,
    #[serde(default)]
    rules: Vec<String>,
    #[serde(default)]
    vars: BTreeMap<String, String>,
    #[serde(default)]
    alert_log: Option<String>,
    #[serde(default = "default_log_max")]
    alert_log_max_bytes: u64,
    #[serde(default = "default_buffer")]
    alert_buffer: usize,
    #[serde(default = "yes")]
    stream: bool,
}

/// The IDS NF.
pub struct Ids {
    engine: Engine,
}

impl Ids {
    /// The inspection engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn publish(&mut self, ctx: &mut Context<'_>) {
        let s = self.engine.take_stats();
        for (i, v) in [
            (counters::PACKETS_INSPECTED, s.packets_inspected),
            (counters::BYTES_INSPECTED, s.bytes_inspected),
            (counters::ALERTS, s.alerts),
            (counters::DROPS, s.drops),
            (
                counters::STREAM_REASSEMBLED_MATCHES,
                s.stream_reassembled_matches,
            ),
            (counters::STREAM_GAPS, s.stream_gaps),
            (counters::PASSES, s.passes),
            (counters::ALERT_LOG_DROPPED, s.alert_log_dropped),
        ] {
            if v != 0 {
                ctx.count(i, v);
            }
        }
        // Per-rule matches as extended counters (index = rule order).
        self.engine.take_rule_hits(|rule, n| ctx.count_ext(rule, n));
    }
}

impl NetworkFunction for Ids {
    fn process(&mut self, batch: &mut Batch<'_>, ctx: &mut Context<'_>) {
        batch.for_each(
            |p| match self.engine.inspect(p.data(), p.flow_id(), p.timestamp_ns()) {
                Decision::Forward => {}
                Decision::Drop => p.drop_with(RULE_DROP),
                Decision::Malformed(e) => p.drop_malformed(e),
            },
        );
        // One write per half-full buffer or per second, not per packet.
        if self.engine.log_flush_due(ctx.now_ns()) {
            self.engine.flush_log(ctx.now_ns());
        }
        self.publish(ctx);
    }

    fn flow_end(&mut self, flow_id: u32, _ctx: &mut Context<'_>) {
        self.engine.flow_end(flow_id);
    }

    fn open_handles(&mut self) {
        self.engine.open_log();
    }

    fn tick_interval_ns(&self) -> Option<u64> {
        Some(alert_log::FLUSH_INTERVAL_NS)
    }

    /// Writes alerts buffered by quiet batches (off the packet path).
    fn tick(&mut self, ctx: &mut Context<'_>) {
        self.engine.flush_log(ctx.now_ns());
        self.publish(ctx);
    }

    fn stop(&mut self, ctx: &mut Context<'_>) {
        self.engine.flush_log(ctx.now_ns());
        self.publish(ctx);
    }

    fn reset(&mut self) {
        self.engine.reset(0);
    }
}

impl Drop for Ids {
    fn drop(&mut self) {
        self.engine.flush_log(0);
    }
}

/// Loads every rule of `cfg` in evaluation order (file first, then inline).
fn load_rules(config: &ConfigNode, cfg: &Config) -> Result<Vec<Rule>, SpecError> {
    let mut vars = Vars::new();
    for (k, v) in &cfg.vars {
        vars.set(k.trim_start_matches('$'), v);
    }
    let mut rules = Vec::new();
    if let Some(f) = &cfg.rules_file {
        let path = config.resolve_path(f);
        // A regular file of bounded size: a FIFO or a device would hang or
        // exhaust memory while the spec is merely validated.
        let text =
            sluice_spec::read_text_file(&path, sluice_spec::MAX_DATA_FILE_BYTES).map_err(|e| {
                config.error_at_path(
                    "rules_file",
                    format!("cannot read `{}`: {e}", path.display()),
                )
            })?;
        rules = parse_rules_text(&text, f, &mut vars)
            .map_err(|m| config.error_at_path("rules_file", m))?;
    }
    for (i, text) in cfg.rules.iter().enumerate() {
        let at = format!("rules[{i}]");
        let r = parse_rule(text, &vars, &at).map_err(|e| config.error_at_path(&at, e))?;
        rules.push(r);
    }
    if rules.is_empty() {
        return Err(config.error("no rules: give `rules_file` or `rules`"));
    }
    check_unique_sids(&rules).map_err(|m| {
        let field = if m.starts_with("rules[") {
            m.split(':').next().unwrap_or("rules").to_string()
        } else {
            "rules_file".to_string()
        };
        config.error_at_path(&field, m)
    })?;
    Ok(rules)
}

/// Builds the engine from an NF config (also used by tests and benches), as
/// the first instance of a run.
pub fn build_engine(config: &ConfigNode, flow_capacity: u32) -> Result<Engine, SpecError> {
    build_engine_restarted(config, flow_capacity, 0)
}

/// Builds the engine for an instance started after `restarts` restarts (a
/// restarted instance appends to the alert log instead of starting it anew).
pub fn build_engine_restarted(
    config: &ConfigNode,
    flow_capacity: u32,
    restarts: u32,
) -> Result<Engine, SpecError> {
    let cfg: Config = config.deserialize()?;
    let rules = load_rules(config, &cfg)?;
    if cfg.alert_buffer == 0 || cfg.alert_buffer > 1 << 20 {
        return Err(config.error_at_path("alert_buffer", "must be 1-1048576"));
    }
    // Checked, not created: building has no side effects (`sluice validate`
    // must not truncate a log); the first flush opens it.
    let file = match &cfg.alert_log {
        None => None,
        Some(p) => {
            let path = config.resolve_path(p);
            crate::output_file::check_path(&path)
                .map_err(|m| config.error_at_path("alert_log", m))?;
            Some(LogFile {
                path,
                append: restarts > 0,
            })
        }
    };
    let carry = if cfg.stream { stream::MAX_TAIL } else { 0 };
    let matcher = Matcher::new(rules, carry);
    Ok(Engine::new(
        matcher,
        EngineConfig {
            ips: cfg.mode == Mode::Ips,
            stream: cfg.stream,
            flow_capacity,
            log: AlertLog::new(file, cfg.alert_buffer, cfg.alert_log_max_bytes),
        },
    ))
}

fn build(ctx: &BuildContext<'_>) -> Result<Box<dyn NetworkFunction>, SpecError> {
    Ok(Box::new(Ids {
        engine: build_engine_restarted(ctx.config, ctx.flow_capacity, ctx.resolver.restarts())?,
    }))
}

/// Type descriptor.
pub const TYPE: NfType = NfType {
    name: "ids",
    summary:
        "Snort-rule intrusion detection/prevention: content, pcre, flow, cross-segment TCP matching",
    drop_reasons: &["rule_drop"],
    counters: &[
        "packets_inspected",
        "bytes_inspected",
        "alerts",
        "drops",
        "stream_reassembled_matches",
        "stream_gaps",
        "passes",
        "alert_log_dropped",
    ],
    build,
    frames: sluice_nf::FrameNeeds::MtuFrames,
};
