//! Reading config.json fields by any of the names families give them, remembering which were
//! read (an unknown family's warning lists them).

use std::path::Path;

use serde_json::{Map, Value};

use crate::model::error::ModelError;

pub(super) struct Fields<'a> {
    pub path: &'a Path,
    pub map: &'a Map<String, Value>,
    pub used: Vec<String>,
}

impl Fields<'_> {
    /// The first of `names` present, as a non-negative integer.
    pub fn uint(&mut self, names: &[&str]) -> Result<Option<u64>, ModelError> {
        for name in names {
            match self.map.get(*name) {
                None | Some(Value::Null) => continue,
                Some(v) => {
                    self.used.push(name.to_string());
                    return v.as_u64().map(Some).ok_or_else(|| ModelError::BadField {
                        path: self.path.to_path_buf(),
                        field: name.to_string(),
                        why: format!("is {v}, expected a non-negative integer"),
                    });
                }
            }
        }
        Ok(None)
    }

    /// [`Fields::uint`], required and non-zero.
    pub fn req(&mut self, names: &[&str]) -> Result<u64, ModelError> {
        match self.uint(names)? {
            Some(0) => Err(ModelError::BadField {
                path: self.path.to_path_buf(),
                field: names[0].into(),
                why: "is 0".into(),
            }),
            Some(v) => Ok(v),
            None => Err(ModelError::MissingField {
                path: self.path.to_path_buf(),
                field: names[0].into(),
            }),
        }
    }

    pub fn boolean(&mut self, name: &str) -> Option<bool> {
        let v = self.map.get(name)?.as_bool()?;
        self.used.push(name.to_string());
        Some(v)
    }

    /// HF `layer_types`, as which layers are of `kind`.
    pub fn layer_types(&self, kind: &str) -> Option<Vec<bool>> {
        let types = self.map.get("layer_types")?.as_array()?;
        Some(types.iter().map(|t| t.as_str() == Some(kind)).collect())
    }

    /// A field that must be there but is missing.
    pub fn missing(&self, field: &str) -> ModelError {
        ModelError::MissingField {
            path: self.path.into(),
            field: field.into(),
        }
    }

    /// A field whose value is wrong, and why.
    pub fn bad(&self, field: &str, why: String) -> ModelError {
        ModelError::BadField {
            path: self.path.into(),
            field: field.into(),
            why,
        }
    }
}
