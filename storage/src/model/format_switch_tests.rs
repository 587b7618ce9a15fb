//! The format switch on a real store: who it waits for, who may decide,
//! and that a registration and a switch never both win.

use super::*;
use crate::error::StorageError;
use crate::model::nodes::{Registration, register};

fn db(dir: &tempfile::TempDir) -> Database {
    crate::open::open_kv(&crate::open::KvConfig::for_tests(dir.path())).unwrap()
}

fn node(name: &str, max: u32) -> Registration {
    Registration {
        name: name.into(),
        mesh_addr: "127.0.0.1:0".into(),
        build: format!("test-{max}"),
        formats: FormatRange { min: 1, max },
    }
}

async fn store_at(db: &Database, format: u32) {
    db.run("t", move |txn| async move { cluster::mark_store_format(&txn, format) })
        .await
        .unwrap();
}

async fn store(db: &Database) -> Option<u32> {
    db.read("t", |txn| async move { cluster::store_format(&txn).await })
        .await
        .unwrap()
}

#[tokio::test]
async fn the_switch_waits_for_every_registered_node_then_flips_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir);
    store_at(&db, 3).await;
    let a = register(&db, &node("a", 4)).await.unwrap();
    register(&db, &node("b", 3)).await.unwrap();
    let four = FormatRange::BUILD;
    match try_switch(&db, "a", a, four).await.unwrap() {
        SwitchOutcome::Waiting { store, holdouts } => {
            assert_eq!(store, 3);
            let names: Vec<_> = holdouts.iter().map(|h| h.name.as_str()).collect();
            assert_eq!(names, ["b"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store(&db).await, Some(3));
    // b restarts on the new build: its record now says 4.
    register(&db, &node("b", 4)).await.unwrap();
    assert_eq!(
        try_switch(&db, "a", a, four).await.unwrap(),
        SwitchOutcome::Switched { from: 3, to: 4 }
    );
    assert_eq!(store(&db).await, Some(4));
    assert_eq!(
        try_switch(&db, "a", a, four).await.unwrap(),
        SwitchOutcome::AlreadyAt { format: 4 }
    );
    // Now a node of the old format cannot join.
    match register(&db, &node("c", 3)).await {
        Err(StorageError::FormatTooNew { store: 4, known: 3, .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn old_records_forgotten_nodes_and_stale_incarnations() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir);
    store_at(&db, 3).await;
    // A record of a build before the field counts as formats 1..=3.
    let old = crate::model::nodes::register_start(&db, "old", "x").await.unwrap();
    db.run("t", |txn| async move {
        let mut r: NodeRecord = crate::model::get_record(&txn, &crate::keyspace::node("old"), "node")
            .await?
            .unwrap();
        r.formats = None;
        r.build = None;
        crate::model::put_record(&txn, &crate::keyspace::node("old"), &r)
    })
    .await
    .unwrap();
    let a = register(&db, &node("a", 4)).await.unwrap();
    assert!(matches!(
        try_switch(&db, "a", a, FormatRange::BUILD).await.unwrap(),
        SwitchOutcome::Waiting { .. }
    ));
    // A superseded incarnation of a does not decide, even when it could.
    let a2 = register(&db, &node("a", 4)).await.unwrap();
    assert_eq!(
        crate::model::nodes::forget(&db, "old", 0)
            .await
            .unwrap()
            .map(|f| f.record.generation),
        Ok(old)
    );
    assert_eq!(
        try_switch(&db, "a", a, FormatRange::BUILD).await.unwrap(),
        SwitchOutcome::Superseded
    );
    assert_eq!(
        try_switch(&db, "a", a2, FormatRange::BUILD).await.unwrap(),
        SwitchOutcome::Switched { from: 3, to: 4 }
    );
}

#[tokio::test]
async fn a_pinned_node_never_switches() {
    let dir = tempfile::tempdir().unwrap();
    let db = db(&dir);
    store_at(&db, 3).await;
    let pinned = FormatRange::pinned(Some(3)).unwrap();
    let a = register(
        &db,
        &Registration {
            formats: pinned,
            ..node("a", 3)
        },
    )
    .await
    .unwrap();
    assert_eq!(
        try_switch(&db, "a", a, pinned).await.unwrap(),
        SwitchOutcome::AlreadyAt { format: 3 }
    );
    assert_eq!(FormatRange::pinned(Some(2)), Err(BadPin(2)));
    assert_eq!(
        FormatRange::pinned(Some(STORE_FORMAT + 1)),
        Err(BadPin(STORE_FORMAT + 1))
    );
}

/// A registration of an old node and a switch racing: whichever commits
/// first, the store never ends up above a registered node's formats.
#[tokio::test]
async fn a_registration_and_a_switch_never_both_win() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let db = db(&dir);
        store_at(&db, 3).await;
        let a = register(&db, &node("a", 4)).await.unwrap();
        let (db1, db2) = (db.clone(), db.clone());
        let switch = tokio::spawn(async move { try_switch(&db1, "a", a, FormatRange::BUILD).await });
        let join = tokio::spawn(async move { register(&db2, &node(&format!("old{round}"), 3)).await });
        let (switch, join) = (switch.await.unwrap().unwrap(), join.await.unwrap());
        match (&switch, &join) {
            (SwitchOutcome::Switched { .. }, Err(StorageError::FormatTooNew { .. })) => {}
            (SwitchOutcome::Waiting { .. }, Ok(_)) => {}
            other => panic!("round {round}: {other:?}"),
        }
    }
}
