//! Every scenario shipped in chaos/scenarios/ parses and validates, and
//! meets its own minimums on paper (a typo there would only show after a
//! 30-minute run).

use meshmail_chaos::scenario::Scenario;

#[test]
fn shipped_scenarios_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            Scenario::load(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            seen += 1;
        }
    }
    assert!(
        seen >= 4,
        "expected ci, failover, soak-30min and single-node; found {seen}"
    );
}
