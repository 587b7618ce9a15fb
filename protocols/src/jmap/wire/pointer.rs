//! Result references (RFC 8620 §3.7): a JSON Pointer (RFC 6901) into an
//! earlier method's response, extended with `*`, which maps the rest of the
//! path over every item of an array and flattens one level of arrays.

use serde_json::Value;

/// Evaluates `path` on `value`. `None` when the path does not exist.
pub fn evaluate(value: &Value, path: &str) -> Option<Value> {
    if path.is_empty() {
        return Some(value.clone());
    }
    let rest = path.strip_prefix('/')?;
    let tokens: Vec<String> = rest.split('/').map(unescape).collect();
    walk(value, &tokens)
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn walk(value: &Value, tokens: &[String]) -> Option<Value> {
    let Some((token, rest)) = tokens.split_first() else {
        return Some(value.clone());
    };
    match value {
        Value::Object(map) => walk(map.get(token)?, rest),
        Value::Array(items) if token == "*" => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match walk(item, rest)? {
                    Value::Array(inner) => out.extend(inner),
                    other => out.push(other),
                }
            }
            Some(Value::Array(out))
        }
        Value::Array(items) => {
            // RFC 6901: no leading zeros, no signs.
            if token.is_empty() || (token.len() > 1 && token.starts_with('0')) {
                return None;
            }
            let index: usize = token.parse().ok()?;
            walk(items.get(index)?, rest)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_with_wildcards() {
        let v = json!({"ids": ["a", "b"], "list": [{"threadId": "t1", "emailIds": ["x"]}, {"threadId": "t2", "emailIds": ["y", "z"]}], "a/b": {"~": 1}});
        assert_eq!(evaluate(&v, "/ids"), Some(json!(["a", "b"])));
        assert_eq!(evaluate(&v, "/ids/1"), Some(json!("b")));
        assert_eq!(evaluate(&v, "/list/*/threadId"), Some(json!(["t1", "t2"])));
        assert_eq!(evaluate(&v, "/list/*/emailIds"), Some(json!(["x", "y", "z"])));
        assert_eq!(evaluate(&v, "/a~1b/~0"), Some(json!(1)));
        assert_eq!(evaluate(&v, "/nope"), None);
        assert_eq!(evaluate(&v, "/ids/01"), None);
        assert_eq!(evaluate(&v, "ids"), None);
    }
}
