//! The database file: where it lives, its mode and its schema version.

use crate::util::*;
use cairn_rewind::{Threads, ThreadsOptions, SCHEMA_VERSION};
use cairn_store::ErrorKind;

#[test]
fn the_database_lives_in_the_store_in_wal_mode_with_its_schema_version() {
    let env = env();
    assert_eq!(
        env.threads.path(),
        env.dir.path().join("store").join("threads.db")
    );
    let conn = rusqlite::Connection::open(env.threads.path()).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("mode");
    assert_eq!(mode, "wal");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn opening_twice_keeps_the_schema_and_the_data() {
    let env = env();
    let t = env.thread("chat");
    drop(env.reopen(ThreadsOptions::default()));
    let again = env.reopen(ThreadsOptions::default());
    assert_eq!(again.thread(&t).expect("thread").id, t);
}

#[test]
fn a_database_of_a_newer_schema_is_refused_as_unsupported() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("threads.db");
    drop(Threads::open(&path, ThreadsOptions::default()).expect("create"));
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .expect("bump");
    drop(conn);
    let r = Threads::open(&path, ThreadsOptions::default());
    assert_eq!(kind(r), ErrorKind::Unsupported);
}

/// Makes the database what an older build wrote (`sql`, which sets `user_version`), opens it
/// again, and returns that handle with the schema version the file has then.
fn as_older_build(env: &Env, sql: &str) -> (Threads, i64) {
    let path = env.threads.path().to_path_buf();
    let conn = rusqlite::Connection::open(&path).expect("open");
    conn.execute_batch(sql)
        .expect("make it what an older build wrote");
    drop(conn);
    let again = env.reopen(ThreadsOptions::default());
    let conn = rusqlite::Connection::open(&path).expect("open");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    (again, version)
}

#[test]
fn a_database_of_schema_version_1_is_upgraded_in_place_with_its_data() {
    let env = env();
    let t = env.thread("chat");
    let (again, version) = as_older_build(&env, "PRAGMA user_version = 1");
    assert_eq!(again.thread(&t).expect("thread").id, t);
    assert_eq!((version, SCHEMA_VERSION), (4, 4));
}

// issue 54: version 3 adds the table of thread names.
#[test]
fn a_database_of_schema_version_2_gains_the_names_table_and_keeps_its_threads() {
    let env = env();
    let t = two_turns(&env, "claude-old");
    let (again, version) = as_older_build(&env, "DROP TABLE thread_names; PRAGMA user_version = 2");
    assert_eq!(again.thread(&t.thread).expect("thread").id, t.thread);
    assert_eq!(again.active_branch(&t.thread).expect("branch").len(), 4);
    assert_eq!((version, SCHEMA_VERSION), (4, 4));
    // The names work on the upgraded database.
    let opts = cairn_rewind::RewindOptions {
        continuation: Some(cairn_rewind::Continuation {
            data: serde_json::json!({"session": "new"}),
            names: vec!["claude-new".into()],
        }),
        ..Default::default()
    };
    again.rewind(&t.thread, &t.a1, &opts).expect("rewind");
    assert_eq!(
        again.resolve(&"claude-new".into()).expect("resolve"),
        t.thread
    );
}

// issue 59: version 4 adds the inbox of queued prompts.
#[test]
fn a_database_of_schema_version_3_gains_the_inbox_and_keeps_its_threads() {
    let env = env();
    let t = two_turns(&env, "chat");
    let (again, version) = as_older_build(&env, "DROP TABLE inbox; PRAGMA user_version = 3");
    assert_eq!(again.active_branch(&t.thread).expect("branch").len(), 4);
    assert_eq!((version, SCHEMA_VERSION), (4, 4));
    let queued = again
        .enqueue(&t.thread, "k-1", cairn_rewind::NewEntry::user("queued"))
        .expect("the inbox works on the upgraded database");
    assert_eq!(queued.state, cairn_rewind::PromptState::Queued);
}

#[test]
fn a_file_that_is_not_a_database_is_refused_as_corrupt() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("threads.db");
    std::fs::write(&path, vec![7u8; 4096]).expect("write junk");
    let r = Threads::open(&path, ThreadsOptions::default());
    assert_eq!(kind(r), ErrorKind::Corrupt);
}

#[test]
fn errors_say_what_to_do_and_carry_their_kind() {
    let env = env();
    let e = env.threads.thread(&"missing".into()).expect_err("missing");
    assert_eq!(cairn_store::Classify::kind(&e), ErrorKind::NotFound);
    assert!(
        e.to_string().contains("create it with create_thread"),
        "{e}"
    );
    assert!(e.is_not_found());
}
