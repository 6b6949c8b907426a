//! Decoding a `serde_json::Value` into the API types with the field path of a type error
//! (`spec.containers[0].ports[0].containerPort: invalid type: …`).
//!
//! A `Deserializer` over `&Value` written for this one job: the same visits and the same
//! messages as serde_json's own `Value` deserializer, and every map value and sequence
//! element names itself on an error coming up through it, so the error arrives at the top
//! with its whole path. It replaces `serde_path_to_error`, whose wrapping of every visitor
//! cost about 148 KB of the aarch64 binary (one wrapper per visited type); here the derived
//! `Deserialize` code of `Pod` is instantiated once, for this deserializer, and the path
//! tracking is a `map_err` per field.
//!
//! Like `serde_path_to_error`, the path stops where serde buffers (`#[serde(flatten)]`,
//! untagged enums): the error is named at the field that holds the buffered value.

use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, Error as _, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};
use serde_json::{Number, Value};

/// A value that does not decode: where, and serde's message.
///
/// Boxed, as serde_json's own error is: every derived visitor passes a `Result` of it up
/// through each field, and a pointer moves in one register where the three strings took
/// 72 bytes (about 10 KB of the aarch64 binary).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(Box<Inner>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Inner {
    /// Innermost segment last once the error has reached the top (see [`Self::at`]).
    path: Vec<Segment>,
    message: String,
    /// The message without the offending value where `message` may quote it (serde's
    /// `invalid type: string "…"`, a custom message): what [`Self::redacted`] keeps. `None`
    /// when `message` names no value (a missing or unknown field, a length).
    value_free: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

impl DecodeError {
    /// The field path, `spec.containers[0].image`; `.` for the document itself (as
    /// `serde_path_to_error` wrote it).
    pub fn field(&self) -> String {
        if self.0.path.is_empty() {
            return ".".to_string();
        }
        let mut out = String::new();
        // Segments are pushed on the way up: the outermost is last.
        for seg in self.0.path.iter().rev() {
            match seg {
                Segment::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
                Segment::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
            }
        }
        out
    }

    /// serde's message without the path.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// The same error with every value it quoted taken out, for documents whose values are
    /// secret (a Secret's `data`/`stringData`): `invalid type: integer, expected a string`
    /// instead of `` invalid type: integer `98765432123`, expected a string ``. The field
    /// path (keys only) and the expected type stay.
    pub fn redacted(mut self) -> Self {
        if let Some(m) = self.0.value_free.take() {
            self.0.message = m;
        }
        self
    }

    fn new(message: String, value_free: Option<String>) -> Self {
        DecodeError(Box::new(Inner {
            path: Vec::new(),
            message,
            value_free,
        }))
    }

    /// The error seen from the map entry that holds the failing value. Out of line and
    /// taking the key borrowed: every field of every derived visitor calls it, and the
    /// copy of the key is made here once instead of inlined at each of them.
    #[inline(never)]
    fn at_key(mut self, key: &str) -> Self {
        self.0.path.push(Segment::Key(key.to_owned()));
        self
    }

    /// The error seen from the sequence that holds the failing element.
    #[inline(never)]
    fn at_index(mut self, index: usize) -> Self {
        self.0.path.push(Segment::Index(index));
        self
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.0.path.is_empty() {
            write!(f, "{}: ", self.field())?;
        }
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for DecodeError {}

/// What kind of value serde found, without the value itself.
fn kind_of(unexp: &Unexpected<'_>) -> &'static str {
    match unexp {
        Unexpected::Bool(_) => "boolean",
        Unexpected::Unsigned(_) | Unexpected::Signed(_) => "integer",
        Unexpected::Float(_) => "floating point",
        Unexpected::Char(_) => "character",
        Unexpected::Str(_) => "string",
        Unexpected::Bytes(_) => "byte array",
        Unexpected::Unit => "null",
        Unexpected::Seq => "sequence",
        Unexpected::Map => "map",
        _ => "value",
    }
}

impl de::Error for DecodeError {
    /// A message serde or a type made up: it may quote the value.
    #[inline(never)]
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DecodeError::new(msg.to_string(), Some("invalid value".to_string()))
    }

    #[inline(never)]
    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DecodeError::new(
            format!("invalid type: {unexp}, expected {exp}"),
            Some(format!("invalid type: {}, expected {exp}", kind_of(&unexp))),
        )
    }

    #[inline(never)]
    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DecodeError::new(
            format!("invalid value: {unexp}, expected {exp}"),
            Some(format!(
                "invalid value: {}, expected {exp}",
                kind_of(&unexp)
            )),
        )
    }

    #[inline(never)]
    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let message = de::value::Error::unknown_variant(variant, expected).to_string();
        let value_free = message.replacen(&format!(" `{variant}`"), "", 1);
        DecodeError::new(message, Some(value_free))
    }

    fn missing_field(field: &'static str) -> Self {
        DecodeError::new(format!("missing field `{field}`"), None)
    }

    fn duplicate_field(field: &'static str) -> Self {
        DecodeError::new(format!("duplicate field `{field}`"), None)
    }

    fn invalid_length(len: usize, exp: &dyn de::Expected) -> Self {
        DecodeError::new(format!("invalid length {len}, expected {exp}"), None)
    }
}

/// Decodes `value` as a `T`, naming the field path of an error.
pub fn from_value<'de, T: de::Deserialize<'de>>(value: &'de Value) -> Result<T, DecodeError> {
    T::deserialize(De(value, false))
}

/// Decodes a value made by [`yaml_value`] as a `T`, naming the field path of an error.
///
/// As serde_yaml_ng's own typed decoding did: where a string is wanted, a number or a
/// boolean reads as its text (`cpu: 1` is the string `"1"`, `enabled: true` under a
/// `map[string]string` is `"true"`). Everything else as [`from_value`].
pub fn from_yaml_value<'de, T: de::Deserialize<'de>>(value: &'de Value) -> Result<T, DecodeError> {
    T::deserialize(De(value, true))
}

/// JSON text that does not decode.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON (serde_json's message, with line and column).
    #[error("{0}")]
    Syntax(#[from] serde_json::Error),
    /// A value that does not fit (with its field path).
    #[error("{0}")]
    Decode(#[from] DecodeError),
}

/// Decodes JSON text as a `T`: a [`Value`] first (one parser for every input), then
/// [`from_value`], so a type's derived `Deserialize` exists once, for this decoder, and
/// an error names the field path.
pub fn from_json_slice<T: de::DeserializeOwned>(bytes: &[u8]) -> Result<T, JsonError> {
    let value: Value = serde_json::from_slice(bytes)?;
    Ok(from_value(&value)?)
}

/// YAML text that does not decode.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// Not YAML, or not one document (serde_yaml_ng's message, with line and column).
    #[error("{0}")]
    Syntax(#[from] serde_yaml_ng::Error),
    /// A value that does not fit (with its field path).
    #[error("{0}")]
    Decode(#[from] DecodeError),
}

/// Decodes YAML (or JSON) text, one document, as a `T`: [`yaml_value`], then
/// [`from_yaml_value`].
pub fn from_yaml<T: de::DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    Ok(from_yaml_value(&yaml_value(text)?)?)
}

/// YAML (or JSON) text, one document, as the JSON value the decoder reads: the YAML 1.2
/// reading serde_yaml_ng gives (`yes` is a string, `0x10` is 16), aliases resolved, merge
/// keys (`<<`) left as plain keys (serde_yaml_ng's typed decoding never applied them), an
/// empty document `null`.
///
/// What JSON cannot hold is written as serde_yaml_ng's typed decoding read it: a tag is
/// dropped (`!foo bar` is `bar`), a `.nan` or `.inf` is its text (a string where a number
/// is wanted is a type error, as the float was), a key that is a number or a boolean is
/// its text, a null key is `""`. A key that is a list or a map is an error naming where.
/// A key given twice is an error (serde_yaml_ng's value parser), where a typed map
/// used to keep the last.
pub fn yaml_value(text: &str) -> Result<Value, YamlError> {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(text)?;
    Ok(json_of_yaml(doc)?)
}

fn json_of_yaml(v: serde_yaml_ng::Value) -> Result<Value, DecodeError> {
    use serde_yaml_ng::Value as Y;
    Ok(match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(u) = n.as_u64() {
                Value::from(u)
            } else if let Some(i) = n.as_i64() {
                Value::from(i)
            } else {
                n.as_f64()
                    .and_then(Number::from_f64)
                    .map_or_else(|| Value::String(n.to_string()), Value::Number)
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.into_iter().enumerate() {
                out.push(json_of_yaml(item).map_err(|e| e.at_index(i))?);
            }
            Value::Array(out)
        }
        Y::Mapping(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let key = match json_of_yaml(k)? {
                    Value::String(s) => s,
                    Value::Null => String::new(),
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) => n.to_string(),
                    Value::Array(_) | Value::Object(_) => {
                        return Err(DecodeError::custom(
                            "a key that is a list or a map is not supported",
                        ));
                    }
                };
                let v = json_of_yaml(v).map_err(|e| e.at_key(&key))?;
                out.insert(key, v);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => json_of_yaml(t.value)?,
    })
}

/// The deserializer: one borrowed JSON value, and whether it came from YAML (see
/// [`from_yaml_value`]).
struct De<'de>(&'de Value, bool);

/// serde_json's `Value::unexpected` (so messages read the same).
fn unexpected(v: &Value) -> Unexpected<'_> {
    match v {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => number_unexpected(n),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

fn number_unexpected(n: &Number) -> Unexpected<'static> {
    if let Some(u) = n.as_u64() {
        Unexpected::Unsigned(u)
    } else if let Some(i) = n.as_i64() {
        Unexpected::Signed(i)
    } else {
        Unexpected::Float(n.as_f64().unwrap_or(f64::NAN))
    }
}

/// A type error at this value: out of line, one copy for every visitor.
#[inline(never)]
fn type_error(v: &Value, expected: &dyn de::Expected) -> DecodeError {
    DecodeError::invalid_type(unexpected(v), expected)
}

impl<'de> De<'de> {
    fn number<V: Visitor<'de>>(n: &Number, visitor: V) -> Result<V::Value, DecodeError> {
        if let Some(u) = n.as_u64() {
            visitor.visit_u64(u)
        } else if let Some(i) = n.as_i64() {
            visitor.visit_i64(i)
        } else {
            visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    fn seq<V: Visitor<'de>>(
        items: &'de [Value],
        yaml: bool,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let mut seq = Seq {
            items: items.iter(),
            index: 0,
            yaml,
        };
        let out = visitor.visit_seq(&mut seq)?;
        // serde_json: a visitor that leaves elements is an error.
        if seq.items.len() == 0 {
            Ok(out)
        } else {
            Err(DecodeError::invalid_length(
                items.len(),
                &"fewer elements in array",
            ))
        }
    }

    fn map<V: Visitor<'de>>(
        map: &'de serde_json::Map<String, Value>,
        yaml: bool,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let mut access = Entries {
            entries: map.iter(),
            value: None,
            yaml,
        };
        let out = visitor.visit_map(&mut access)?;
        if access.entries.len() == 0 {
            Ok(out)
        } else {
            Err(DecodeError::invalid_length(
                map.len(),
                &"fewer elements in map",
            ))
        }
    }
}

/// Every typed request calls the one visit its JSON form can make (a struct is an object,
/// a list an array, …) and turns any other value into a type error out of line, so the
/// derived visitors' other `visit_*` (a struct from an array, …) are never instantiated.
/// Only `deserialize_any` (untagged enums, `serde_json::Value` fields) visits by form.
impl<'de> Deserializer<'de> for De<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => Self::number(n, visitor),
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(items) => Self::seq(items, self.1, visitor),
            Value::Object(map) => Self::map(map, self.1, visitor),
        }
    }

    // kubelet (the apiserver's decoder, Go's encoding/json): `null` is the zero value of
    // whatever the field is — an empty list or map, "", false, 0, an empty struct. `helm
    // template` leaves bare `envFrom:`, `labels:` … in its output and kubectl accepts them.
    // Option fields read `null` as None (`deserialize_option`).

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Null => visitor.visit_bool(false),
            other => Err(type_error(other, &visitor)),
        }
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Value::Number(n) => Self::number(n, visitor),
            Value::Null => visitor.visit_u64(0),
            other => Err(type_error(other, &visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Null => visitor.visit_borrowed_str(""),
            Value::Number(_) | Value::Bool(_) if self.1 => visitor.visit_string(self.0.to_string()),
            other => Err(type_error(other, &visitor)),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Value::Array(items) => Self::seq(items, self.1, visitor),
            Value::Null => Self::seq(&[], self.1, visitor),
            other => Err(type_error(other, &visitor)),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        static EMPTY: std::sync::LazyLock<serde_json::Map<String, Value>> =
            std::sync::LazyLock::new(serde_json::Map::new);
        match self.0 {
            Value::Object(map) => Self::map(map, self.1, visitor),
            Value::Null => Self::map(&EMPTY, self.1, visitor),
            other => Err(type_error(other, &visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        self.deserialize_map(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        // serde_json: a string is a unit variant, a one-key map a variant with content.
        let (variant, content) = match self.0 {
            Value::String(s) => (s.as_str(), None),
            Value::Object(map) => {
                let mut it = map.iter();
                match (it.next(), it.next()) {
                    (Some((k, v)), None) => (k.as_str(), Some(v)),
                    _ => {
                        return Err(DecodeError::invalid_value(
                            Unexpected::Map,
                            &"map with a single key",
                        ));
                    }
                }
            }
            other => return Err(type_error(other, &"string or map")),
        };
        visitor
            .visit_enum(Variant {
                variant,
                content,
                yaml: self.1,
            })
            .map_err(|e| match content {
                Some(_) => e.at_key(variant),
                None => e,
            })
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        i128 u128 char bytes byte_buf unit unit_struct tuple tuple_struct identifier
    }

    // The integers and floats: any number, as serde_json's `deserialize_number`.
    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_i64(visitor)
    }
    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_str(visitor)
    }
}

struct Seq<'de> {
    items: std::slice::Iter<'de, Value>,
    index: usize,
    yaml: bool,
}

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        let Some(item) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(De(item, self.yaml))
            .map(Some)
            .map_err(|e| e.at_index(index))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Entries<'de> {
    entries: serde_json::map::Iter<'de>,
    value: Option<(&'de str, &'de Value)>,
    yaml: bool,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        self.value = Some((key, value));
        let key_de = de::value::BorrowedStrDeserializer::<DecodeError>::new(key);
        seed.deserialize(key_de)
            .map(Some)
            .map_err(|e| e.at_key(key))
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        let Some((key, value)) = self.value.take() else {
            return Err(DecodeError::custom("value is missing"));
        };
        seed.deserialize(De(value, self.yaml))
            .map_err(|e| e.at_key(key))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct Variant<'de> {
    variant: &'de str,
    content: Option<&'de Value>,
    yaml: bool,
}

impl<'de> EnumAccess<'de> for Variant<'de> {
    type Error = DecodeError;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self), DecodeError> {
        let name = de::value::BorrowedStrDeserializer::<DecodeError>::new(self.variant);
        Ok((seed.deserialize(name)?, self))
    }
}

impl<'de> VariantAccess<'de> for Variant<'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        match self.content {
            None | Some(Value::Null) => Ok(()),
            Some(other) => Err(DecodeError::invalid_type(
                unexpected(other),
                &"unit variant",
            )),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        match self.content {
            Some(v) => seed.deserialize(De(v, self.yaml)),
            None => Err(DecodeError::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match self.content {
            Some(v @ Value::Array(_)) => De(v, self.yaml).deserialize_any(visitor),
            Some(other) => Err(DecodeError::invalid_type(
                unexpected(other),
                &"tuple variant",
            )),
            None => Err(DecodeError::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match self.content {
            Some(v @ Value::Object(_)) => De(v, self.yaml).deserialize_any(visitor),
            Some(other) => Err(DecodeError::invalid_type(
                unexpected(other),
                &"struct variant",
            )),
            None => Err(DecodeError::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Pod;
    use serde_json::json;

    fn err(v: Value) -> (String, String) {
        let e = from_value::<Pod>(&v).unwrap_err();
        (e.field(), e.to_string())
    }

    #[test]
    fn errors_name_the_field_path() {
        // (document, field named, Display)
        let table: Vec<(Value, &str, &str)> = vec![
            (
                json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "http"}]}]}}),
                "spec.containers[0].ports[0].containerPort",
                "spec.containers[0].ports[0].containerPort: invalid type: string \"http\", expected i32",
            ),
            (
                json!({"spec": {"containers": [{"name": "a", "ports": [{"name": "x"}]}]}}),
                "spec.containers[0].ports[0]",
                "spec.containers[0].ports[0]: missing field `containerPort`",
            ),
            (
                json!({"spec": {"restartPolicy": "Sometimes"}}),
                "spec.restartPolicy",
                "spec.restartPolicy: unknown variant `Sometimes`, expected one of `Always`, `OnFailure`, `Never`",
            ),
            (
                json!({"metadata": {"labels": {"a": 5}}}),
                "metadata.labels.a",
                "metadata.labels.a: invalid type: integer `5`, expected a string",
            ),
            (
                json!({"metadata": {"labels": {"a": -1.5}}}),
                "metadata.labels.a",
                "metadata.labels.a: invalid type: floating point `-1.5`, expected a string",
            ),
            (
                json!({"spec": {"containers": {"name": "a"}}}),
                "spec.containers",
                "spec.containers: invalid type: map, expected a sequence",
            ),
            (
                json!({"spec": {"hostNetwork": "yes"}}),
                "spec.hostNetwork",
                "spec.hostNetwork: invalid type: string \"yes\", expected a boolean",
            ),
            (
                json!("x"),
                ".",
                "invalid type: string \"x\", expected struct Pod",
            ),
            (
                json!({"spec": {"containers": [{"name": "a"}, {"name": 7}]}}),
                "spec.containers[1].name",
                "spec.containers[1].name: invalid type: integer `7`, expected a string",
            ),
        ];
        for (doc, field, display) in table {
            assert_eq!(
                err(doc.clone()),
                (field.to_string(), display.to_string()),
                "{doc}"
            );
        }
    }

    #[test]
    fn redacted_errors_name_the_field_and_the_type_never_the_value() {
        let cases = [
            (
                json!({"stringData": {"pin": 98765432123u64}}),
                "stringData.pin: invalid type: integer, expected a string",
            ),
            (
                json!({"stringData": {"f": 3.25}}),
                "stringData.f: invalid type: floating point, expected a string",
            ),
            (
                json!({"data": "s3cret"}),
                "data: invalid type: string, expected a map",
            ),
            (
                json!({"data": {"k": true}}),
                "data.k: invalid type: boolean, expected a string",
            ),
            (
                json!({"type": -7}),
                "type: invalid type: integer, expected a string",
            ),
        ];
        for (input, want) in cases {
            let err = from_value::<crate::api::Secret>(&input).unwrap_err();
            // Unredacted, serde quotes the value (what users of non-secret documents see).
            assert_ne!(err.to_string(), want);
            assert_eq!(err.redacted().to_string(), want, "{input}");
        }
        // Messages that quote no value stay whole.
        let e = DecodeError::missing_field("name");
        assert_eq!(e.clone().redacted(), e);
        // A custom message may quote anything: redacted whole.
        assert_eq!(
            DecodeError::custom("bad s3cret").redacted().message(),
            "invalid value"
        );
        let e = DecodeError::unknown_variant("s3cret", &["A", "B"]);
        assert_eq!(e.message(), "unknown variant `s3cret`, expected `A` or `B`");
        assert_eq!(
            e.redacted().message(),
            "unknown variant, expected `A` or `B`"
        );
    }

    #[test]
    fn decodes_as_serde_json_does() {
        let v = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"a": "b"}, "creationTimestamp": null},
            "spec": {
                "restartPolicy": "OnFailure",
                "affinity": {"nodeAffinity": {"x": [1, 2.5, true, null]}},
                "containers": [{
                    "name": "a", "image": "nginx",
                    "ports": [{"containerPort": 80, "protocol": "UDP"}],
                    "resources": {"limits": {"cpu": "500m", "memory": 64}},
                    "livenessProbe": {"httpGet": {"port": "http", "path": "/"}},
                }],
                "volumes": [{"name": "v", "hostPath": {"path": "/x"}}],
            },
            "status": {"phase": "Running"},
        });
        let ours: Pod = from_value(&v).unwrap();
        let theirs: Pod = serde_json::from_value(v).unwrap();
        assert_eq!(ours, theirs);
    }

    /// The YAML reading of the typed inputs (config file, kubeconfig): what JSON cannot
    /// hold, and serde_yaml_ng's leniency where a string is wanted.
    #[test]
    fn yaml_values_read_as_serde_yaml_ng_typed_decoding_did() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        struct T {
            s: Option<String>,
            n: Option<u16>,
            b: Option<bool>,
            m: Option<std::collections::BTreeMap<String, String>>,
            l: Option<Vec<String>>,
        }
        let t = |text: &str| from_yaml::<T>(text).map_err(|e| e.to_string());
        let none = T {
            s: None,
            n: None,
            b: None,
            m: None,
            l: None,
        };
        // Scalars where a string is wanted: their text; tags dropped; 1.2 rules.
        assert_eq!(t("s: 123").unwrap().s.as_deref(), Some("123"));
        assert_eq!(t("s: yes").unwrap().s.as_deref(), Some("yes"));
        assert_eq!(t("s: !foo bar").unwrap().s.as_deref(), Some("bar"));
        assert_eq!(t("s: .nan").unwrap().s.as_deref(), Some(".nan"));
        assert_eq!(t("s: true").unwrap().s.as_deref(), Some("true"));
        assert_eq!(
            t("m: {cpu: 1, 2: x, true: y}").unwrap().m.unwrap(),
            [("cpu", "1"), ("2", "x"), ("true", "y")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        );
        assert_eq!(t("l: !tag [a, 1]").unwrap().l.unwrap(), ["a", "1"]);
        // Numbers and booleans stay strict.
        assert_eq!(t("n: 0x10").unwrap().n, Some(16));
        assert!(
            t("n: '5'")
                .unwrap_err()
                .starts_with("n: invalid type: string")
        );
        assert!(t("n: -1").unwrap_err().starts_with("n: invalid value"));
        assert!(
            t("n: .nan")
                .unwrap_err()
                .starts_with("n: invalid type: string \".nan\"")
        );
        assert!(
            t("b: yes")
                .unwrap_err()
                .starts_with("b: invalid type: string")
        );
        // Empty, comments only, explicit nulls: nothing set; unknown keys ignored.
        assert_eq!(t("# nothing\n").unwrap(), none);
        assert_eq!(t("s: ~\nunknown: .inf\n").unwrap(), none);
        // Merge keys stay plain keys, as serde_yaml_ng's typed decoding left them.
        let v = yaml_value("a: &x {s: 1}\n<<: *x\n").unwrap();
        assert_eq!(v, json!({"a": {"s": 1}, "<<": {"s": 1}}));
        // What does not fit names where.
        let e = t("m:\n  a: b\n  ? [1]\n  : c\n").unwrap_err();
        assert_eq!(e, "m: a key that is a list or a map is not supported");
        let e = t("l: [a, [b]]").unwrap_err();
        assert!(e.starts_with("l[1]: invalid type: sequence"), "{e}");
        // Syntax errors and more than one document: serde_yaml_ng's message, with the line.
        let e = t("s: [\n").unwrap_err();
        assert!(e.contains("line"), "{e}");
        assert!(
            t("s: a\n---\ns: b\n")
                .unwrap_err()
                .contains("more than one document")
        );
        // A key given twice is an error, also inside a map (where a typed map kept the last).
        assert!(
            t("m: {a: 1, a: 2}")
                .unwrap_err()
                .contains("duplicate entry")
        );
    }

    /// Decoding JSON stays strict: a number is no string there.
    #[test]
    fn json_values_keep_strings_strict() {
        let e = from_value::<String>(&json!(1)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid type: integer `1`, expected a string"
        );
    }
}
