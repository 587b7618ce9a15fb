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

/// The example cluster files of attach mode parse and validate.
#[test]
fn example_cluster_files_load() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/attach");
    for name in ["systemd.toml", "up.toml"] {
        let c = meshmail_soak::attached::ClusterFile::load(&dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(c.node.len(), 3, "{name}");
    }
    let bad = "[[node]]\nname = \"a\"\nhttp = \"nowhere\"\nsmtp = \"127.0.0.1:1\"\nsubmission = \"127.0.0.1:2\"\nimap = \"127.0.0.1:3\"\n";
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), bad).unwrap();
    let e = meshmail_soak::attached::ClusterFile::load(f.path()).unwrap_err();
    assert!(e.to_string().contains("not IP:PORT"), "{e}");
}
