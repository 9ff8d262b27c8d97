//! Settings of an `af_xdp` port, decoded from the spec's port options.

use serde::Deserialize;
use sluice_spec::NicSpec;
use sluice_spec::SpecError;

/// Which XDP attach mode to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum XdpModeChoice {
    /// Native (driver) mode if the driver supports it, else generic.
    #[default]
    Auto,
    /// Native only: fail if the driver has no XDP support.
    Native,
    /// Generic (skb) mode only.
    Generic,
}

/// Settings of one AF_XDP port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpConfig {
    /// Interface name.
    pub interface: String,
    /// Queues to open, 0..queues, one XSK each (`queues`, default 1).
    pub queues: u32,
    /// XDP attach mode (`xdp_mode`: auto | native | generic, default auto).
    pub xdp_mode: XdpModeChoice,
    /// Never try zero-copy binding (`force_copy`, default false).
    pub force_copy: bool,
    /// Entries of each XSK ring (`ring_size`, power of two 64..=16384,
    /// default 2048); each queue keeps this many arena buffers on its fill
    /// ring.
    pub ring_size: u32,
}

impl AfXdpConfig {
    /// Defaults for `interface`.
    pub fn new(interface: &str) -> Self {
        AfXdpConfig {
            interface: interface.to_string(),
            queues: 1,
            xdp_mode: XdpModeChoice::Auto,
            force_copy: false,
            ring_size: 2048,
        }
    }

    /// Decodes an `af_xdp` port of the spec.
    ///
    /// # Errors
    /// A located [`SpecError`] naming the option that is wrong.
    pub fn from_spec(spec: &NicSpec) -> Result<Self, SpecError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Opts {
            #[serde(default = "one")]
            queues: u32,
            #[serde(default)]
            xdp_mode: XdpModeChoice,
            #[serde(default)]
            force_copy: bool,
            #[serde(default = "ring")]
            ring_size: u32,
        }
        fn one() -> u32 {
            1
        }
        fn ring() -> u32 {
            2048
        }
        let o: Opts = spec.options.deserialize()?;
        if o.queues == 0 || o.queues > 256 {
            return Err(spec
                .options
                .error_at_path("queues", "queues must be between 1 and 256"));
        }
        if !o.ring_size.is_power_of_two() || !(64..=16384).contains(&o.ring_size) {
            return Err(spec.options.error_at_path(
                "ring_size",
                format!(
                    "ring_size {} must be a power of two between 64 and 16384",
                    o.ring_size
                ),
            ));
        }
        Ok(AfXdpConfig {
            interface: spec.interface.clone(),
            queues: o.queues,
            xdp_mode: o.xdp_mode,
            force_copy: o.force_copy,
            ring_size: o.ring_size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_spec::ConfigNode;

    fn spec(options: serde_json::Value) -> NicSpec {
        NicSpec {
            interface: "veth0".into(),
            options: ConfigNode::from_json(options).with_path("ports[0]"),
        }
    }

    #[test]
    fn defaults_and_every_key_decode() {
        let c = AfXdpConfig::from_spec(&spec(serde_json::json!({}))).unwrap();
        assert_eq!(c, AfXdpConfig::new("veth0"));
        let c = AfXdpConfig::from_spec(&spec(serde_json::json!({
            "queues": 4, "xdp_mode": "generic", "force_copy": true, "ring_size": 512
        })))
        .unwrap();
        assert_eq!(
            (c.queues, c.xdp_mode, c.force_copy, c.ring_size),
            (4, XdpModeChoice::Generic, true, 512)
        );
    }

    #[test]
    fn bad_options_name_the_field() {
        for (opts, field, words) in [
            (
                serde_json::json!({"queues": 0}),
                "ports[0].queues",
                "between 1 and 256",
            ),
            (
                serde_json::json!({"ring_size": 1000}),
                "ports[0].ring_size",
                "power of two",
            ),
            (serde_json::json!({"xdp_mode": "fast"}), "ports[0]", "fast"),
            (serde_json::json!({"queue": 2}), "ports[0]", "queue"),
        ] {
            let e = AfXdpConfig::from_spec(&spec(opts)).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(field) && text.contains(words), "{text}");
        }
    }
}
