//! Names of NF instances in a plan. One spec NF may run as several plan
//! NFs: its replicas (`nfs[].replicas`) and, during a rolling upgrade, two
//! versions side by side (`nfs[].generation`, `nfs[].draining`). Each gets
//! a name no spec object can take (spec names are `[a-z0-9_-]`), so the
//! compiler's ids, which are kept by name, keep each instance running
//! across applies:
//!
//! | generation | replica | name       |
//! |-----------:|--------:|------------|
//! | 0          | 0       | `fw`       |
//! | 0          | 2       | `fw.2`     |
//! | 3          | 0       | `fw@3`     |
//! | 3          | 2       | `fw@3.2`   |

/// The plan name of replica `replica` of generation `generation` of spec
/// NF `nf`.
pub fn instance_name(nf: &str, generation: u32, replica: u32) -> String {
    let mut name = nf.to_string();
    if generation != 0 {
        name.push_str(&format!("@{generation}"));
    }
    if replica != 0 {
        name.push_str(&format!(".{replica}"));
    }
    name
}

/// What an instance name says: the spec NF, its generation and replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceOf<'a> {
    /// The spec NF's name.
    pub nf: &'a str,
    /// Which version.
    pub generation: u32,
    /// Which replica of it.
    pub replica: u32,
}

/// Splits an instance name (the inverse of [`instance_name`]); a name
/// whose suffixes are not numbers is an NF of its own.
pub fn instance_of(name: &str) -> InstanceOf<'_> {
    let (rest, replica) = match name.rsplit_once('.') {
        Some((rest, k)) => match k.parse() {
            Ok(k) => (rest, k),
            Err(_) => (name, 0),
        },
        None => (name, 0),
    };
    let (nf, generation) = match rest.rsplit_once('@') {
        Some((nf, g)) => match g.parse() {
            Ok(g) => (nf, g),
            Err(_) => (rest, 0),
        },
        None => (rest, 0),
    };
    InstanceOf {
        nf,
        generation,
        replica,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_generation_zero_replica_zero_is_the_spec_name() {
        for (g, k, name) in [
            (0, 0, "fw"),
            (0, 3, "fw.3"),
            (2, 0, "fw@2"),
            (2, 3, "fw@2.3"),
        ] {
            assert_eq!(instance_name("fw", g, k), name);
            let i = instance_of(name);
            assert_eq!((i.nf, i.generation, i.replica), ("fw", g, k), "{name}");
        }
    }

    #[test]
    fn suffixes_that_are_not_numbers_belong_to_the_name() {
        assert_eq!(instance_of("fw.x").nf, "fw.x");
        assert_eq!(instance_of("fw@x").nf, "fw@x");
        assert_eq!(
            instance_of("fw@x.1"),
            InstanceOf {
                nf: "fw@x",
                generation: 0,
                replica: 1
            }
        );
    }
}
