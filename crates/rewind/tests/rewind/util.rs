//! Fixtures: a database in a temporary store, fake workspaces, runs with checkpoints on, and a
//! short conversation whose files change between messages.
//!
//! With `CAIRN_TEST_THREADS=pg` (and `CAIRN_TEST_PG_URL` naming a PostgreSQL server whose user
//! may create databases, as `scripts/pg-test-server` starts), every store's thread database is
//! a fresh PostgreSQL database instead of `<store>/threads.db`: the same tests run against the
//! other engine. `scripts/test` runs the suite both ways.

use crate::fake::Fake;
use cairn_rewind::{
    AppendOptions, Appended, Checkpoints, EntryId, NewEntry, Run, RunOptions, ThreadId, Threads,
    ThreadsOptions,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// A temporary directory with a thread database and one fake workspace.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub threads: Threads,
    pub ws: Arc<Fake>,
}

impl Env {
    /// The database: `<store>/threads.db`, or its PostgreSQL URL.
    pub fn db(&self) -> PathBuf {
        db_location(&self.dir.path().join("store"))
    }

    /// Another handle on the same database.
    pub fn reopen(&self, options: ThreadsOptions) -> Threads {
        Threads::open(self.db(), options).expect("reopen the database")
    }

    /// A fake workspace at `<dir>/<rel>`.
    pub fn fake(&self, id: &str, rel: &str) -> Arc<Fake> {
        Arc::new(Fake::new(id, &self.dir.path().join(rel)))
    }

    /// A thread `id`.
    pub fn thread(&self, id: &str) -> ThreadId {
        self.threads
            .create_thread(Some(id.into()), serde_json::json!({}))
            .expect("create a thread")
            .id
    }

    /// A run of `thread` in the env's workspace, checkpoints on.
    pub fn run(&self, thread: &ThreadId) -> Run {
        run_in(&self.threads, thread, self.ws.clone())
    }
}

pub fn env() -> Env {
    env_with(ThreadsOptions::default())
}

pub fn env_with(options: ThreadsOptions) -> Env {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::create_dir_all(dir.path().join("store")).expect("store dir");
    let threads = open_in_store(dir.path().join("store"), options).expect("open");
    let ws = Arc::new(Fake::new("project", &dir.path().join("project")));
    Env { dir, threads, ws }
}

/// The PostgreSQL server the tests may use (`CAIRN_TEST_PG_URL`), if any.
pub fn pg_url() -> Option<String> {
    std::env::var("CAIRN_TEST_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// Whether every store's database is on PostgreSQL (`CAIRN_TEST_THREADS=pg`).
pub fn on_pg() -> bool {
    std::env::var("CAIRN_TEST_THREADS").is_ok_and(|v| v == "pg")
}

/// The URL of a new, empty thread database on the test server: a schema of its own in the
/// server's database (a schema costs a few kilobytes, a database several megabytes), chosen
/// by the URL's `options=-csearch_path=…`.
pub fn fresh_pg_url(admin_url: &str) -> String {
    let name = format!(
        "cairn_test_{}_{}",
        std::process::id(),
        NEXT_DB.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let mut admin =
        postgres::Client::connect(admin_url, postgres::NoTls).expect("connect to the test server");
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}"
        ))
        .expect("create a test schema");
    let sep = if admin_url.contains('?') { '&' } else { '?' };
    format!("{admin_url}{sep}options=-csearch_path%3D{name}")
}

static NEXT_DB: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The thread database of the store at `store`: `<store>/threads.db`, or with
/// `CAIRN_TEST_THREADS=pg` a PostgreSQL database (schema) made for this store on first use (its URL
/// kept in `<store>/test-pg-url`).
pub fn db_location(store: &std::path::Path) -> PathBuf {
    if !on_pg() {
        return store.join(cairn_rewind::DB_FILE);
    }
    let admin = pg_url().expect("CAIRN_TEST_THREADS=pg needs CAIRN_TEST_PG_URL");
    let file = store.join("test-pg-url");
    if let Ok(url) = std::fs::read_to_string(&file) {
        return PathBuf::from(url);
    }
    let url = fresh_pg_url(&admin);
    std::fs::create_dir_all(store).expect("the store directory");
    std::fs::write(&file, &url).expect("keep the test database's URL");
    PathBuf::from(url)
}

/// `Threads::open_in_store`, on the engine the tests run against.
pub fn open_in_store(
    store: impl AsRef<std::path::Path>,
    options: ThreadsOptions,
) -> cairn_rewind::Result<Threads> {
    Threads::open(db_location(store.as_ref()), options)
}

/// A run in `ws` with checkpoints on at the run level.
pub fn run_in(threads: &Threads, thread: &ThreadId, ws: Arc<Fake>) -> Run {
    threads
        .begin_run(
            thread,
            RunOptions {
                workspace: Some(ws),
                checkpoints: Some(Checkpoints::default()),
                ..RunOptions::default()
            },
        )
        .expect("begin a run")
}

/// Appends an entry through a run.
pub fn say(threads: &Threads, thread: &ThreadId, run: &Run, entry: NewEntry) -> Appended {
    threads
        .append(
            thread,
            entry,
            &AppendOptions {
                run: Some(run.clone()),
                ..Default::default()
            },
        )
        .expect("append")
}

/// Appends an entry without a run (no checkpoint).
pub fn note(
    threads: &Threads,
    thread: &ThreadId,
    kind: cairn_rewind::EntryKind,
    text: &str,
) -> EntryId {
    threads
        .append(thread, NewEntry::new(kind, text), &AppendOptions::default())
        .expect("append")
        .entry
        .id
}

/// A conversation of two turns; the file `a.txt` is `v1` before the first message, `v2` before
/// the second, `v3` at the end. The run has ended.
pub struct Turns {
    pub thread: ThreadId,
    pub u1: Appended,
    pub a1: EntryId,
    pub u2: Appended,
    pub a2: EntryId,
}

pub fn two_turns(env: &Env, id: &str) -> Turns {
    let thread = env.thread(id);
    let run = env.run(&thread);
    env.ws.write("a.txt", "v1");
    let u1 = say(&env.threads, &thread, &run, NewEntry::user("make it v2"));
    env.ws.write("a.txt", "v2");
    let a1 = say(&env.threads, &thread, &run, NewEntry::assistant("done"))
        .entry
        .id;
    let u2 = say(&env.threads, &thread, &run, NewEntry::user("make it v3"));
    env.ws.write("a.txt", "v3");
    env.ws.write("b.txt", "new");
    let a2 = say(&env.threads, &thread, &run, NewEntry::assistant("done"))
        .entry
        .id;
    env.threads.end_run(&run).expect("end the run");
    Turns {
        thread,
        u1,
        a1,
        u2,
        a2,
    }
}

/// Rewind options with files into `ws`.
pub fn with_files(ws: &Arc<Fake>) -> cairn_rewind::RewindOptions {
    cairn_rewind::RewindOptions {
        files: Some(true),
        workspace: Some(ws.clone()),
        ..Default::default()
    }
}

/// Rewind options with `force`.
pub fn forced() -> cairn_rewind::RewindOptions {
    cairn_rewind::RewindOptions {
        force: true,
        ..Default::default()
    }
}

/// Rewind options with files into `ws` and `force`.
pub fn forced_files(ws: &Arc<Fake>) -> cairn_rewind::RewindOptions {
    cairn_rewind::RewindOptions {
        force: true,
        ..with_files(ws)
    }
}

/// A dry run with files into `ws`.
pub fn dry_files(ws: &Arc<Fake>) -> cairn_rewind::RewindOptions {
    cairn_rewind::RewindOptions {
        dry_run: true,
        ..with_files(ws)
    }
}

/// The ids of the active branch.
pub fn active_ids(threads: &Threads, thread: &ThreadId) -> Vec<EntryId> {
    threads
        .active_branch(thread)
        .expect("active branch")
        .into_iter()
        .map(|e| e.id)
        .collect()
}

/// Polls `f` every 5 ms until it is true, failing after 30 s (a bound, not a timing bet).
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The error kind of a result.
pub fn kind<T: std::fmt::Debug>(r: cairn_rewind::Result<T>) -> cairn_store::ErrorKind {
    use cairn_store::Classify;
    r.expect_err("an error").kind()
}
