//! One object of a /set create, an Email/import or an Email/copy, parsed
//! on its own (RFC 8620 §5.3): a bad object is that object's
//! `invalidProperties` SetError, naming the property at fault, and the
//! other objects of the call still run. Parsing the whole create map in
//! one go would turn one bad object into an `invalidArguments` for the
//! call.
//!
//! Every such object type implements [`Properties`] and appears in its
//! method's arguments as [`Object<T>`]; the method takes `.0` and turns an
//! error into its `notCreated` entry.

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::Value;
use thiserror::Error;

use super::SetError;

/// An object a client sends whole (a create, an import).
pub trait Properties: DeserializeOwned {
    /// The properties the object cannot do without. Checked by name
    /// before parsing: serde reports a missing field without a path, and
    /// the SetError must name the property.
    const REQUIRED: &'static [&'static str];
}

/// Why one object was refused; always an `invalidProperties` SetError.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PropertyError {
    #[error("not a JSON object")]
    NotAnObject,
    #[error("{0} is required")]
    Missing(&'static str),
    #[error("{property}: {reason}")]
    Invalid { property: String, reason: String },
    /// An error serde placed on the object itself (an unknown property
    /// under `deny_unknown_fields`); its text names the property.
    #[error("{0}")]
    Malformed(String),
}

impl PropertyError {
    /// The properties at fault, as the SetError lists them.
    pub fn properties(&self) -> Vec<String> {
        match self {
            PropertyError::Missing(p) => vec![(*p).to_string()],
            PropertyError::Invalid { property, .. } => vec![property.clone()],
            PropertyError::NotAnObject | PropertyError::Malformed(_) => Vec::new(),
        }
    }
}

impl From<PropertyError> for SetError {
    fn from(e: PropertyError) -> SetError {
        SetError {
            kind: "invalidProperties",
            description: Some(e.to_string()),
            properties: Some(e.properties()),
            not_found: None,
            existing_id: None,
        }
    }
}

/// Parses one object, naming the property at fault if it fails.
pub fn parse_object<T: Properties>(value: Value) -> Result<T, PropertyError> {
    let Value::Object(map) = value else {
        return Err(PropertyError::NotAnObject);
    };
    if let Some(missing) = T::REQUIRED.iter().find(|p| !map.contains_key(**p)) {
        return Err(PropertyError::Missing(missing));
    }
    serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
        // The first segment of the path is the object's own property:
        // `mailboxIds.m1` is a bad `mailboxIds`.
        let property = e.path().iter().next().and_then(|s| match s {
            serde_path_to_error::Segment::Map { key } => Some(key.clone()),
            _ => None,
        });
        let reason = e.inner().to_string();
        match property {
            Some(property) => PropertyError::Invalid { property, reason },
            None => PropertyError::Malformed(reason),
        }
    })
}

/// One object in a method's arguments: parsed, or the reason it is not.
/// Deserializing never fails, so the arguments as a whole still parse.
#[derive(Debug)]
pub struct Object<T>(pub Result<T, PropertyError>);

impl<'de, T: Properties> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(Object(parse_object(value)))
    }
}

/// TESTS: `minimal` (the required properties, nothing else) parses, and
/// without any one of them the object is refused naming that one — so
/// `REQUIRED` lists every property the type cannot do without.
#[cfg(test)]
pub fn assert_required<T: Properties>(minimal: Value) {
    let Value::Object(map) = minimal else {
        panic!("not an object")
    };
    let keys: std::collections::BTreeSet<&str> = map.keys().map(String::as_str).collect();
    let required: std::collections::BTreeSet<&str> = T::REQUIRED.iter().copied().collect();
    assert_eq!(keys, required, "the minimal object has exactly the required properties");
    assert!(
        parse_object::<T>(Value::Object(map.clone())).is_ok(),
        "the minimal object parses"
    );
    for p in T::REQUIRED {
        let mut without = map.clone();
        without.remove(*p);
        assert_eq!(
            parse_object::<T>(Value::Object(without)).err(),
            Some(PropertyError::Missing(p))
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Sample {
        blob_id: String,
        #[serde(default)]
        keywords: BTreeMap<String, bool>,
    }

    impl Properties for Sample {
        const REQUIRED: &'static [&'static str] = &["blobId"];
    }

    fn err(v: Value) -> SetError {
        parse_object::<Sample>(v).unwrap_err().into()
    }

    #[test]
    fn each_fault_names_its_property() {
        let ok = parse_object::<Sample>(json!({"blobId": "b", "keywords": {"$seen": true}})).unwrap();
        assert_eq!((ok.blob_id.as_str(), ok.keywords.len()), ("b", 1));
        for (bad, property) in [
            (json!({}), "blobId"),
            (json!({"blobId": null}), "blobId"),
            (json!({"blobId": 5}), "blobId"),
            (json!({"blobId": "b", "keywords": ["$seen"]}), "keywords"),
            (json!({"blobId": "b", "keywords": {"$seen": "yes"}}), "keywords"),
        ] {
            let e = err(bad.clone());
            assert_eq!(e.kind, "invalidProperties", "{bad}");
            assert_eq!(e.properties, Some(vec![property.to_string()]), "{bad}");
        }
        let e = err(json!([1]));
        assert_eq!((e.kind, e.properties), ("invalidProperties", Some(vec![])));
        let e = err(json!({"blobId": "b", "nope": 1}));
        assert_eq!(e.kind, "invalidProperties");
        assert!(e.description.unwrap().contains("nope"));
    }

    #[test]
    fn a_bad_object_does_not_fail_the_map_it_is_in() {
        let map: BTreeMap<String, Object<Sample>> =
            serde_json::from_value(json!({"a": {"blobId": "x"}, "b": {"blobId": 1}, "c": 7})).unwrap();
        assert!(map["a"].0.is_ok());
        assert!(matches!(&map["b"].0, Err(PropertyError::Invalid { property, .. }) if property == "blobId"));
        assert_eq!(map["c"].0.as_ref().unwrap_err(), &PropertyError::NotAnObject);
    }
}
