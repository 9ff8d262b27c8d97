//! YAML text to a located [`ConfigNode`] tree, on top of the event parser of
//! `saphyr-parser`.
//!
//! Scalars are resolved with the YAML 1.2 core schema (so `yes`/`on` are
//! strings, not booleans). Characters YAML does not allow (NUL and other
//! controls, see [`printable`]), duplicate keys, non-scalar keys, multiple
//! documents, unknown tags, nesting deeper than [`MAX_DEPTH`] and alias
//! expansion beyond [`MAX_NODES`] are errors.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, Span, Tag};

use crate::config_node::{ConfigEntry, ConfigNode, ConfigValue};
use crate::error::SpecError;
use crate::location::{Location, SourceName};
use crate::path;
use crate::printable;
use crate::scalar;

/// Maximum nesting of sequences and mappings.
pub(crate) const MAX_DEPTH: usize = 64;
/// Maximum number of nodes in a document, aliases expanded.
pub(crate) const MAX_NODES: usize = 1_000_000;

const COMPLEX_KEY: &str = "mapping keys must be plain scalars (strings), not sequences or mappings";

impl ConfigNode {
    /// Reads a YAML document (the spec's own YAML reader: YAML 1.2 core
    /// schema, located errors), e.g. a config kept in its own file. Here,
    /// not with the node's other methods, so that the node does not
    /// depend on its reader (which builds nodes).
    pub fn from_yaml_str(text: &str) -> Result<ConfigNode, SpecError> {
        parse(text, &SourceName::generated())
    }
}

/// Parses `text` (one YAML document) into a located tree whose root has the
/// empty path. An empty document gives a null root.
pub(crate) fn parse(text: &str, source: &SourceName) -> Result<ConfigNode, SpecError> {
    printable::check(text, source)?;
    Builder::new(source).run(text)
}

/// Where a text ends: its lines as YAML counts them (LF, CRLF or a lone
/// CR end a line, YAML 1.2 §5.4) and the characters of the last one.
///
/// At a text that does not end with a line break the scanner (saphyr, as
/// libyaml) moves its mark to the line after the last one, so an error at
/// the end of the text ("did not find expected ','") or a node there (the
/// null of a last `? ` key) would name a line the file does not have;
/// [`TextEnd::clamp`] names the end of the last line instead (both found
/// by `fuzz/` spec_load).
struct TextEnd {
    lines: usize,
    last_columns: usize,
}

impl TextEnd {
    fn of(text: &str) -> TextEnd {
        let b = text.as_bytes();
        let breaks = (0..b.len())
            .filter(|&i| b[i] == b'\n' || (b[i] == b'\r' && b.get(i + 1) != Some(&b'\n')))
            .count();
        let last = text.rsplit(['\n', '\r']).next().unwrap_or("");
        TextEnd {
            lines: breaks + 1,
            last_columns: last.chars().count(),
        }
    }

    /// `line`:`column` (1-based), or the end of the last line when that
    /// lies past the text.
    fn clamp(&self, line: usize, column: usize) -> Location {
        if line <= self.lines {
            Location::new(line, column)
        } else {
            Location::new(self.lines, self.last_columns + 1)
        }
    }

    fn of_span(&self, span: &Span) -> Location {
        self.clamp(span.start.line(), span.start.col() + 1)
    }
}

/// A collection being built.
enum Frame {
    Seq {
        anchor: usize,
        location: Location,
        path: String,
        items: Vec<ConfigNode>,
    },
    Map {
        anchor: usize,
        location: Location,
        path: String,
        entries: Vec<ConfigEntry>,
        key: Option<(String, Location)>,
    },
}

struct Builder<'s> {
    source: &'s SourceName,
    stack: Vec<Frame>,
    anchors: HashMap<usize, ConfigNode>,
    root: Option<ConfigNode>,
    nodes: usize,
    documents: usize,
    end: TextEnd,
}

impl<'s> Builder<'s> {
    fn new(source: &'s SourceName) -> Self {
        Builder {
            source,
            stack: Vec::new(),
            anchors: HashMap::new(),
            root: None,
            nodes: 0,
            documents: 0,
            end: TextEnd {
                lines: usize::MAX,
                last_columns: 0,
            },
        }
    }

    fn error(&self, location: Location, path: String, msg: impl Into<String>) -> SpecError {
        SpecError::new(self.source.as_str(), location, path, msg)
    }

    fn run(mut self, text: &str) -> Result<ConfigNode, SpecError> {
        self.end = TextEnd::of(text);
        let mut parser = Parser::new_from_str(text);
        while let Some(next) = parser.next_event() {
            let (event, span) = match next {
                Ok(ev) => ev,
                Err(e) => {
                    let loc = self.end.clamp(e.marker().line(), e.marker().col() + 1);
                    let msg = format!("YAML syntax error: {}", e.info());
                    return Err(self.error(loc, self.current_path(), msg));
                }
            };
            if self.event(event, &span)? {
                break;
            }
        }
        Ok(self.root.unwrap_or_else(|| {
            ConfigNode::new(
                ConfigValue::Null,
                Location::new(1, 1),
                "",
                self.source.clone(),
            )
        }))
    }

    /// The path of the node that the next event would start.
    fn current_path(&self) -> String {
        match self.stack.last() {
            None => String::new(),
            Some(Frame::Seq { path, items, .. }) => path::join_index(path, items.len()),
            Some(Frame::Map { path, key, .. }) => match key {
                Some((k, _)) => path::join_key(path, k),
                None => path.clone(),
            },
        }
    }

    fn expecting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn count(&mut self, n: usize, loc: Location) -> Result<(), SpecError> {
        self.nodes += n;
        if self.nodes > MAX_NODES {
            return Err(self.error(
                loc,
                self.current_path(),
                format!("document too large: more than {MAX_NODES} values (aliases expanded)"),
            ));
        }
        Ok(())
    }

    /// Handles one event; returns true at the end of the stream.
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<bool, SpecError> {
        let loc = self.end.of_span(span);
        match event {
            Event::StreamEnd => return Ok(true),
            Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(self.error(
                        loc,
                        String::new(),
                        "a spec file must hold exactly one YAML document (found a second `---`)",
                    ));
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                self.count(1, loc)?;
                if self.expecting_key() {
                    if anchor != 0 {
                        let path = self.current_path();
                        let node = ConfigNode::new(
                            ConfigValue::String(text.to_string()),
                            loc,
                            path,
                            self.source.clone(),
                        );
                        self.anchors.insert(anchor, node);
                    }
                    self.set_key(text.into_owned(), loc)?;
                } else {
                    let path = self.current_path();
                    let value = scalar::resolve(&text, style, tag.as_deref())
                        .map_err(|m| self.error(loc, path.clone(), m))?;
                    let node = ConfigNode::new(value, loc, path, self.source.clone());
                    self.finish(node, anchor)?;
                }
            }
            Event::SequenceStart(anchor, tag) => {
                self.start(true, anchor, tag.as_deref(), loc)?;
            }
            Event::MappingStart(anchor, tag) => {
                self.start(false, anchor, tag.as_deref(), loc)?;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let frame = self.stack.pop();
                let (node, anchor) = match frame {
                    Some(Frame::Seq {
                        anchor,
                        location,
                        path,
                        items,
                    }) => (
                        ConfigNode::new(
                            ConfigValue::Seq(items),
                            location,
                            path,
                            self.source.clone(),
                        ),
                        anchor,
                    ),
                    Some(Frame::Map {
                        anchor,
                        location,
                        path,
                        entries,
                        ..
                    }) => (
                        ConfigNode::new(
                            ConfigValue::Map(entries),
                            location,
                            path,
                            self.source.clone(),
                        ),
                        anchor,
                    ),
                    None => return Ok(false),
                };
                self.finish(node, anchor)?;
            }
            Event::Alias(id) => {
                let path = self.current_path();
                let Some(size) = self.anchors.get(&id).map(ConfigNode::node_count) else {
                    return Err(self.error(
                        loc,
                        path,
                        "alias refers to a node that encloses it (recursive alias)",
                    ));
                };
                if self.expecting_key() {
                    let key = match self.anchors[&id].value() {
                        ConfigValue::String(s) => s.clone(),
                        ConfigValue::Map(_) | ConfigValue::Seq(_) => {
                            return Err(self.error(loc, path, COMPLEX_KEY));
                        }
                        _ => self.anchors[&id].to_string(),
                    };
                    self.count(1, loc)?;
                    self.set_key(key, loc)?;
                } else {
                    self.count(size, loc)?;
                    let node = self.anchors[&id].clone().with_path(&path);
                    self.finish(node, 0)?;
                }
            }
        }
        Ok(false)
    }

    /// Opens a sequence (`is_seq`) or mapping.
    fn start(
        &mut self,
        is_seq: bool,
        anchor: usize,
        tag: Option<&Tag>,
        loc: Location,
    ) -> Result<(), SpecError> {
        self.count(1, loc)?;
        let path = self.current_path();
        if self.expecting_key() {
            return Err(self.error(loc, path, COMPLEX_KEY));
        }
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.error(loc, path, format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        if let Some(tag) = tag {
            let expected = if is_seq { "seq" } else { "map" };
            if !(tag.is_yaml_core_schema() && tag.suffix == expected) {
                return Err(self.error(loc, path, format!("unsupported YAML tag {tag}")));
            }
        }
        self.stack.push(if is_seq {
            Frame::Seq {
                anchor,
                location: loc,
                path,
                items: Vec::new(),
            }
        } else {
            Frame::Map {
                anchor,
                location: loc,
                path,
                entries: Vec::new(),
                key: None,
            }
        });
        Ok(())
    }

    /// Records the key of the next mapping entry, rejecting duplicates.
    fn set_key(&mut self, key: String, loc: Location) -> Result<(), SpecError> {
        let err = match self.stack.last() {
            Some(Frame::Map { entries, path, .. }) => {
                entries.iter().find(|e| e.key == key).map(|first| {
                    (
                        path::join_key(path, &key),
                        format!(
                            "duplicate key \"{key}\" (first given at line {})",
                            first.key_location.line
                        ),
                    )
                })
            }
            _ => None,
        };
        if let Some((path, msg)) = err {
            return Err(self.error(loc, path, msg));
        }
        if let Some(Frame::Map { key: slot, .. }) = self.stack.last_mut() {
            *slot = Some((key, loc));
        }
        Ok(())
    }

    /// Places a finished node into its parent (or as the root) and records
    /// its anchor.
    fn finish(&mut self, node: ConfigNode, anchor: usize) -> Result<(), SpecError> {
        if anchor != 0 {
            self.count(node.node_count(), node.location())?;
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => {
                if let Some((key, key_location)) = key.take() {
                    entries.push(ConfigEntry {
                        key,
                        key_location,
                        value: node,
                    });
                }
            }
        }
        Ok(())
    }
}
