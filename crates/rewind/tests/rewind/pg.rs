//! The thread database on PostgreSQL: what a server shared by several processes (or machines)
//! needs beyond the suite that runs on both engines. The tests that need a server use
//! `CAIRN_TEST_PG_URL` (`scripts/test` starts one and sets it); without it they print that
//! they were skipped. The bad-endpoint tests need no server.

use crate::util::*;
use cairn_rewind::{AppendOptions, NewEntry, RunOptions, Threads, ThreadsOptions};
use cairn_store::{Classify, ErrorKind};
use std::time::{Duration, Instant};

/// The test server, or `None` after saying that the test is skipped.
fn server(test: &str) -> Option<String> {
    let url = pg_url();
    if url.is_none() {
        eprintln!(
            "skipped {test}: CAIRN_TEST_PG_URL is not set (scripts/test starts a PostgreSQL server and sets it)"
        );
    }
    url
}

fn open(url: &str) -> Threads {
    Threads::open(url, ThreadsOptions::default()).expect("open the PostgreSQL database")
}

#[test]
fn two_first_opens_of_an_empty_database_make_one_schema_and_share_it() {
    let Some(admin) = server("two_first_opens") else {
        return;
    };
    let url = fresh_pg_url(&admin);
    let opened: Vec<Threads> = std::thread::scope(|s| {
        let a = s.spawn(|| open(&url));
        let b = s.spawn(|| open(&url));
        vec![a.join().expect("a"), b.join().expect("b")]
    });
    let t = opened[0]
        .create_thread(Some("chat".into()), serde_json::json!({"team": "a"}))
        .expect("create");
    let seen = opened[1].thread(&t.id).expect("the other handle sees it");
    assert_eq!(seen.metadata["team"], "a");
    // The path names the database by its URL, without the password.
    let shown = opened[0].path().to_string_lossy().into_owned();
    assert!(shown.starts_with("postgres://cairn:***@"), "{shown}");
}

#[test]
fn appends_from_two_connections_at_once_make_one_chain_and_lose_nothing() {
    let Some(admin) = server("appends_from_two_connections") else {
        return;
    };
    let url = fresh_pg_url(&admin);
    let a = open(&url);
    let b = open(&url);
    let t = a
        .create_thread(Some("chat".into()), serde_json::json!({}))
        .expect("create")
        .id;
    std::thread::scope(|s| {
        for (i, handle) in [&a, &b, &a, &b].into_iter().enumerate() {
            let t = t.clone();
            s.spawn(move || {
                for n in 0..10 {
                    handle
                        .append(
                            &t,
                            NewEntry::user(format!("writer {i} message {n}")),
                            &AppendOptions::default(),
                        )
                        .expect("append");
                }
            });
        }
    });
    // Every append saw the leaf the previous one left: one branch of 40, no entry beside it.
    let branch = b.active_branch(&t).expect("branch");
    assert_eq!(branch.len(), 40);
    for pair in branch.windows(2) {
        assert_eq!(pair[1].parent_id.as_ref(), Some(&pair[0].id));
    }
    assert_eq!(b.entries(&t, true).expect("all").len(), 40);
    assert_eq!(b.branches(&t).expect("branches").len(), 1);
}

#[test]
fn a_run_counts_on_every_connection_until_its_handle_is_gone_lease_or_not() {
    let Some(admin) = server("a_run_counts_on_every_connection") else {
        return;
    };
    let url = fresh_pg_url(&admin);
    let here = open(&url);
    let t = here
        .create_thread(Some("chat".into()), serde_json::json!({}))
        .expect("create")
        .id;
    let elsewhere = open(&url);
    let run = elsewhere
        .begin_run(
            &t,
            RunOptions {
                lease: Duration::from_secs(600),
                ..Default::default()
            },
        )
        .expect("begin a run");
    let runs = here.runs(&t).expect("runs");
    assert_eq!(runs.going.len(), 1);
    assert!(!runs.going[0].here, "the run is the other connection's");
    drop(run);
    drop(elsewhere);
    // Its session is gone: its run stops counting long before its lease would run out.
    assert!(here.runs(&t).expect("runs").going.is_empty());
}

#[test]
fn bad_credentials_are_denied_quickly_naming_the_url_without_the_password() {
    let Some(admin) = server("bad_credentials") else {
        return;
    };
    let (scheme, rest) = admin.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').expect("the URL has a user").1;
    let url = format!("{scheme}://cairn:wrong-s3cret@{host}");
    let started = Instant::now();
    let err = Threads::open(&url, ThreadsOptions::default()).expect_err("refused");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.kind(), ErrorKind::Denied, "{err}");
    let message = err.to_string();
    assert!(!message.contains("wrong-s3cret"), "{message}");
    assert!(
        message.contains(&format!("postgres://cairn:***@{host}")),
        "{message}"
    );
    assert!(message.contains("password"), "{message}");
}

#[test]
fn a_database_that_does_not_exist_is_not_found() {
    let Some(admin) = server("a_database_that_does_not_exist") else {
        return;
    };
    let base = admin.rsplit_once('/').expect("a database in the URL").0;
    let err = Threads::open(
        format!("{base}/no_such_database"),
        ThreadsOptions::default(),
    )
    .expect_err("no database");
    assert_eq!(err.kind(), ErrorKind::NotFound, "{err}");
}

#[test]
fn a_port_nobody_listens_on_fails_with_io_at_once_naming_the_url() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        l.local_addr().expect("its address").port()
    };
    let url = format!("postgres://cairn:s3cret@127.0.0.1:{port}/threads");
    let started = Instant::now();
    let err = Threads::open(&url, ThreadsOptions::default()).expect_err("nobody listens");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("postgres://cairn:***@127.0.0.1:{port}/threads")),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");
}

#[test]
fn a_server_that_never_answers_fails_in_under_ten_seconds() {
    // It accepts connections (the kernel completes them) and never says a word.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = silent.local_addr().expect("its address").port();
    let url = format!("postgresql://cairn@127.0.0.1:{port}/threads");
    let started = Instant::now();
    let err = Threads::open(&url, ThreadsOptions::default()).expect_err("no answer");
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    assert!(err.to_string().contains(&url), "{err}");
    drop(silent);
}

/// A thread database at `url` with a thread `id` of `appended` user messages, made what an
/// older build wrote (`sql`, which sets the version) and opened again: that handle, the thread,
/// its first entry, and the schema version the database has then.
fn as_older_build(
    url: &str,
    id: &str,
    appended: usize,
    sql: &str,
) -> (
    Threads,
    cairn_rewind::ThreadId,
    Option<cairn_rewind::EntryId>,
    i64,
) {
    let threads = open(url);
    let t = threads
        .create_thread(Some(id.into()), serde_json::json!({}))
        .expect("a thread");
    let mut first = None;
    for i in 0..appended {
        let a = threads
            .append(
                &t.id,
                NewEntry::user(format!("message {i}")),
                &AppendOptions::default(),
            )
            .expect("append");
        first.get_or_insert(a.entry.id);
    }
    drop(threads);
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    client
        .batch_execute(sql)
        .expect("make it what an older build wrote");
    let again = open(url);
    let version: i64 = client
        .query_one("SELECT version FROM cairn_schema", &[])
        .expect("version")
        .get(0);
    (again, t.id, first, version)
}

#[test]
fn a_database_of_schema_version_1_is_upgraded_in_place() {
    let Some(admin) = server("a_database_of_schema_version_1") else {
        return;
    };
    let url = fresh_pg_url(&admin);
    let (again, t, _, version) =
        as_older_build(&url, "chat", 0, "UPDATE cairn_schema SET version = 1");
    assert_eq!(again.thread(&t).expect("thread").id, t);
    assert_eq!(version, cairn_rewind::SCHEMA_VERSION);
}

// issue 54: version 3 adds the table of thread names.
#[test]
fn a_database_of_schema_version_2_gains_the_names_table_and_keeps_its_threads() {
    let Some(admin) = server("a_database_of_schema_version_2") else {
        return;
    };
    let url = fresh_pg_url(&admin);
    let (again, t, first, version) = as_older_build(
        &url,
        "claude-old",
        2,
        "DROP TABLE thread_names; UPDATE cairn_schema SET version = 2",
    );
    assert_eq!(again.active_branch(&t).expect("branch").len(), 2);
    assert_eq!((version, cairn_rewind::SCHEMA_VERSION), (4, 4));
    let opts = cairn_rewind::RewindOptions {
        continuation: Some(cairn_rewind::Continuation {
            data: serde_json::json!({"session": "new"}),
            names: vec!["claude-new".into()],
        }),
        ..Default::default()
    };
    let first = first.expect("a first entry");
    again.rewind(&t, &first, &opts).expect("rewind");
    assert_eq!(again.resolve(&"claude-new".into()).expect("resolve"), t);
    assert_eq!(again.names(&t).expect("names").len(), 1);
}

// issue 59: version 4 adds the inbox of queued prompts.
#[test]
fn a_database_of_schema_version_3_gains_the_inbox_and_keeps_its_threads() {
    let Some(admin) = server("a_database_of_schema_version_3") else {
        return;
    };
    let url = fresh_pg_url(&admin);
    let (again, t, _, version) = as_older_build(
        &url,
        "chat",
        1,
        "DROP TABLE inbox; UPDATE cairn_schema SET version = 3",
    );
    assert_eq!(again.active_branch(&t).expect("branch").len(), 1);
    assert_eq!((version, cairn_rewind::SCHEMA_VERSION), (4, 4));
    let queued = again
        .enqueue(&t, "k-1", NewEntry::user("queued"))
        .expect("the inbox works on the upgraded database");
    assert_eq!(queued.state, cairn_rewind::PromptState::Queued);
}

#[test]
fn a_database_of_a_newer_schema_is_refused_as_unsupported() {
    let Some(admin) = server("a_database_of_a_newer_schema") else {
        return;
    };
    let url = fresh_pg_url(&admin);
    drop(open(&url));
    let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    client
        .batch_execute("UPDATE cairn_schema SET version = 99")
        .expect("pretend a newer build wrote it");
    let err = Threads::open(&url, ThreadsOptions::default()).expect_err("newer schema");
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
}
