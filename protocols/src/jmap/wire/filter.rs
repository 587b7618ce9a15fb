//! FilterOperator (RFC 8620 §5.5): `AND`, `OR` and `NOT` over a query's
//! own FilterCondition type, nested. Every /query takes it.

use serde::Deserialize;

use super::MethodError;

/// How deep operators may nest (a hostile filter stays bounded).
pub const FILTER_DEPTH_MAX: usize = 16;

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Filter<C> {
    Operator(FilterOperator<C>),
    Condition(Box<C>),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterOperator<C> {
    pub operator: String,
    pub conditions: Vec<Filter<C>>,
}

impl<C> Filter<C> {
    /// Whether the filter holds, `test` deciding each condition. Every
    /// condition is tested (no short cut), so one the server cannot
    /// evaluate is `unsupportedFilter` wherever it stands in the tree.
    pub fn matches(&self, test: &mut dyn FnMut(&C) -> Result<bool, MethodError>) -> Result<bool, MethodError> {
        self.matches_at(test, 0)
    }

    fn matches_at(
        &self,
        test: &mut dyn FnMut(&C) -> Result<bool, MethodError>,
        depth: usize,
    ) -> Result<bool, MethodError> {
        if depth > FILTER_DEPTH_MAX {
            return Err(MethodError::UnsupportedFilter(format!(
                "filters nest at most {FILTER_DEPTH_MAX} deep"
            )));
        }
        match self {
            Filter::Condition(c) => test(c),
            Filter::Operator(op) => {
                let mut results = Vec::with_capacity(op.conditions.len());
                for c in &op.conditions {
                    results.push(c.matches_at(test, depth + 1)?);
                }
                match op.operator.as_str() {
                    "AND" => Ok(results.iter().all(|x| *x)),
                    "OR" => Ok(results.iter().any(|x| *x)),
                    "NOT" => Ok(!results.iter().any(|x| *x)),
                    other => Err(MethodError::UnsupportedFilter(format!("operator {other}"))),
                }
            }
        }
    }

    /// Whether any condition of the tree satisfies `pred` (what a query
    /// must prepare for before it walks its candidates).
    pub fn any_condition(&self, pred: &dyn Fn(&C) -> bool) -> bool {
        match self {
            Filter::Condition(c) => pred(c),
            Filter::Operator(op) => op.conditions.iter().any(|c| c.any_condition(pred)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Cond {
        is: Option<bool>,
    }

    fn eval(v: serde_json::Value) -> Result<bool, MethodError> {
        let f: Filter<Cond> = serde_json::from_value(v).unwrap();
        f.matches(&mut |c| Ok(c.is.unwrap_or(true)))
    }

    #[test]
    fn operators_nest() {
        use serde_json::json;
        assert!(eval(json!({"is": true})).unwrap());
        assert!(eval(json!({"operator": "OR", "conditions": [{"is": false}, {"is": true}]})).unwrap());
        assert!(!eval(json!({"operator": "AND", "conditions": [{"is": false}, {"is": true}]})).unwrap());
        assert!(
            eval(json!({"operator": "NOT", "conditions": [
                {"operator": "AND", "conditions": [{"is": true}, {"is": false}]}
            ]}))
            .unwrap()
        );
        assert!(matches!(
            eval(json!({"operator": "XOR", "conditions": []})),
            Err(MethodError::UnsupportedFilter(_))
        ));
        let mut deep = json!({"is": true});
        for _ in 0..=FILTER_DEPTH_MAX {
            deep = json!({"operator": "AND", "conditions": [deep]});
        }
        assert!(matches!(eval(deep), Err(MethodError::UnsupportedFilter(_))));
    }
}
