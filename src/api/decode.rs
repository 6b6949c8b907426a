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
    T::deserialize(De(value))
}

/// The deserializer: one borrowed JSON value.
struct De<'de>(&'de Value);

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

    fn seq<V: Visitor<'de>>(items: &'de [Value], visitor: V) -> Result<V::Value, DecodeError> {
        let mut seq = Seq {
            items: items.iter(),
            index: 0,
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
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        let mut access = Entries {
            entries: map.iter(),
            value: None,
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
            Value::Array(items) => Self::seq(items, visitor),
            Value::Object(map) => Self::map(map, visitor),
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
            other => Err(type_error(other, &visitor)),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.0 {
            Value::Array(items) => Self::seq(items, visitor),
            Value::Null => Self::seq(&[], visitor),
            other => Err(type_error(other, &visitor)),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        static EMPTY: std::sync::LazyLock<serde_json::Map<String, Value>> =
            std::sync::LazyLock::new(serde_json::Map::new);
        match self.0 {
            Value::Object(map) => Self::map(map, visitor),
            Value::Null => Self::map(&EMPTY, visitor),
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
            .visit_enum(Variant { variant, content })
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
        seed.deserialize(De(item))
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
        seed.deserialize(De(value)).map_err(|e| e.at_key(key))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len())
    }
}

struct Variant<'de> {
    variant: &'de str,
    content: Option<&'de Value>,
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
            Some(v) => seed.deserialize(De(v)),
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
            Some(v @ Value::Array(_)) => De(v).deserialize_any(visitor),
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
            Some(v @ Value::Object(_)) => De(v).deserialize_any(visitor),
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
}
