//! Every JSON field path picolet's `api::Pod` model reads, found by driving its `Deserialize`
//! impl with a tracing deserializer: each struct names its fields (serde's `FIELDS`), each
//! field is then deserialized in turn, one element per list, one entry per map. Paths are
//! spelled as in `tests/fixtures/upstream/pod-fields-*.txt`: `spec.containers[].name`.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

#[derive(Debug)]
pub struct TraceError(String);

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for TraceError {}
impl de::Error for TraceError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        TraceError(msg.to_string())
    }
}

/// The field paths `T` reads, sorted, each under `prefix` (`""` for none). A struct with a
/// `#[serde(flatten)]` map (picolet's `Volume`) is seen as a map: trace its typed parts one
/// by one and prefix them.
pub fn model_paths<T: de::DeserializeOwned>(prefix: &str) -> Result<Trace, TraceError> {
    let out = RefCell::new(Trace::default());
    T::deserialize(Tracer {
        path: prefix.to_string(),
        out: &out,
        depth: 0,
    })?;
    Ok(out.into_inner())
}

/// What a trace found.
#[derive(Debug, Default)]
pub struct Trace {
    /// Every field path the model reads.
    pub paths: BTreeSet<String>,
    /// Paths read as an opaque value (`serde_json::Value`, or an untagged leaf such as a
    /// quantity): the model keeps what is below them verbatim.
    pub opaque: BTreeSet<String>,
}

impl Trace {
    pub fn extend(&mut self, other: Trace) {
        self.paths.extend(other.paths);
        self.opaque.extend(other.opaque);
    }
}

struct Tracer<'a> {
    path: String,
    out: &'a RefCell<Trace>,
    depth: usize,
}

impl<'a> Tracer<'a> {
    fn child(&self, path: String) -> Tracer<'a> {
        Tracer {
            path,
            out: self.out,
            depth: self.depth + 1,
        }
    }
}

macro_rules! leaf {
    ($($method:ident => $visit:ident($value:expr)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
            visitor.$visit($value)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Tracer<'_> {
    type Error = TraceError;

    // Untagged enums (Quantity, IntOrString) and opaque `serde_json::Value`s: a string
    // satisfies them all, and nothing below them is a field of picolet's model.
    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        self.out.borrow_mut().opaque.insert(self.path.clone());
        visitor.visit_str("1")
    }

    leaf! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(1),
        deserialize_i16 => visit_i64(1),
        deserialize_i32 => visit_i64(1),
        deserialize_i64 => visit_i64(1),
        deserialize_u8 => visit_u64(1),
        deserialize_u16 => visit_u64(1),
        deserialize_u32 => visit_u64(1),
        deserialize_u64 => visit_u64(1),
        deserialize_f32 => visit_f64(1.0),
        deserialize_f64 => visit_f64(1.0),
        deserialize_char => visit_char('x'),
        deserialize_str => visit_str("1"),
        deserialize_string => visit_str("1"),
        deserialize_bytes => visit_bytes(b"1"),
        deserialize_byte_buf => visit_bytes(b"1"),
        deserialize_identifier => visit_str("1"),
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_unit()
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_unit()
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_some(self)
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        let path = format!("{}[]", self.path);
        visitor.visit_seq(OneElement(Some(self.child(path))))
    }
    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.deserialize_seq(visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        // A map is a leaf upstream (labels, limits): its values are not fields. A flattened
        // struct arrives here too: it gets no entries (its parts are traced by the caller).
        let path = self.path.clone();
        visitor.visit_map(Fields {
            names: &[],
            next: 0,
            parent: self,
            record: false,
            value_path: Some(path),
        })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        if self.depth > 32 {
            return Err(TraceError(format!("{}: nested too deep", self.path)));
        }
        visitor.visit_map(Fields {
            names: fields,
            next: 0,
            parent: self,
            record: true,
            value_path: None,
        })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let first = variants.first().copied().unwrap_or("");
        visitor.visit_enum(first.into_deserializer())
    }
}

struct OneElement<'a>(Option<Tracer<'a>>);

impl<'de> de::SeqAccess<'de> for OneElement<'_> {
    type Error = TraceError;
    fn next_element_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<Option<S::Value>, TraceError> {
        match self.0.take() {
            Some(t) => seed.deserialize(t).map(Some),
            None => Ok(None),
        }
    }
}

struct Fields<'a> {
    names: &'static [&'static str],
    next: usize,
    parent: Tracer<'a>,
    /// Record `path.name` for each name (struct fields), not for map keys.
    record: bool,
    /// For maps: the values keep the map's own path.
    value_path: Option<String>,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = TraceError;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, TraceError> {
        let Some(name) = self.names.get(self.next) else {
            return Ok(None);
        };
        if self.record {
            let path = self.join(name);
            self.parent.out.borrow_mut().paths.insert(path);
        }
        let key: de::value::StrDeserializer<'_, TraceError> = name.into_deserializer();
        seed.deserialize(key).map(Some)
    }
    fn next_value_seed<S: DeserializeSeed<'de>>(
        &mut self,
        seed: S,
    ) -> Result<S::Value, TraceError> {
        let name = self.names[self.next];
        self.next += 1;
        let path = match &self.value_path {
            Some(p) => p.clone(),
            None => self.join(name),
        };
        seed.deserialize(self.parent.child(path))
    }
}

impl Fields<'_> {
    fn join(&self, name: &str) -> String {
        if self.parent.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.parent.path)
        }
    }
}

/// The upstream fixture's paths (comments and blank lines skipped).
pub fn upstream_paths(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}
