//! A located YAML value tree: every node knows its file, line, column and
//! field path, so that whoever interprets it can report errors precisely.

use std::fmt::{self, Display};

use serde::de::DeserializeOwned;

use crate::error::SpecError;
use crate::location::{Location, SourceName};
use crate::path::{self, Seg};

/// A value of the spec document (or a part of it, such as an NF's `config`)
/// together with where it was written.
///
/// Every node carries its [`Location`], its field path (e.g.
/// `nfs[1].config.rules[3].src`) and the name of its source file, so that
/// [`ConfigNode::deserialize`], [`ConfigNode::error`] and
/// [`ConfigNode::error_at_path`] produce errors that point at the right place.
///
/// Equality (`==`) compares values only, ignoring locations, paths and
/// sources, so a parsed config compares equal to the same config built with
/// [`ConfigNode::from_json`].
///
/// Serialisable (with `serde`), locations and all, so a config can be sent
/// to the process that builds the NF and still report errors precisely.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ConfigNode {
    value: ConfigValue,
    location: Location,
    path: String,
    source: SourceName,
}

/// The value of a [`ConfigNode`], following the YAML 1.2 core schema.
///
/// Equality treats mappings as unordered (same keys with equal values).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum ConfigValue {
    /// `null`, `~` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer (decimal, `0x` hex or `0o` octal in YAML), from
    /// `i64::MIN` to `u64::MAX`: what JSON carries exactly.
    Int(i128),
    /// A floating-point number, including `.inf` and `.nan`.
    Float(f64),
    /// A string: any quoted scalar, or a plain scalar that is nothing else.
    String(String),
    /// A sequence of nodes.
    Seq(Vec<ConfigNode>),
    /// A mapping, in document order. Keys are unique.
    Map(Vec<ConfigEntry>),
}

/// One `key: value` entry of a mapping node. Equality compares the key
/// text and the value, not the key's location.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct ConfigEntry {
    /// The key, as written (keys are always scalars).
    pub key: String,
    /// Where the key was written.
    pub key_location: Location,
    /// The value.
    pub value: ConfigNode,
}

impl PartialEq for ConfigValue {
    fn eq(&self, other: &Self) -> bool {
        use ConfigValue::*;
        match (self, other) {
            (Null, Null) => true,
            (Bool(a), Bool(b)) => a == b,
            (Int(a), Int(b)) => a == b,
            (Float(a), Float(b)) => a == b,
            (String(a), String(b)) => a == b,
            (Seq(a), Seq(b)) => a == b,
            (Map(a), Map(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .all(|ea| b.iter().any(|eb| ea.key == eb.key && ea.value == eb.value))
            }
            _ => false,
        }
    }
}

impl PartialEq for ConfigEntry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key && self.value == other.value
    }
}

impl PartialEq for ConfigNode {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Default for ConfigNode {
    /// An empty mapping: what an NF gets when its spec has no `config`.
    fn default() -> Self {
        ConfigNode::empty_map()
    }
}

impl ConfigNode {
    /// A node with the given value, location, path and source. Child nodes
    /// keep their own locations and paths.
    pub fn new(
        value: ConfigValue,
        location: Location,
        path: impl Into<String>,
        source: SourceName,
    ) -> ConfigNode {
        ConfigNode {
            value,
            location,
            path: path.into(),
            source,
        }
    }

    /// A generated null node at the root path.
    pub fn null() -> ConfigNode {
        ConfigNode::new(
            ConfigValue::Null,
            Location::GENERATED,
            "",
            SourceName::generated(),
        )
    }

    /// A generated empty mapping at the root path.
    pub fn empty_map() -> ConfigNode {
        ConfigNode::new(
            ConfigValue::Map(Vec::new()),
            Location::GENERATED,
            "",
            SourceName::generated(),
        )
    }

    /// Builds a node tree from a JSON value, for configs built by code (e.g.
    /// `sluice bench`). Nodes get [`Location::GENERATED`], source
    /// `"<generated>"` and paths relative to the root (`rules[3].src`); use
    /// [`ConfigNode::with_path`] to place the tree inside a spec.
    pub fn from_json(value: serde_json::Value) -> ConfigNode {
        from_json_at(value, String::new(), &SourceName::generated())
    }

    /// Converts back to a JSON value. Locations are dropped. The loader
    /// keeps integers within 64 bits and floats finite; a node built by
    /// hand beyond them becomes a JSON float or `null`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.value {
            ConfigValue::Null => Value::Null,
            ConfigValue::Bool(b) => Value::Bool(*b),
            ConfigValue::Int(i) => {
                if let Ok(v) = i64::try_from(*i) {
                    Value::from(v)
                } else if let Ok(v) = u64::try_from(*i) {
                    Value::from(v)
                } else {
                    Value::from(*i as f64)
                }
            }
            ConfigValue::Float(f) => Value::from(*f),
            ConfigValue::String(s) => Value::String(s.clone()),
            ConfigValue::Seq(items) => Value::Array(items.iter().map(Self::to_json).collect()),
            ConfigValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.to_json()))
                    .collect(),
            ),
        }
    }

    /// The same tree with this node's path set to `path` and every
    /// descendant's path rebased below it (e.g. `nfs[0].config`).
    pub fn with_path(mut self, path: &str) -> ConfigNode {
        self.set_path(path.to_string());
        self
    }

    /// The same tree with every node's source file name set to `source`.
    pub fn with_source(mut self, source: SourceName) -> ConfigNode {
        self.set_source(&source);
        self
    }

    fn set_path(&mut self, path: String) {
        match &mut self.value {
            ConfigValue::Seq(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    item.set_path(path::join_index(&path, i));
                }
            }
            ConfigValue::Map(entries) => {
                for e in entries.iter_mut() {
                    e.value.set_path(path::join_key(&path, &e.key));
                }
            }
            _ => {}
        }
        self.path = path;
    }

    fn set_source(&mut self, source: &SourceName) {
        self.source = source.clone();
        match &mut self.value {
            ConfigValue::Seq(items) => items.iter_mut().for_each(|n| n.set_source(source)),
            ConfigValue::Map(entries) => {
                entries.iter_mut().for_each(|e| e.value.set_source(source))
            }
            _ => {}
        }
    }

    /// The value of this node.
    pub fn value(&self) -> &ConfigValue {
        &self.value
    }

    /// Where this node was written ([`Location::GENERATED`] for built nodes).
    pub fn location(&self) -> Location {
        self.location
    }

    /// The field path of this node, e.g. `nfs[1].config.rules[3].src`
    /// (empty for the root).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The file this node was read from, or `"<generated>"`.
    pub fn source(&self) -> &SourceName {
        &self.source
    }

    /// Resolves a file path written in this node the way the spec's own
    /// paths (`pcap_in`/`pcap_out` ports) are resolved: an absolute path as
    /// it is, a relative one against the directory of the spec file the
    /// node was read from, as that file was named when loaded (so
    /// `examples/x.yaml` and `out.pcap` give `examples/out.pcap`, itself
    /// relative to the current directory). A node without a file
    /// (`"<generated>"`, e.g. built with [`ConfigNode::from_json`]) resolves
    /// against the current directory. Nothing is looked up on disk.
    pub fn resolve_path(&self, path: impl AsRef<std::path::Path>) -> std::path::PathBuf {
        let path = path.as_ref();
        if path.is_absolute() || self.source.is_generated() {
            return path.to_path_buf();
        }
        match std::path::Path::new(self.source.as_str()).parent() {
            Some(dir) => dir.join(path),
            None => path.to_path_buf(),
        }
    }

    /// The YAML type of this node in words: `null`, `boolean`, `integer`,
    /// `float`, `string`, `sequence` or `mapping`.
    pub fn kind_name(&self) -> &'static str {
        match self.value {
            ConfigValue::Null => "null",
            ConfigValue::Bool(_) => "boolean",
            ConfigValue::Int(_) => "integer",
            ConfigValue::Float(_) => "float",
            ConfigValue::String(_) => "string",
            ConfigValue::Seq(_) => "sequence",
            ConfigValue::Map(_) => "mapping",
        }
    }

    /// A short description for error messages, e.g. `string "abc"`,
    /// `integer 5`, `a mapping`.
    pub fn describe(&self) -> String {
        match &self.value {
            ConfigValue::Null => "null".to_string(),
            ConfigValue::Bool(b) => format!("boolean {b}"),
            ConfigValue::Int(i) => format!("integer {i}"),
            ConfigValue::Float(f) => format!("float {f}"),
            ConfigValue::String(s) => {
                let shown: String = s.chars().take(40).collect();
                if shown.len() < s.len() {
                    format!("string {shown:?}...")
                } else {
                    format!("string {s:?}")
                }
            }
            ConfigValue::Seq(_) => "a sequence".to_string(),
            ConfigValue::Map(_) => "a mapping".to_string(),
        }
    }

    /// Whether this node is null.
    pub fn is_null(&self) -> bool {
        matches!(self.value, ConfigValue::Null)
    }

    /// The boolean value, if this is a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self.value {
            ConfigValue::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// The integer value, if this is an integer that fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self.value {
            ConfigValue::Int(i) => i64::try_from(i).ok(),
            _ => None,
        }
    }

    /// The integer value, if this is an integer that fits in `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        match self.value {
            ConfigValue::Int(i) => u64::try_from(i).ok(),
            _ => None,
        }
    }

    /// The numeric value, if this is a float or an integer.
    pub fn as_f64(&self) -> Option<f64> {
        match self.value {
            ConfigValue::Float(f) => Some(f),
            ConfigValue::Int(i) => Some(i as f64),
            _ => None,
        }
    }

    /// The string value, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            ConfigValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if this is a sequence.
    pub fn as_seq(&self) -> Option<&[ConfigNode]> {
        match &self.value {
            ConfigValue::Seq(items) => Some(items),
            _ => None,
        }
    }

    /// The entries, if this is a mapping.
    pub fn as_map(&self) -> Option<&[ConfigEntry]> {
        match &self.value {
            ConfigValue::Map(entries) => Some(entries),
            _ => None,
        }
    }

    /// The entry for `key`, if this is a mapping that has it.
    pub fn entry(&self, key: &str) -> Option<&ConfigEntry> {
        self.as_map()?.iter().find(|e| e.key == key)
    }

    /// The value for `key`, if this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&ConfigNode> {
        self.entry(key).map(|e| &e.value)
    }

    /// The descendant at the relative path `rel` (e.g. `rules[3].src`; the
    /// empty path is this node).
    pub fn find(&self, rel: &str) -> Option<&ConfigNode> {
        let mut node = self;
        for seg in path::parse(rel) {
            node = node.child(&seg)?;
        }
        Some(node)
    }

    /// The deepest existing node along the relative path `rel`.
    pub(crate) fn find_nearest(&self, rel: &str) -> &ConfigNode {
        let mut node = self;
        for seg in path::parse(rel) {
            match node.child(&seg) {
                Some(child) => node = child,
                None => break,
            }
        }
        node
    }

    fn child(&self, seg: &Seg) -> Option<&ConfigNode> {
        match seg {
            Seg::Key(k) => self.get(k),
            Seg::Index(i) => self.as_seq()?.get(*i),
        }
    }

    /// Deserializes this node into `T`. Errors (wrong types, missing or
    /// unknown fields with `#[serde(deny_unknown_fields)]`, invalid values)
    /// point at the offending node's line and field path.
    ///
    /// A null node deserializes as an empty mapping into structs and maps.
    /// Errors inside untagged, internally tagged or flattened parts are
    /// reported at the enclosing node, as serde buffers those.
    ///
    /// # Errors
    /// A located [`SpecError`] if the value does not fit `T`.
    pub fn deserialize<T: DeserializeOwned>(&self) -> Result<T, SpecError> {
        T::deserialize(self).map_err(|mut e| {
            if e.file.is_empty() {
                let located = self.error(&e.message);
                e = located;
            }
            e
        })
    }

    /// An error located at this node, with this node's path as the field.
    pub fn error(&self, msg: impl Display) -> SpecError {
        SpecError::new(
            self.source.as_str(),
            self.location,
            self.path.clone(),
            msg.to_string(),
        )
    }

    /// An error about the descendant at the relative path `rel` (e.g.
    /// `rules[3].src`): located at that node if it exists, otherwise at the
    /// deepest existing node on the way (a missing key is reported where it
    /// should have been). The field is always the full path.
    pub fn error_at_path(&self, rel: &str, msg: impl Display) -> SpecError {
        let node = self.find_nearest(rel);
        SpecError::new(
            self.source.as_str(),
            node.location,
            path::join_segs(&self.path, &path::parse(rel)),
            msg.to_string(),
        )
    }

    /// Number of nodes in this tree (this one included).
    pub(crate) fn node_count(&self) -> usize {
        1 + match &self.value {
            ConfigValue::Seq(items) => items.iter().map(Self::node_count).sum(),
            ConfigValue::Map(entries) => entries.iter().map(|e| e.value.node_count()).sum(),
            _ => 0,
        }
    }
}

impl Display for ConfigNode {
    /// Shows the value as compact JSON.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

fn from_json_at(value: serde_json::Value, path: String, source: &SourceName) -> ConfigNode {
    use serde_json::Value;
    let v = match value {
        Value::Null => ConfigValue::Null,
        Value::Bool(b) => ConfigValue::Bool(b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                ConfigValue::Int(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                ConfigValue::Int(i128::from(u))
            } else {
                ConfigValue::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => ConfigValue::String(s),
        Value::Array(items) => ConfigValue::Seq(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| from_json_at(item, path::join_index(&path, i), source))
                .collect(),
        ),
        Value::Object(map) => ConfigValue::Map(
            map.into_iter()
                .map(|(key, item)| ConfigEntry {
                    value: from_json_at(item, path::join_key(&path, &key), source),
                    key,
                    key_location: Location::GENERATED,
                })
                .collect(),
        ),
    };
    ConfigNode::new(v, Location::GENERATED, path, source.clone())
}
