//! How a `per_class` NF groups flows (`nfs[].class`): one instance per
//! class, as Flurries' per-class NFs.
//!
//! ```yaml
//! steer: per_class
//! class: { by: src, prefix: 24 }   # src | dst (an address prefix), vlan, dscp
//! ```
//!
//! A flow's class is read from its first packet at the NF: the source or
//! destination address cut to `prefix` bits (IPv4 at most 32, IPv6 at
//! most 128; default the whole address), the outer VLAN id (0 untagged),
//! or the DSCP. Frames that have none of it (`src` of an ARP frame) form
//! one class of their own.

use crate::config_node::ConfigNode;
use crate::fields::{self, Fields, Res};
use crate::limits;

/// What a class is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClassField {
    /// The source address prefix (`src`).
    Src,
    /// The destination address prefix (`dst`).
    Dst,
    /// The outer VLAN id (`vlan`).
    Vlan,
    /// The IP DSCP (`dscp`).
    Dscp,
}

spec_names!(ClassField {
    Src = "src",
    Dst = "dst",
    Vlan = "vlan",
    Dscp = "dscp",
});

/// A `per_class` NF's selector (`nfs[].class`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClassBy {
    /// What a class is made of (`by`).
    pub by: ClassField,
    /// With `src`/`dst`: the prefix length (`prefix`, 0..=128; IPv4
    /// addresses use at most 32 of it); `None`: the whole address.
    pub prefix: Option<u8>,
}

impl ClassBy {
    /// Bits of an address of `bits` bits that make its class.
    pub fn prefix_of(&self, bits: u8) -> u8 {
        self.prefix.map_or(bits, |p| p.min(bits))
    }

    /// The spec form.
    pub fn emit(&self) -> serde_json::Value {
        let mut v = serde_json::json!({ "by": self.by.name() });
        if let Some(p) = self.prefix {
            v["prefix"] = p.into();
        }
        v
    }
}

/// Reads `nfs[].class`.
pub(crate) fn decode(node: &ConfigNode) -> Res<ClassBy> {
    let f = Fields::of(node, "a class selector")?;
    f.deny_unknown("class", &["by", "prefix"])?;
    let by = fields::choice(
        f.req("by", "what makes a class: src, dst, vlan or dscp")?,
        "class field",
        &ClassField::ALL,
    )?;
    let prefix = match f.opt("prefix") {
        Some(n) if matches!(by, ClassField::Src | ClassField::Dst) => {
            Some(fields::int_as(n, limits::CLASS_PREFIX)?)
        }
        Some(n) => {
            return Err(n.error(format!(
                "prefix applies to a class by src or dst, not by {}",
                by.name()
            )))
        }
        None => None,
    };
    Ok(ClassBy { by, prefix })
}

#[cfg(test)]
mod tests {
    use crate::config_node::ConfigNode;

    #[test]
    fn a_class_round_trips_and_bad_ones_are_named() {
        for text in [
            "{ by: src, prefix: 24 }",
            "{ by: dst }",
            "{ by: vlan }",
            "{ by: dscp }",
        ] {
            let c = super::decode(&ConfigNode::from_yaml_str(text).unwrap()).unwrap();
            let again = ConfigNode::from_json(c.emit());
            assert_eq!(super::decode(&again).unwrap(), c, "{text}");
        }
        for (text, want) in [
            ("{ by: port }", "port"),
            ("{ by: vlan, prefix: 3 }", "prefix applies"),
            ("{ by: src, prefix: 129 }", "129"),
            ("{ prefix: 8 }", "by"),
            ("{ by: src, len: 8 }", "len"),
        ] {
            let e = super::decode(&ConfigNode::from_yaml_str(text).unwrap())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
