//! `cairn serve` (issue 59): the token and the owner-only socket, the OpenAPI document kept in
//! `docs/openapi.json`, rewinds with request keys, the feed of the event log seen by two
//! clients at once and resumed from a cursor, and a restart after a server killed mid-rewind.
//! Clients in other languages (Python, Node) and the standard OpenAPI validator are in
//! `scripts/test-serve`.

use crate::Fixture;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long anything is waited for before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// A `cairn serve` on a loopback port.
pub(crate) struct Served {
    child: Child,
    port: u16,
    token: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `cairn serve ARGS` in the fixture's workspace, and the first line it prints (JSON).
fn launch(f: &Fixture, args: &[&str]) -> (Child, Value) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .arg("-C")
        .arg(&f.root)
        .arg("serve")
        .args(args)
        .env("CAIRN_HOME", &f.home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_THREADS_DB")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cairn serve starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("its stdout"))
        .read_line(&mut first)
        .expect("the first line");
    let line = serde_json::from_str(&first)
        .unwrap_or_else(|e| panic!("the first line is JSON ({e}): {first:?}"));
    (child, line)
}

pub(crate) fn serve(f: &Fixture) -> Served {
    let (child, line) = launch(f, &[]);
    let port = line["url"]
        .as_str()
        .and_then(|u| u.strip_prefix("http://127.0.0.1:"))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("a loopback URL: {line}"));
    let token = line["token"].as_str().expect("a token").to_string();
    Served { child, port, token }
}

/// The body of an HTTP/1.1 response, its chunks joined.
fn body_of(head: &str, rest: &[u8]) -> Vec<u8> {
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return rest.to_vec();
    }
    let (mut out, mut at) = (Vec::new(), 0);
    while let Some(nl) = rest[at..].windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&rest[at..at + nl]).trim(), 16)
            .expect("a chunk size");
        if size == 0 {
            break;
        }
        at += nl + 2;
        out.extend_from_slice(&rest[at..at + size]);
        at += size + 2;
    }
    out
}

/// Sends one request over `stream` and returns the status and the body as JSON.
fn exchange(
    mut stream: impl Read + Write,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&body);
    stream.write_all(req.as_bytes()).expect("send");
    let mut all = Vec::new();
    stream.read_to_end(&mut all).expect("the answer");
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a header");
    let head = String::from_utf8_lossy(&all[..split]).to_string();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    let body = body_of(&head, &all[split + 4..]);
    let json = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).to_string()));
    (status, json)
}

impl Served {
    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("the server answers");
        let bearer = format!("Bearer {}", self.token);
        exchange(
            stream,
            method,
            path,
            &[("Host", &self.host()), ("Authorization", &bearer)],
            body,
        )
    }

    pub(crate) fn get(&self, path: &str) -> Value {
        let (status, v) = self.call("GET", path, None);
        assert_eq!(status, 200, "GET {path}: {v}");
        v
    }

    /// Opens the feed, after `last` when given (`Last-Event-ID`).
    fn feed(&self, last: Option<i64>, query: &str) -> Feed {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("the server answers");
        stream
            .set_read_timeout(Some(PATIENCE))
            .expect("a read timeout");
        let mut req = format!(
            "GET /v1/events{query} HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\
             Accept: text/event-stream\r\n",
            self.host(),
            self.token
        );
        if let Some(last) = last {
            req.push_str(&format!("Last-Event-ID: {last}\r\n"));
        }
        req.push_str("\r\n");
        (&stream).write_all(req.as_bytes()).expect("send");
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        reader.read_line(&mut line).expect("a status line");
        assert!(line.contains(" 200 "), "the feed opens: {line}");
        let mut chunked = false;
        loop {
            line.clear();
            reader.read_line(&mut line).expect("a header");
            chunked |= line.to_ascii_lowercase().contains("chunked");
            if line == "\r\n" {
                break;
            }
        }
        let mut feed = Feed {
            reader,
            chunked,
            until: Instant::now() + PATIENCE,
        };
        let ready = feed.next();
        assert_eq!(ready.kind, "ready", "the feed starts with ready");
        feed
    }
}

/// A server-sent event.
#[derive(Debug)]
struct Sse {
    kind: String,
    id: Option<i64>,
    data: Value,
}

/// A feed being read.
struct Feed {
    reader: BufReader<TcpStream>,
    chunked: bool,
    /// When waiting for an event fails the test (keep-alive comments do not count).
    until: Instant,
}

impl Feed {
    /// The next line of the stream (chunk sizes skipped).
    fn line(&mut self) -> String {
        loop {
            assert!(Instant::now() < self.until, "an event within {PATIENCE:?}");
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).expect("the feed goes on");
            assert!(n > 0, "the feed ended");
            let line = line.trim_end_matches(['\r', '\n']).to_string();
            let is_size =
                self.chunked && !line.is_empty() && line.chars().all(|c| c.is_ascii_hexdigit());
            if !is_size {
                return line;
            }
        }
    }

    /// The next event (keep-alive comments skipped).
    fn next(&mut self) -> Sse {
        let (mut kind, mut id, mut data) = (String::from("message"), None, String::new());
        let mut any = false;
        loop {
            let line = self.line();
            if line.is_empty() {
                if any {
                    return Sse {
                        kind,
                        id,
                        data: serde_json::from_str(&data).unwrap_or(Value::Null),
                    };
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("event:") {
                kind = v.trim().to_string();
                any = true;
            } else if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().parse().ok();
                any = true;
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
                any = true;
            }
        }
    }

    /// Events until one of kind `kind` whose data's `rewind_id` is set; all of them returned.
    fn until(&mut self, kind: &str) -> Vec<Sse> {
        let mut seen = Vec::new();
        loop {
            let e = self.next();
            let done = e.kind == "cairn" && e.data["kind"] == kind;
            seen.push(e);
            if done {
                return seen;
            }
        }
    }
}

/// A thread `chat` of two turns (turn 1 adds `turn1.txt`, turn 2 adds `turn2.txt`); returns
/// the ids of (user 1, end of turn 1, user 2).
fn two_turns(f: &Fixture) -> (String, String, String) {
    f.json(&["thread", "new", "--id", "chat"]);
    let append = |kind: &str, text: &str| -> String {
        let v = f.json(&["thread", "append", "chat", "--kind", kind, "--text", text]);
        v["entry"]["id"].as_str().expect("an id").to_string()
    };
    let u1 = append("user", "turn one");
    f.write("turn1.txt", "1\n");
    let end1 = append("assistant", "did one");
    let u2 = append("user", "turn two");
    f.write("turn2.txt", "2\n");
    append("assistant", "did two");
    (u1, end1, u2)
}

/// The events of the whole log, through the API.
fn log(s: &Served) -> Vec<Value> {
    let (mut all, mut cursor) = (Vec::new(), 0);
    loop {
        let page = s.get(&format!("/v1/events/log?cursor={cursor}"));
        let events = page["events"].as_array().expect("events").clone();
        if events.is_empty() {
            return all;
        }
        cursor = page["cursor"].as_i64().expect("a cursor");
        all.extend(events);
    }
}

fn docs_openapi() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

// Issue 59: the OpenAPI document is generated from the Rust types and committed; this fails
// when the committed one is out of date (CAIRN_BLESS=1 writes it).
#[test]
fn the_committed_openapi_document_is_the_one_the_server_makes() {
    let f = Fixture::new();
    let out = f.cairn(&["serve", "--openapi"]).output().expect("run");
    assert!(out.status.success());
    let made = String::from_utf8(out.stdout).expect("UTF-8");
    let doc: Value = serde_json::from_str(&made).expect("JSON");
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
    assert!(doc["paths"]["/v1/threads/{id}/rewind"]["post"].is_object());
    let path = docs_openapi();
    if std::env::var_os("CAIRN_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write docs/openapi.json");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == made,
        "docs/openapi.json is not the document `cairn serve --openapi` makes: run \
         CAIRN_BLESS=1 cargo test -p cairn-cli --test cli serve::the_committed_openapi_document"
    );
}

// Issue 59: over TCP every call carries the printed token; the document is served too.
#[test]
fn a_call_without_the_token_is_refused_and_one_with_it_answers() {
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "chat"]);
    let s = serve(&f);
    let stream = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    let (status, v) = exchange(stream, "GET", "/v1/threads", &[("Host", &s.host())], None);
    assert_eq!(status, 401, "{v}");
    assert_eq!(v["error"]["kind"], "DENIED");
    let wrong = format!("Bearer {}", "0".repeat(32));
    let stream = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
    let (status, _) = exchange(
        stream,
        "GET",
        "/v1/threads",
        &[("Host", &s.host()), ("Authorization", &wrong)],
        None,
    );
    assert_eq!(status, 401);
    let threads = s.get("/v1/threads");
    assert_eq!(threads["threads"][0]["id"], "chat", "{threads}");
    let doc = s.get("/v1/openapi.json");
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(docs_openapi()).unwrap_or_default())
            .unwrap_or(Value::Null);
    assert!(doc == committed, "the served document is the committed one");
}

// Issue 59: the Unix socket is its owner's only (0600) and needs no token.
#[test]
fn a_unix_socket_server_is_its_owners_only_and_needs_no_token() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "chat"]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let sock = dir.path().join("cairn.sock");
    let (mut child, line) = launch(&f, &["--socket", &sock.display().to_string()]);
    assert_eq!(line["socket"], sock.display().to_string());
    let mode = std::fs::metadata(&sock)
        .expect("the socket")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let stream = std::os::unix::net::UnixStream::connect(&sock).expect("connect");
    let (status, v) = exchange(stream, "GET", "/v1/threads", &[("Host", "cairn")], None);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["threads"][0]["id"], "chat");
}

// Issue 59: two clients at once see the same completed rewind through the feed, and the view
// has it with its key and state.
#[test]
fn two_clients_see_the_same_completed_rewind_through_the_feed() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    let s = serve(&f);
    let (mut a, mut b) = (s.feed(None, ""), s.feed(None, "?thread=chat"));
    let (status, done) = s.call(
        "POST",
        "/v1/threads/chat/rewind",
        Some(&json!({"entry": end1, "files": true, "key": "k-two-clients"})),
    );
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["state"], "completed");
    assert!(f.read("turn2.txt").is_none(), "the files went back");
    let id = done["rewind_id"].as_str().expect("a rewind id").to_string();
    let (seen_a, seen_b) = (a.until("rewind_completed"), b.until("rewind_completed"));
    let (last_a, last_b) = (
        seen_a.last().expect("an event"),
        seen_b.last().expect("an event"),
    );
    assert_eq!(last_a.data["data"]["rewind_id"], id.as_str());
    assert_eq!(last_b.data["data"]["rewind_id"], id.as_str());
    assert_eq!(last_a.id, last_b.id, "the same event, the same cursor");
    assert!(seen_a.iter().any(|e| e.data["kind"] == "rewind_started"));
    let view = s.get("/v1/threads/chat/view");
    let rewinds = view["rewinds"].as_array().expect("rewinds");
    assert_eq!(rewinds.len(), 1, "{view}");
    assert_eq!(rewinds[0]["rewind_id"], id.as_str());
    assert_eq!(rewinds[0]["key"], "k-two-clients");
    assert_eq!(rewinds[0]["state"], "completed");
    assert_eq!(
        view["active_branch"].as_array().and_then(|b| b.last()),
        Some(&Value::String(end1))
    );
}

// Issue 59: the same key, sent by several clients at once and again later, runs one rewind.
#[test]
fn a_rewind_retried_with_the_same_key_runs_once() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let s = std::sync::Arc::new(serve(&f));
    let body = json!({"entry": u1, "key": "k-once"});
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| s.call("POST", "/v1/threads/chat/rewind", Some(&body))))
            .collect();
        calls
            .into_iter()
            .map(|c| c.join().expect("a client"))
            .collect()
    });
    let again = s.call("POST", "/v1/threads/chat/rewind", Some(&body));
    assert_eq!(again.0, 200, "{}", again.1);
    assert_eq!(again.1["repeated"], true);
    let id = again.1["rewind_id"].as_str().expect("an id").to_string();
    for (status, a) in &answers {
        assert!(*status == 200 || *status == 202, "{status} {a}");
        if !a["rewind_id"].is_null() {
            assert_eq!(a["rewind_id"], id.as_str(), "{a}");
        }
    }
    let started = log(&s)
        .into_iter()
        .filter(|e| e["kind"] == "rewind_started")
        .count();
    assert_eq!(started, 1, "one rewind ran");
    let view = s.get("/v1/threads/chat/view");
    assert_eq!(view["rewinds"].as_array().map(Vec::len), Some(1), "{view}");
    assert_eq!(view["active_branch"].as_array().map(Vec::len), Some(1));
}

// Issue 59: an obstructed rewind (drift: a file edited after the newest checkpoint) is refused
// and then, the obstruction gone, retried with its key; the key then answers that rewind.
#[test]
fn an_obstructed_rewind_is_retried_with_its_key_once_the_obstruction_is_gone() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let s = serve(&f);
    let body = json!({"entry": u1, "files": true, "key": "k-retry"});
    let (status, v) = s.call("POST", "/v1/threads/chat/rewind", Some(&body));
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["error"]["kind"], "CONFLICT");
    assert!(f.read("turn2.txt").is_some(), "nothing was changed");
    // The edit is checkpointed with the next message: no longer anyone else's.
    f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "three",
    ]);
    let (status, done) = s.call("POST", "/v1/threads/chat/rewind", Some(&body));
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["repeated"], false);
    assert!(f.read("turn1.txt").is_none(), "the files went back");
    let (status, again) = s.call("POST", "/v1/threads/chat/rewind", Some(&body));
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["repeated"], true);
    assert_eq!(again["rewind_id"], done["rewind_id"]);
}

// Issue 59: a client that reconnects with its last cursor misses nothing and sees nothing twice.
#[test]
fn a_reconnect_from_the_cursor_loses_and_repeats_nothing() {
    let f = Fixture::new();
    f.json(&["thread", "new", "--id", "chat"]);
    let s = serve(&f);
    let note = |i: usize| {
        f.json(&[
            "thread",
            "append",
            "chat",
            "--kind",
            "note",
            "--text",
            &format!("n{i}"),
        ]);
    };
    (0..3).for_each(note);
    let mut seen: Vec<i64> = Vec::new();
    let mut feed = s.feed(None, "?cursor=0");
    while seen.len() < 2 {
        seen.extend(feed.next().id);
    }
    drop(feed);
    (3..6).for_each(note);
    let mut feed = s.feed(seen.last().copied(), "");
    let newest = log(&s)
        .last()
        .and_then(|e| e["cursor"].as_i64())
        .expect("events");
    let deadline = Instant::now() + PATIENCE;
    while seen.last() != Some(&newest) {
        assert!(Instant::now() < deadline, "the feed caught up");
        seen.extend(feed.next().id);
    }
    let all: Vec<i64> = log(&s)
        .iter()
        .map(|e| e["cursor"].as_i64().expect("a cursor"))
        .collect();
    assert_eq!(seen, all, "every event once, in order");
}

/// The child of the restart test: the rewind of `chat` to `to` with its files, through a
/// workspace that kills the process once the files are restored, as a server killed mid-rewind.
#[test]
fn serve_crash_child() {
    let Some((spec, ws, threads)) = crate::resume::crash_child_open("CAIRN_SERVE_CHILD") else {
        return;
    };
    let options = cairn_rewind::RewindOptions {
        files: Some(true),
        key: Some("k-killed".into()),
        workspace: Some(std::sync::Arc::new(crate::resume::Dies { ws })),
        ..Default::default()
    };
    let to = cairn_rewind::EntryId::new(spec["to"].as_str().expect("to"));
    let _ = threads.rewind(&cairn_rewind::ThreadId::new("chat"), &to, &options);
    unreachable!("the child dies once the files are restored");
}

// Issue 59: a server started after one was killed mid-rewind finishes that rewind before it
// accepts a new one (until then a new rewind is BUSY, naming the journal).
#[test]
fn a_restart_with_a_pending_journal_finishes_it_before_a_new_rewind() {
    let f = Fixture::new();
    let (u1, end1, _) = two_turns(&f);
    let spec = json!({ "root": f.root, "to": end1 });
    let status = Command::new(std::env::current_exe().expect("exe"))
        .args([
            "serve::serve_crash_child",
            "--exact",
            "--test-threads=1",
            "--quiet",
        ])
        .env("CAIRN_SERVE_CHILD", spec.to_string())
        .env("CAIRN_HOME", &f.home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_THREADS_DB")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("the child");
    assert!(!status.success(), "the child died inside the rewind");
    assert!(f.read("turn2.txt").is_none(), "its files were restored");
    let store = f.store();
    let pending = cairn_rewind::Threads::open_in_store(
        &store,
        cairn_rewind::ThreadsOptions {
            recover: false,
            ..Default::default()
        },
    )
    .expect("threads")
    .rewinds(&cairn_rewind::ThreadId::new("chat"))
    .expect("rewinds");
    assert_eq!(pending.len(), 1);
    assert_ne!(
        pending[0].state, "completed",
        "the killed rewind is unfinished"
    );
    let s = serve(&f);
    // Startup itself finishes it, with no call asking (reads are answered meanwhile).
    let deadline = Instant::now() + PATIENCE;
    while s.get("/v1/threads/chat/view")["rewinds"][0]["state"] != "completed" {
        assert!(
            Instant::now() < deadline,
            "startup finished the killed rewind"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let body = json!({"entry": u1, "key": "k-after"});
    let done = loop {
        let (status, v) = s.call("POST", "/v1/threads/chat/rewind", Some(&body));
        if status == 200 {
            break v;
        }
        assert_eq!(v["error"]["kind"], "BUSY", "{v}");
        let message = v["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.contains("journal") || message.contains("rewinds"),
            "{message}"
        );
        assert!(Instant::now() < deadline, "recovery ends");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(done["state"], "completed", "{done}");
    let view = s.get("/v1/threads/chat/view");
    let rewinds = view["rewinds"].as_array().expect("rewinds");
    assert_eq!(rewinds.len(), 2, "{view}");
    assert_eq!(rewinds[0]["key"], "k-killed");
    assert_eq!(
        rewinds[0]["state"], "completed",
        "the killed one was finished"
    );
    assert_eq!(rewinds[1]["key"], "k-after");
    let finished = rewinds[0]["finished_ms"].as_i64().expect("finished");
    let started = rewinds[1]["created_ms"].as_i64().expect("created");
    assert!(
        finished <= started,
        "finished before the new one began: {view}"
    );
    let events: Vec<String> = log(&s)
        .iter()
        .filter(|e| e["kind"].as_str().is_some_and(|k| k.starts_with("rewind_")))
        .map(|e| format!("{} {}", e["kind"], e["data"]["rewind_id"]))
        .collect();
    let id_of = |i: usize| rewinds[i]["rewind_id"].as_str().unwrap_or("?");
    let first_done = events
        .iter()
        .position(|e| e.contains("rewind_completed") && e.contains(id_of(0)))
        .expect("the killed rewind completed");
    let second_start = events
        .iter()
        .position(|e| e.contains("rewind_started") && e.contains(id_of(1)))
        .expect("the new rewind started");
    assert!(first_done < second_start, "{events:?}");
}

// Issue 59: `cairn rewind --key` answers the rewind its key made, and runs no second one.
#[test]
fn cairn_rewind_with_a_key_seen_before_answers_the_same_rewind() {
    let f = Fixture::new();
    let (_, end1, _) = two_turns(&f);
    let args = [
        "rewind", "chat", &end1, "--files", "--yes", "--key", "k-cli",
    ];
    let first = f.json(&args);
    let id = first["rewind_id"]
        .as_str()
        .expect("a rewind id")
        .to_string();
    f.write("turn2.txt", "again\n");
    let second = f.json(&args);
    assert_eq!(second["rewind_id"], id.as_str());
    assert_eq!(
        f.read("turn2.txt").as_deref(),
        Some("again\n"),
        "nothing ran again"
    );
    let events = f.json_bytes(&["events"]);
    let started = String::from_utf8_lossy(&events)
        .lines()
        .filter(|l| l.contains("\"rewind_started\""))
        .count();
    assert_eq!(started, 1);
}

// Issue 58: the API refuses what `cairn restore` and `cairn rewind --files` refuse in a
// container workspace while a process runs in the container (BUSY, its plan too), and goes
// through once the process is gone.
#[test]
fn the_api_refuses_a_restore_or_a_rewind_with_files_of_a_busy_container_workspace() {
    let f = Fixture::new();
    let (u1, _, _) = two_turns(&f);
    let snap = f.snapshot("now");
    let cgroup = f.root.parent().expect("parent").join("cgroup");
    std::fs::create_dir_all(&cgroup).expect("mkdir");
    let mut sleeper = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("sleep");
    std::fs::write(cgroup.join("cgroup.procs"), format!("{}\n", sleeper.id())).expect("write");
    let cg = cgroup.to_str().expect("utf-8");
    f.json(&["init", "container", "--cgroup", cg]);
    let s = serve(&f);
    let rewind = json!({"entry": u1, "files": true, "dry_run": true});
    let restore = json!({"op": "restore", "snapshot": snap});
    let planned = json!({"op": "rewind", "thread": "chat", "entry": u1, "files": true});
    for (path, body) in [
        ("/v1/threads/chat/rewind", &rewind),
        ("/v1/plans", &restore),
        ("/v1/plans", &planned),
    ] {
        let (status, v) = s.call("POST", path, Some(body));
        assert_eq!(status, 409, "{path} {body}: {v}");
        assert_eq!(v["error"]["kind"], "BUSY", "{path} {body}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(cg)),
            "{v}"
        );
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    // turn2.txt's edit checkpointed with a message, so the rewind has no drift to refuse.
    f.json(&[
        "thread", "append", "chat", "--kind", "user", "--text", "three",
    ]);
    let (status, v) = s.call("POST", "/v1/threads/chat/rewind", Some(&rewind));
    assert_eq!(status, 200, "{v}");
}
