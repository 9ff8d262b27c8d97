//! An NF's name as its constructor sees it ([`BuildContext::name`]).
//!
//! Most NFs never read their name: a forwarder built as `a` is the same
//! as one built as `b`. The platform keeps one built NF per recipe (a
//! shell) that every instance starts from, and processes made ready ahead
//! for the NFs that will be created next; both can serve NFs that differ
//! only by name when the build did not look at it. So the name records
//! whether it was read, as the resolver records the names an NF looked
//! up: reading it (through `Deref` or `Display`) is all it takes, and an
//! NF that reads it (in an error message it returns, say) is simply built
//! for its own name.
//!
//! [`BuildContext::name`]: crate::BuildContext::name

use std::cell::Cell;

/// An NF's instance name, remembering whether its build read it.
pub struct NfName<'a> {
    name: &'a str,
    read: Cell<bool>,
}

impl<'a> NfName<'a> {
    /// The name `name`, not read yet.
    pub fn new(name: &'a str) -> NfName<'a> {
        NfName {
            name,
            read: Cell::new(false),
        }
    }

    /// Whether anything read it.
    pub fn was_read(&self) -> bool {
        self.read.get()
    }
}

impl<'a> From<&'a str> for NfName<'a> {
    fn from(name: &'a str) -> NfName<'a> {
        NfName::new(name)
    }
}

impl std::ops::Deref for NfName<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        self.read.set(true);
        self.name
    }
}

impl std::fmt::Display for NfName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::fmt::Debug for NfName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not a read by the NF: debugging the context must not change
        // what the platform concludes from it.
        write!(f, "{:?}", self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_way_of_reading_the_name_is_recorded() {
        let n = NfName::new("fw");
        assert!(!n.was_read());
        let _ = format!("{n:?}");
        assert!(!n.was_read(), "Debug is not a read");
        assert_eq!(format!("NF {n}"), "NF fw");
        assert!(n.was_read());

        let n = NfName::from("lb");
        assert_eq!(n.len(), 2);
        assert!(n.was_read());

        let n = NfName::new("x");
        let s: &str = &n;
        assert_eq!(s, "x");
        assert!(n.was_read());

        let n = NfName::new("y");
        assert_eq!(n.to_string(), "y");
        assert!(n.was_read());
    }
}
