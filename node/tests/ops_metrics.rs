//! The operator artifacts name only metrics the code exports: every
//! `meshmail_*` name in the Grafana dashboard (`ops/grafana/meshmail.json`)
//! and the Prometheus rules (`ops/prometheus/meshmail-rules.yml`) is
//! registered by a `counter!`/`gauge!`/`histogram!` call in the crates (a
//! histogram's `_bucket`/`_sum`/`_count` series included), and the
//! dashboard has the variables and units an operator needs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Metric name → kind ("counter", "gauge", "histogram"), from the macro
/// calls of the server's crates (not tests, chaos or soak: those do not run
/// in a node).
fn exported() -> BTreeMap<String, &'static str> {
    let mut files = Vec::new();
    for krate in ["storage", "actors", "mesh", "protocols", "node"] {
        rust_files(&root().join(krate).join("src"), &mut files);
    }
    let mut names = BTreeMap::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for kind in ["counter", "gauge", "histogram"] {
            let mac = format!("{kind}!(");
            for (at, _) in text.match_indices(&mac) {
                let rest = text[at + mac.len()..].trim_start();
                if let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next())
                    && name.starts_with("meshmail_")
                {
                    names.insert(name.to_string(), kind);
                }
            }
        }
    }
    names
}

/// Every `meshmail_[a-z0-9_]+` token of a text (recording rules, spelt
/// `meshmail:…`, are not metric names and do not match).
fn named_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices("meshmail_") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let end = text[at..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .map_or(text.len(), |n| at + n);
        out.insert(text[at..end].to_string());
    }
    out
}

/// The names in `used` that no code exports.
fn unknown(used: &BTreeSet<String>, exported: &BTreeMap<String, &str>) -> Vec<String> {
    used.iter()
        .filter(|n| {
            if exported.contains_key(n.as_str()) {
                return false;
            }
            let histogram_series = ["_bucket", "_sum", "_count"]
                .iter()
                .filter_map(|s| n.strip_suffix(s))
                .any(|base| exported.get(base) == Some(&"histogram"));
            !histogram_series
        })
        .cloned()
        .collect()
}

#[test]
fn the_scanner_finds_what_the_code_exports() {
    let e = exported();
    assert!(e.len() > 100, "only {} metrics found: is the scanner broken?", e.len());
    assert_eq!(e.get("meshmail_kv_commit_seconds"), Some(&"histogram"));
    assert_eq!(e.get("meshmail_lease_changes_total"), Some(&"counter"));
    assert_eq!(e.get("meshmail_mesh_members_alive"), Some(&"gauge"));
    let used = named_in(r#"rate(meshmail_kv_commit_seconds_bucket[5m]) meshmail:x:p99 meshmail_no_such_thing_total"#);
    assert_eq!(unknown(&used, &e), vec!["meshmail_no_such_thing_total".to_string()]);
    // A counter has no _bucket series.
    let used = named_in("meshmail_lease_changes_total_bucket");
    assert_eq!(unknown(&used, &e).len(), 1);
}

#[test]
fn prometheus_rules_name_only_exported_metrics() {
    let text = std::fs::read_to_string(root().join("ops/prometheus/meshmail-rules.yml")).unwrap();
    let used = named_in(&text);
    assert!(used.len() >= 10, "{used:?}");
    let bad = unknown(&used, &exported());
    assert!(bad.is_empty(), "the rules name metrics no code exports: {bad:?}");
}

#[test]
fn grafana_dashboard_covers_the_stages_with_variables_units_and_real_metrics() {
    let text = std::fs::read_to_string(root().join("ops/grafana/meshmail.json")).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");

    let vars: BTreeMap<&str, &str> = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v["type"].as_str().unwrap()))
        .collect();
    assert_eq!(vars.get("datasource"), Some(&"datasource"), "{vars:?}");
    assert_eq!(vars.get("job"), Some(&"query"), "{vars:?}");
    assert_eq!(vars.get("instance"), Some(&"query"), "{vars:?}");

    let panels = dash["panels"].as_array().unwrap();
    let rows: Vec<String> = panels
        .iter()
        .filter(|p| p["type"] == "row")
        .map(|p| p["title"].as_str().unwrap().to_lowercase())
        .collect();
    for stage in ["ingest", "imap", "mesh", "leases", "queue", "recovery"] {
        assert!(rows.iter().any(|r| r.contains(stage)), "no {stage} section in {rows:?}");
    }
    let mut used = BTreeSet::new();
    let mut graphs = 0;
    for p in panels.iter().filter(|p| p["type"] != "row") {
        graphs += 1;
        let title = p["title"].as_str().unwrap();
        let unit = p["fieldConfig"]["defaults"]["unit"].as_str().unwrap_or("");
        assert!(!unit.is_empty(), "panel {title:?} has no unit");
        assert_eq!(p["datasource"]["uid"], "${datasource}", "panel {title:?}");
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for t in targets {
            let expr = t["expr"].as_str().unwrap();
            assert!(
                expr.contains(r#"job=~"$job""#) && expr.contains(r#"instance=~"$instance""#),
                "panel {title:?} ignores the job/instance variables: {expr}"
            );
            used.extend(named_in(expr));
        }
    }
    assert!(graphs >= 20, "{graphs} panels");
    let bad = unknown(&used, &exported());
    assert!(bad.is_empty(), "the dashboard names metrics no code exports: {bad:?}");
}
