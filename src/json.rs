//! JSON objects built out of line (binary size).
//!
//! `serde_json::json!` inlines, at every key, the key's `String`, a `to_value` call with its
//! error check, `Map::insert` and the drop of the value it replaced: about 100 B of ARM code
//! a key. [`object`] takes values already made and does the map part once.
//!
//! Must never: change the value built — the map is serde_json's `Map` (keys sorted), a
//! repeated key keeps its last value, as with `json!`.

use serde_json::{Map, Value};

/// `json!({k1: v1, k2: v2, …})` for values already made.
#[inline(never)]
pub(crate) fn object(pairs: &mut [(&str, Value)]) -> Value {
    let mut map = Map::new();
    for (k, v) in pairs {
        map.insert((*k).to_string(), std::mem::take(v));
    }
    Value::Object(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_value_as_json_macro() {
        let got = object(&mut [
            ("kind", "Status".into()),
            ("code", 404.into()),
            ("a", Value::Null),
            ("kind", "Event".into()),
            ("metadata", object(&mut [])),
        ]);
        let want =
            json!({"kind": "Status", "code": 404, "a": null, "kind": "Event", "metadata": {}});
        assert_eq!(got, want);
        assert_eq!(
            serde_json::to_string(&got).ok(),
            serde_json::to_string(&want).ok()
        );
    }
}
