//! The typed words (event kinds, meta keys, ledger accounts) read every recording in
//! tests/fixtures and write back the very strings it holds.

use std::path::{Path, PathBuf};

use gpulse_diagnose::AccountKind;
use gpulse_model::{EventKind, MetaKey};

use super::support::fixture;

/// Every recording under `dir`, sorted.
fn recordings(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(recordings(&path));
        } else if path.extension().is_some_and(|e| e == "db") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// A column of strings as the file stores it.
fn strings(path: &Path, sql: &str) -> Vec<String> {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let conn = rusqlite::Connection::open_with_flags(path, flags).unwrap();
    let mut stmt = conn.prepare(sql).unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

#[test]
fn every_fixtures_words_read_back_as_they_are_stored() {
    let all = recordings(&fixture(""));
    assert!(all.len() >= 40, "{all:?}");
    for path in &all {
        let shown = path.display();
        let rec = gpulse_record::read(path).unwrap_or_else(|e| panic!("{shown}: {e}"));
        // Event kinds: each read as the enum, written back as the string stored, in JSON too.
        let stored = strings(path, "SELECT kind FROM events ORDER BY t_ms, rowid");
        let read: Vec<&str> = rec.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(read, stored, "{shown}");
        for (e, kind) in rec.events.iter().zip(&stored) {
            assert!(!matches!(e.kind, EventKind::Other(_)), "{shown}: {kind} is a known kind");
            assert_eq!(serde_json::to_value(&e.kind).unwrap(), serde_json::json!(kind), "{shown}");
            assert_eq!(serde_json::to_value(e).unwrap()["kind"], serde_json::json!(kind), "{shown}");
        }
        // Meta keys: every one the fixtures hold is a known key.
        for key in strings(path, "SELECT key FROM meta") {
            assert_eq!(MetaKey::parse(&key).map(MetaKey::as_str), Some(key.as_str()), "{shown}");
        }
        // Ledger accounts: each one's name reads back as itself, as JSON shows it.
        let (_, ledger) = gpulse_diagnose::diagnose_with_ledger(&gpulse_diagnose::Run::from_recording(&rec));
        let json = serde_json::to_value(&ledger).unwrap();
        for (a, j) in ledger.accounts.iter().zip(json["accounts"].as_array().unwrap()) {
            let name = j["account"].as_str().unwrap();
            assert_eq!((name, AccountKind::parse(name)), (a.account.as_str(), Some(a.account)), "{shown}");
        }
    }
}

/// A kind a newer gpulse writes still loads, and is written back unchanged.
#[test]
fn an_unknown_event_kind_loads_and_writes_back() {
    let e: gpulse_model::Event =
        serde_json::from_value(serde_json::json!({"t_ms": 5, "kind": "checkpoint_saved", "payload": {}})).unwrap();
    assert_eq!(e.kind, EventKind::Other("checkpoint_saved".into()));
    assert_eq!(serde_json::to_value(&e).unwrap()["kind"], "checkpoint_saved");
}
