//! `serde::Deserializer` for [`ConfigNode`], with errors that remember which
//! node they are about.

use std::fmt::Display;

use serde::de::{
    self, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};
use serde::forward_to_deserialize_any;

use crate::config_node::{ConfigEntry, ConfigNode, ConfigValue};
use crate::error::SpecError;
use crate::location::Location;

// `SpecError` is the error type of the deserializer: `custom` errors start
// out unlocated (empty `file`) and get the position of the innermost node
// they pass through.
impl de::Error for SpecError {
    fn custom<T: Display>(msg: T) -> Self {
        SpecError::new("", Location::GENERATED, "", msg.to_string())
    }
}

/// Locating deserialization errors.
trait Locate: Sized {
    /// Attaches `node`'s position unless a more precise one is already set.
    fn at(self, node: &ConfigNode) -> Self;
    /// Attaches the position of `entry`'s key unless one is already set.
    fn at_key(self, entry: &ConfigEntry) -> Self;
}

fn place(e: &mut SpecError, source: &str, location: Location, path: &str) {
    if e.file.is_empty() {
        e.file = if source.is_empty() {
            "<unnamed>".to_string()
        } else {
            source.to_string()
        };
        e.line = location.line;
        e.column = location.column;
        e.field = path.to_string();
    }
}

impl Locate for SpecError {
    fn at(mut self, node: &ConfigNode) -> Self {
        place(
            &mut self,
            node.source().as_str(),
            node.location(),
            node.path(),
        );
        self
    }

    fn at_key(mut self, entry: &ConfigEntry) -> Self {
        let v = &entry.value;
        place(&mut self, v.source().as_str(), entry.key_location, v.path());
        self
    }
}

/// Error type of the deserializer.
type DeError = SpecError;

fn visit_int<'de, V: Visitor<'de>>(i: i128, visitor: V) -> Result<V::Value, DeError> {
    if let Ok(v) = i64::try_from(i) {
        visitor.visit_i64(v)
    } else if let Ok(v) = u64::try_from(i) {
        visitor.visit_u64(v)
    } else {
        visitor.visit_i128(i)
    }
}

fn visit_seq<'de, V: Visitor<'de>>(
    items: &'de [ConfigNode],
    visitor: V,
) -> Result<V::Value, DeError> {
    let mut access = SeqDe {
        iter: items.iter(),
        len: items.len(),
    };
    let value = visitor.visit_seq(&mut access)?;
    if access.iter.len() != 0 {
        return Err(de::Error::invalid_length(
            items.len(),
            &"fewer elements in sequence",
        ));
    }
    Ok(value)
}

fn visit_map<'de, V: Visitor<'de>>(
    entries: &'de [ConfigEntry],
    visitor: V,
) -> Result<V::Value, DeError> {
    let mut access = MapDe {
        iter: entries.iter(),
        value: None,
        len: entries.len(),
    };
    let value = visitor.visit_map(&mut access)?;
    if let Some(extra) = access.iter.next() {
        return Err(
            <SpecError as de::Error>::custom(format!("unexpected key \"{}\"", extra.key))
                .at_key(extra),
        );
    }
    Ok(value)
}

impl<'de> de::Deserializer<'de> for &'de ConfigNode {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match self.value() {
            ConfigValue::Null => visitor.visit_unit(),
            ConfigValue::Bool(b) => visitor.visit_bool(*b),
            ConfigValue::Int(i) => visit_int(*i, visitor),
            ConfigValue::Float(f) => visitor.visit_f64(*f),
            ConfigValue::String(s) => visitor.visit_borrowed_str(s),
            ConfigValue::Seq(items) => visit_seq(items, visitor),
            ConfigValue::Map(entries) => visit_map(entries, visitor),
        };
        result.map_err(|e| e.at(self))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let result = match self.value() {
            ConfigValue::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        };
        result.map_err(|e| e.at(self))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self).map_err(|e| e.at(self))
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value() {
            ConfigValue::Null => visit_map(&[], visitor).map_err(|e| e.at(self)),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let result = match self.value() {
            ConfigValue::String(s) => visitor.visit_enum(UnitEnum {
                node: self,
                name: s,
            }),
            ConfigValue::Map(entries) if entries.len() == 1 => {
                visitor.visit_enum(MapEnum { entry: &entries[0] })
            }
            _ => Err(de::Error::custom(format!(
                "expected a variant name or a mapping with one key, found {}",
                self.describe()
            ))),
        };
        result.map_err(|e| e.at(self))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct identifier
    }
}

/// Sequence access over located nodes.
struct SeqDe<'de> {
    iter: std::slice::Iter<'de, ConfigNode>,
    len: usize,
}

impl<'de> SeqAccess<'de> for SeqDe<'de> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.iter.next() {
            Some(node) => seed.deserialize(node).map(Some).map_err(|e| e.at(node)),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.len.min(self.iter.len()))
    }
}

/// Mapping access over located entries; keys are located at the key.
struct MapDe<'de> {
    iter: std::slice::Iter<'de, ConfigEntry>,
    value: Option<&'de ConfigNode>,
    len: usize,
}

impl<'de> MapAccess<'de> for MapDe<'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.iter.next() {
            Some(entry) => {
                self.value = Some(&entry.value);
                seed.deserialize(KeyDe { key: &entry.key })
                    .map(Some)
                    .map_err(|e| e.at_key(entry))
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        match self.value.take() {
            Some(node) => seed.deserialize(node).map_err(|e| e.at(node)),
            None => Err(de::Error::custom("value requested before key")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.len.min(self.iter.len()))
    }
}

/// Deserializer for a mapping key: a string that also converts to numbers
/// and booleans on request (for `HashMap<u32, _>` and the like).
struct KeyDe<'de> {
    key: &'de str,
}

macro_rules! key_parse {
    ($($method:ident => $ty:ty, $visit:ident;)*) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
                match self.key.parse::<$ty>() {
                    Ok(v) => visitor.$visit(v),
                    Err(_) => visitor.visit_borrowed_str(self.key),
                }
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for KeyDe<'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_borrowed_str(self.key)
    }

    key_parse! {
        deserialize_bool => bool, visit_bool;
        deserialize_i8 => i8, visit_i8;
        deserialize_i16 => i16, visit_i16;
        deserialize_i32 => i32, visit_i32;
        deserialize_i64 => i64, visit_i64;
        deserialize_i128 => i128, visit_i128;
        deserialize_u8 => u8, visit_u8;
        deserialize_u16 => u16, visit_u16;
        deserialize_u32 => u32, visit_u32;
        deserialize_u64 => u64, visit_u64;
        deserialize_u128 => u128, visit_u128;
        deserialize_f32 => f32, visit_f32;
        deserialize_f64 => f64, visit_f64;
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_enum(self.key.into_deserializer())
    }

    forward_to_deserialize_any! {
        char str string bytes byte_buf unit unit_struct seq tuple tuple_struct
        map struct identifier ignored_any
    }
}

/// Enum access for a unit variant written as a plain string.
struct UnitEnum<'de> {
    node: &'de ConfigNode,
    name: &'de str,
}

impl<'de> EnumAccess<'de> for UnitEnum<'de> {
    type Error = DeError;
    type Variant = UnitOnly<'de>;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, UnitOnly<'de>), DeError> {
        let de: de::value::BorrowedStrDeserializer<'de, DeError> =
            de::value::BorrowedStrDeserializer::new(self.name);
        let value = seed.deserialize(de).map_err(|e| e.at(self.node))?;
        Ok((value, UnitOnly { node: self.node }))
    }
}

/// Variant access when only the variant name was given.
struct UnitOnly<'de> {
    node: &'de ConfigNode,
}

impl<'de> UnitOnly<'de> {
    fn needs_value(&self, what: &str) -> DeError {
        de::Error::custom(format!(
            "this variant needs {what}: write it as a mapping `{{ {}: ... }}`",
            self.node.as_str().unwrap_or("variant")
        ))
    }
}

impl<'de> VariantAccess<'de> for UnitOnly<'de> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value, DeError> {
        Err(self.needs_value("a value"))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, DeError> {
        Err(self.needs_value("a sequence of values"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        _visitor: V,
    ) -> Result<V::Value, DeError> {
        Err(self.needs_value("fields"))
    }
}

/// Enum access for `{ variant: value }`.
struct MapEnum<'de> {
    entry: &'de ConfigEntry,
}

impl<'de> EnumAccess<'de> for MapEnum<'de> {
    type Error = DeError;
    type Variant = &'de ConfigNode;

    fn variant_seed<S: DeserializeSeed<'de>>(
        self,
        seed: S,
    ) -> Result<(S::Value, &'de ConfigNode), DeError> {
        let value = seed
            .deserialize(KeyDe {
                key: &self.entry.key,
            })
            .map_err(|e| e.at_key(self.entry))?;
        Ok((value, &self.entry.value))
    }
}

impl<'de> VariantAccess<'de> for &'de ConfigNode {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        if self.is_null() {
            Ok(())
        } else {
            Err(<SpecError as de::Error>::custom(format!(
                "this variant takes no value, found {}",
                self.describe()
            ))
            .at(self))
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        seed.deserialize(self).map_err(|e| e.at(self))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, DeError> {
        de::Deserializer::deserialize_seq(self, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        de::Deserializer::deserialize_map(self, visitor)
    }
}
