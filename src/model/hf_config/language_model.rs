//! The language model a config.json describes, as transformers builds it: a multimodal class's
//! nested config (or the top level), with its class's defaults filled in where the config
//! leaves fields out (the table in `defaults.rs`). A field the config gives is kept as given.

use std::path::Path;

use serde_json::{Map, Number, Value};

use super::defaults::{self, Class, Composite, Fill, Tie, WhenAbsent, SPELLINGS};
use crate::model::error::ModelError;
use crate::model::family::{Family, FAMILIES};

/// A config.json's language model, ready for the field-by-field parser.
pub(super) struct LanguageModel {
    /// Its keys: the config's own, then its class's defaults.
    pub map: Map<String, Value>,
    /// Its `model_type`, as written or as its multimodal class implies ("" when none).
    pub model_type: String,
    /// The family whose rules read it.
    pub family: Family,
    /// The architecture's name: its `model_type`, or where that is read as another family's
    /// (Qwen2.5-VL's language model as Qwen2), that family's spelling, which every engine's
    /// rules parse.
    pub name: String,
}

/// The language model of the config whose top level is `top` (`path` names it in errors).
pub(super) fn resolve(path: &Path, top: &Map<String, Value>) -> Result<LanguageModel, ModelError> {
    let top_type = top.get("model_type").and_then(Value::as_str).unwrap_or("");
    let composite = defaults::composite_of(top_type);
    let (mut map, model_type) = match composite {
        Some(c) => nested(path, top, c)?,
        None => unlisted(top),
    };
    let class = defaults::class_of(&model_type);
    if let Some(class) = class {
        fill_defaults(&mut map, class);
    }
    if let Some(c) = composite {
        tie(&mut map, top, c.tie);
    }
    let named = Family::from_model_type(&model_type);
    let family = match named {
        Family::Other => class.and_then(|c| c.reads_as).unwrap_or(Family::Other),
        known => known,
    };
    let name = match (named, spelling(family)) {
        (Family::Other, Some(spelling)) => spelling.to_string(),
        _ => model_type.clone(),
    };
    Ok(LanguageModel {
        map,
        model_type,
        family,
        name,
    })
}

/// A multimodal class's language model: its nested config, or what the class builds when the
/// config has none.
fn nested(
    path: &Path,
    top: &Map<String, Value>,
    c: &Composite,
) -> Result<(Map<String, Value>, String), ModelError> {
    match top.get(c.key) {
        Some(Value::Object(text)) => {
            let written = text.get("model_type").and_then(Value::as_str);
            let model_type = match written {
                Some(t) if c.by_model_type => t,
                _ => c.text_model_type,
            };
            Ok((text.clone(), model_type.to_string()))
        }
        None | Some(Value::Null) => {
            let map = match c.when_absent {
                WhenAbsent::Flat => top.clone(),
                WhenAbsent::Init(kwargs) => {
                    let mut map = Map::new();
                    for (field, fill) in kwargs {
                        if let Some(v) = value(&map, *fill) {
                            map.insert((*field).to_string(), v);
                        }
                    }
                    map
                }
            };
            Ok((map, c.text_model_type.to_string()))
        }
        Some(_) => Err(ModelError::BadField {
            path: path.into(),
            field: c.key.into(),
            why: format!(
                "is not an object ({} nests its language model there)",
                c.class
            ),
        }),
    }
}

/// A config of no listed multimodal class: its `text_config` when that looks like a language
/// model (names no `model_type`, or gives a width), else the top level. A top level whose
/// `model_type` is a family of its own names the nested model too (Kimi-K3's `kimi_k3` over a
/// `text_config` written as `kimi_linear`, which its remote code extends).
fn unlisted(top: &Map<String, Value>) -> (Map<String, Value>, String) {
    let top_type = top.get("model_type").and_then(Value::as_str).unwrap_or("");
    let (map, nested) = match top.get("text_config").and_then(Value::as_object) {
        Some(text) if !text.contains_key("model_type") || text.get("hidden_size").is_some() => {
            (text, true)
        }
        _ => (top, false),
    };
    let model_type = match map.get("model_type").and_then(Value::as_str) {
        _ if nested && Family::from_model_type(top_type) != Family::Other => top_type,
        Some(t) => t,
        None => "",
    };
    (map.clone(), model_type.to_string())
}

/// `class`'s defaults where `map` leaves the fields out, then its derived values where they
/// are still None.
fn fill_defaults(map: &mut Map<String, Value>, class: &Class) {
    for (field, fill) in class.fields {
        if spellings(field).iter().any(|s| map.contains_key(*s)) {
            continue;
        }
        if let Some(v) = value(map, *fill) {
            map.insert((*field).to_string(), v);
        }
    }
    for (field, fill) in class.derived {
        if read(map, field).is_some_and(|v| !v.is_null()) {
            continue;
        }
        if let Some(v) = value(map, *fill) {
            map.insert((*field).to_string(), v);
        }
    }
}

/// The multimodal class's rule for tying the lm_head to the embeddings, over the language
/// model's own value (written or its class's default).
fn tie(map: &mut Map<String, Value>, top: &Map<String, Value>, rule: Tie) {
    const KEY: &str = "tie_word_embeddings";
    let own = |default: bool| top.get(KEY).and_then(Value::as_bool).unwrap_or(default);
    let text = map.get(KEY).and_then(Value::as_bool) == Some(true);
    let tied = match rule {
        Tie::Own(default) => own(default),
        Tie::OwnOrText(default) => own(default) || text,
        Tie::Text => return,
    };
    map.insert(KEY.to_string(), Value::Bool(tied));
}

/// The value a default gives in `map`, or `None` where a field it is derived from is missing
/// (or the arithmetic has no answer).
fn value(map: &Map<String, Value>, fill: Fill) -> Option<Value> {
    let uint = |field: &'static str| read(map, field).and_then(Value::as_u64);
    let n = match fill {
        Fill::Uint(v) => v,
        Fill::Float(v) => return Number::from_f64(v).map(Value::Number),
        Fill::Bool(v) => return Some(Value::Bool(v)),
        Fill::Text(v) => return Some(Value::String(v.to_string())),
        Fill::Null => return Some(Value::Null),
        Fill::Field(a) => uint(a)?,
        Fill::Quotient(a, b) => uint(a)?.checked_div(uint(b)?)?,
        Fill::Product(a, b) => uint(a)?.checked_mul(uint(b)?)?,
        Fill::Times(a, k) => uint(a)?.checked_mul(k)?,
    };
    Some(Value::from(n))
}

/// `field`'s value under the first of its spellings `map` has.
fn read<'m>(map: &'m Map<String, Value>, field: &'static str) -> Option<&'m Value> {
    spellings(field).iter().find_map(|s| map.get(*s))
}

/// The spellings read as `field`: its group in [`SPELLINGS`], or itself.
fn spellings(field: &'static str) -> Vec<&'static str> {
    SPELLINGS
        .iter()
        .find(|group| group.contains(&field))
        .map_or_else(|| vec![field], |group| group.to_vec())
}

/// `family`'s config.json spelling, the one its rules parse (`None` for [`Family::Other`]).
fn spelling(family: Family) -> Option<&'static str> {
    FAMILIES
        .iter()
        .find(|r| r.family == family)
        .and_then(|r| r.config.first().copied())
}
