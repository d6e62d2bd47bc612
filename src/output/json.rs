//! Versioned JSON documents.

use serde::Serialize;
use serde_json::{Map, Value};

/// Version of every JSON document gpumem prints. Bumped only on incompatible changes; fields
/// may be added without a bump.
pub const SCHEMA_VERSION: u32 = 1;

/// Serializes a report with `"schema_version"` as its first key.
pub fn document<T: Serialize + ?Sized>(report: &T) -> serde_json::Result<Value> {
    let mut doc = Map::new();
    doc.insert("schema_version".into(), Value::from(SCHEMA_VERSION));
    match serde_json::to_value(report)? {
        Value::Object(fields) => doc.extend(fields),
        other => {
            doc.insert("result".into(), other);
        }
    }
    Ok(Value::Object(doc))
}

/// The document printed on stdout with `--json` when a command fails.
pub fn error_document(message: &str, exit_code: u8) -> Value {
    serde_json::json!({
        "schema_version": SCHEMA_VERSION,
        "error": { "message": message, "exit_code": exit_code },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Sample {
        name: &'static str,
        bytes: u64,
    }

    #[test]
    fn schema_version_comes_first() {
        let doc = document(&Sample {
            name: "x",
            bytes: 7,
        })
        .unwrap();
        let text = serde_json::to_string(&doc).unwrap();
        assert_eq!(text, r#"{"schema_version":1,"name":"x","bytes":7}"#);
    }

    #[test]
    fn error_document_shape() {
        let doc = error_document("boom", 1);
        assert_eq!(doc["error"]["message"], "boom");
        assert_eq!(doc["error"]["exit_code"], 1);
        assert_eq!(doc["schema_version"], 1);
    }
}
