//! A rewind that carries an agent's conversation half (issue 54): its continuation's data comes
//! back in the report and the record, and its names find the thread from then on, also when a
//! crash cut the rewind between the files and the conversation and recovery finished it.

use crate::crash::crash;
use crate::util::*;
use cairn_rewind::{Continuation, ForkOptions, RewindOptions, ThreadId, ThreadsOptions};
use cairn_store::ErrorKind;
use std::sync::Arc;

/// A continuation as the Claude Code side makes one: the new session's name.
fn continuation(session: &str) -> Continuation {
    Continuation {
        data: serde_json::json!({
            "agent": "claude-code",
            "resume_session_at": "uuid-of-turn-1",
            "new_session_id": session,
        }),
        names: vec![ThreadId::from(format!("claude-{session}"))],
    }
}

/// Rewind options with files into the env's workspace and `k`.
fn carrying(env: &Env, k: &Continuation) -> RewindOptions {
    RewindOptions {
        continuation: Some(k.clone()),
        ..with_files(&env.ws)
    }
}

/// Rewind options without files, giving the name `claude-<session>`.
fn naming(session: &str) -> RewindOptions {
    RewindOptions {
        continuation: Some(continuation(session)),
        ..Default::default()
    }
}

// issue 54
#[test]
fn a_rewind_with_a_continuation_records_its_names_and_reports_its_data() {
    let env = env();
    let t = two_turns(&env, "claude-old");
    let k = continuation("new");
    let opts = RewindOptions {
        key: Some("undo".into()),
        ..carrying(&env, &k)
    };
    let r = env.threads.rewind(&t.thread, &t.a1, &opts).expect("rewind");
    assert_eq!(r.continuation.as_ref(), Some(&k.data));
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    let name = ThreadId::from("claude-new");
    assert_eq!(env.threads.resolve(&name).expect("by its name"), t.thread);
    assert_eq!(env.threads.resolve(&t.thread).expect("by its id"), t.thread);
    assert_eq!(env.threads.names(&t.thread).expect("names"), vec![name]);
    assert_eq!(
        kind(env.threads.resolve(&"claude-nobody".into())),
        ErrorKind::NotFound
    );
    let records = env.threads.rewinds(&t.thread).expect("records");
    assert_eq!(records[0].continuation.as_ref(), Some(&k.data));
    // The key repeated gives the first report back, continuation included.
    let again = env.threads.rewind(&t.thread, &t.a1, &opts).expect("again");
    assert_eq!(again, r);
    // Another rewind may give the thread a name it has already.
    let r2 = env
        .threads
        .rewind(&t.thread, &t.u1.entry.id, &carrying(&env, &k))
        .expect("a name the thread has");
    assert_eq!(r2.continuation.as_ref(), Some(&k.data));
    assert_eq!(env.threads.names(&t.thread).expect("names").len(), 1);
    // Another handle sees the name.
    let other = env.reopen(ThreadsOptions::default());
    assert_eq!(
        other.resolve(&"claude-new".into()).expect("resolve"),
        t.thread
    );
}

/// Crashes a rewind carrying `k` after its files were restored, before its conversation
/// switch, and checks that nothing of the conversation half was done.
fn crash_after_files(env: &Env, t: &Turns, k: &Continuation) {
    env.ws.hooks.lock().panic_after_apply = true;
    crash(|| env.threads.rewind(&t.thread, &t.a1, &carrying(env, k)));
    env.ws.hooks.lock().panic_after_apply = false;
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v2"));
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    assert_eq!(
        kind(env.threads.resolve(&k.names[0])),
        ErrorKind::NotFound,
        "the name is not given before the rewind completes"
    );
}

// issue 54
#[test]
fn a_crash_between_the_files_and_the_conversation_switch_gives_the_names_on_reopen() {
    let env = env();
    let t = two_turns(&env, "claude-old");
    let k = continuation("after-crash");
    crash_after_files(&env, &t, &k);
    let Env { dir, threads, ws } = env;
    drop(threads);
    let reopened = open_in_store(
        dir.path().join("store"),
        ThreadsOptions {
            workspaces: vec![ws.clone() as Arc<dyn cairn_rewind::Files>],
            ..Default::default()
        },
    )
    .expect("reopen");
    let records = reopened.rewinds(&t.thread).expect("records");
    assert_eq!(records[0].state, "completed");
    assert_eq!(records[0].continuation.as_ref(), Some(&k.data));
    assert_eq!(
        reopened.resolve(&k.names[0]).expect("the name resolves"),
        t.thread
    );
    assert_eq!(
        active_ids(&reopened, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
    assert_eq!(ws.applies(), 1, "the files were not restored twice");
}

// issue 54
#[test]
fn recovery_of_a_rewind_cut_between_its_halves_gives_its_names_and_reports_its_data() {
    let env = env();
    let t = two_turns(&env, "claude-old");
    let k = continuation("recovered");
    crash_after_files(&env, &t, &k);
    let handle = env.reopen(ThreadsOptions {
        recover: false,
        ..Default::default()
    });
    let ws: Arc<dyn cairn_rewind::Files> = env.ws.clone();
    let done = handle.recover(&[ws]).expect("recover");
    assert_eq!(done.completed.len(), 1);
    let report = &done.completed[0];
    assert!(report.recovered);
    assert_eq!(report.continuation.as_ref(), Some(&k.data));
    assert_eq!(handle.resolve(&k.names[0]).expect("resolves"), t.thread);
    assert_eq!(handle.names(&t.thread).expect("names"), k.names);
    assert_eq!(
        active_ids(&handle, &t.thread),
        vec![t.u1.entry.id.clone(), t.a1.clone()]
    );
}

// issue 54
#[test]
fn a_dry_run_with_a_continuation_reports_its_data_and_records_no_name() {
    let env = env();
    let t = two_turns(&env, "claude-old");
    let k = continuation("dry");
    let r = env
        .threads
        .rewind(
            &t.thread,
            &t.a1,
            &RewindOptions {
                dry_run: true,
                ..carrying(&env, &k)
            },
        )
        .expect("dry run");
    assert!(r.dry_run);
    assert_eq!(r.continuation.as_ref(), Some(&k.data));
    assert_eq!(kind(env.threads.resolve(&k.names[0])), ErrorKind::NotFound);
    assert!(env.threads.names(&t.thread).expect("names").is_empty());
    assert!(env.threads.rewinds(&t.thread).expect("records").is_empty());
    assert_eq!(env.ws.applies(), 0);
}

// issue 54
#[test]
fn a_name_that_is_another_threads_id_or_name_is_refused_before_anything_changes() {
    let env = env();
    let t = two_turns(&env, "claude-old");
    let other = two_turns(&env, "claude-other");
    env.threads
        .rewind(&other.thread, &other.a1, &naming("taken"))
        .expect("the other thread takes the name claude-taken");
    let applies = env.ws.applies();
    let refused = |name: &str, what: &str| {
        let k = Continuation {
            data: serde_json::json!({}),
            names: vec![name.into()],
        };
        let e = env
            .threads
            .rewind(&t.thread, &t.a1, &carrying(&env, &k))
            .expect_err(what);
        assert_eq!(
            cairn_store::Classify::kind(&e),
            ErrorKind::Validation,
            "{e}"
        );
        let message = e.to_string();
        assert!(message.contains(name), "{message}");
        assert!(message.contains(other.thread.as_str()), "{message}");
        // The other forms of a rewind check it too.
        let e = env
            .threads
            .restore_before(&t.thread, &t.u2.entry.id, &carrying(&env, &k))
            .expect_err(what);
        assert!(e.is_validation(), "{e}");
    };
    refused("claude-other", "another thread's id");
    refused("claude-taken", "another thread's name");
    // Nothing changed: the files, the conversation, the records, the names.
    assert_eq!(env.ws.applies(), applies);
    assert_eq!(env.ws.read("a.txt").as_deref(), Some("v3"));
    assert_eq!(active_ids(&env.threads, &t.thread).len(), 4);
    assert!(env.threads.rewinds(&t.thread).expect("records").is_empty());
    assert!(env.threads.names(&t.thread).expect("names").is_empty());
    assert_eq!(
        env.threads.resolve(&"claude-taken".into()).expect("still"),
        other.thread
    );
    // A malformed name is refused as such.
    let bad = Continuation {
        data: serde_json::json!({}),
        names: vec!["no spaces".into()],
    };
    assert_eq!(
        kind(env.threads.rewind(&t.thread, &t.a1, &carrying(&env, &bad))),
        ErrorKind::InvalidArgument
    );
}

// issue 54
#[test]
fn a_name_cannot_become_the_id_of_a_new_thread() {
    let env = env();
    let t = two_turns(&env, "claude-old");
    env.threads
        .rewind(&t.thread, &t.a1, &naming("forked"))
        .expect("rewind");
    let e = env
        .threads
        .create_thread(Some("claude-forked".into()), serde_json::json!({}))
        .expect_err("a name is not a free id");
    assert!(e.is_validation(), "{e}");
    assert!(e.to_string().contains(t.thread.as_str()), "{e}");
    let fork = env.threads.fork(
        &t.thread,
        &t.a1,
        &ForkOptions {
            new_thread_id: Some("claude-forked".into()),
            ..Default::default()
        },
    );
    assert_eq!(kind(fork), ErrorKind::Validation);
}
