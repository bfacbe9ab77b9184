//! `cairn studio` opening a browser (issue 53): a fake browser, an `xdg-open` first on `PATH`
//! that keeps its arguments and environment (what any local user reads from `/proc`), shows
//! that nothing there lets another user into the Studio, that the browser itself gets in, and
//! that the one-time code it got in with is dead afterwards.

use crate::Fixture;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `cairn studio` started as a user would (it opens a browser), with a fake `xdg-open`.
struct Launched {
    child: Child,
    port: u16,
    /// What the fake browser was started with: its arguments, then its environment.
    argv: Vec<String>,
    env: Vec<String>,
    _dir: tempfile::TempDir,
    _workspace: Fixture,
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cairn studio` in a workspace with a thread `demo`, with an `xdg-open` first on
/// `PATH` that writes down its arguments and environment, and waits until it has been started.
fn launch() -> Launched {
    let f = Fixture::new();
    f.cairn(&["thread", "new", "--id", "demo"])
        .assert()
        .success();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (bin, run, record) = (
        dir.path().join("bin"),
        dir.path().join("run"),
        dir.path().join("record"),
    );
    for d in [&bin, &run, &record] {
        std::fs::create_dir(d).expect("a directory");
    }
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).expect("0700");
    let opener = bin.join("xdg-open");
    let r = record.display();
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\" > '{r}/argv.part'\nenv -0 > '{r}/env.part'\n\
             mv '{r}/env.part' '{r}/env'\nmv '{r}/argv.part' '{r}/argv'\n"
        ),
    )
    .expect("the fake browser");
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).expect("0755");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .arg("-C")
        .arg(&f.root)
        .arg("studio")
        .env("CAIRN_HOME", &f.home)
        .env_remove("CAIRN_STORE")
        .env_remove("CAIRN_THREADS_DB")
        .env("PATH", path)
        .env("XDG_RUNTIME_DIR", &run)
        .env("TMPDIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cairn studio starts");
    let mut first = String::new();
    BufReader::new(child.stdout.take().expect("its stdout"))
        .read_line(&mut first)
        .expect("the URL line");
    let port = first
        .trim()
        .strip_prefix("http://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the first line is the URL: {first:?}"));
    let argv = wait_for(&record.join("argv"));
    let env = wait_for(&record.join("env"));
    Launched {
        child,
        port,
        argv,
        env,
        _dir: dir,
        _workspace: f,
    }
}

/// The NUL-separated strings of a file the fake browser writes, once it is there.
fn wait_for(path: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(bytes) = std::fs::read(path) {
            return String::from_utf8_lossy(&bytes)
                .split('\0')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
        assert!(
            Instant::now() < deadline,
            "the browser was not started within 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One HTTP/1.1 request as a browser on this machine sends it: the status and the body.
fn http(port: u16, method: &str, path: &str, extra: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the studio answers");
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in extra {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).expect("the request is sent");
    let mut all = String::new();
    let _ = s.read_to_string(&mut all);
    let code = all
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {all:?}"));
    let body = all.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    (code, body.to_string())
}

/// An API call made with `secret` as a script or the page makes it.
fn api_with(port: u16, secret: &str) -> u16 {
    http(
        port,
        "GET",
        "/v1/threads",
        &[("Authorization", &format!("Bearer {secret}"))],
        "",
    )
    .0
}

/// The page's exchange of `{"code"|"token": value}` for a session, from the page's own origin.
fn exchange(port: u16, field: &str, value: &str) -> (u16, Option<String>) {
    let origin = format!("http://127.0.0.1:{port}");
    let (code, body) = http(
        port,
        "POST",
        "/api/session",
        &[("Origin", &origin), ("Sec-Fetch-Site", "same-origin")],
        &serde_json::json!({ field: value }).to_string(),
    );
    let session = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["session"].as_str().map(str::to_string));
    (code, session)
}

/// What a browser does with what it was given: reads the page file (or takes the URL), loads
/// the page, and lets the page's script log in with the address's code or token. Returns the
/// address it loaded and the session the page got, if any.
fn browse(port: u16, given: &str) -> (String, Option<String>) {
    let (url, site) = if given.starts_with("http://") {
        // A browser started on an address: a navigation of its own.
        (given.to_string(), "none")
    } else {
        let html = std::fs::read_to_string(given).expect("the page file, read by its owner");
        let start = html.find("url=").expect("a refresh to the page") + 4;
        let end = start + html[start..].find('"').expect("the refresh's end");
        // A page reached from a file: a navigation the browser marks cross-site.
        (html[start..end].to_string(), "cross-site")
    };
    let path = url
        .strip_prefix(&format!("http://127.0.0.1:{port}"))
        .unwrap_or_else(|| panic!("the page of this studio: {url}"));
    let navigation = [
        ("Sec-Fetch-Site", site),
        ("Sec-Fetch-Mode", "navigate"),
        ("Sec-Fetch-Dest", "document"),
    ];
    let (code, page) = http(port, "GET", path, &navigation, "");
    assert_eq!(code, 200, "the page loads: {page}");
    let query = path.split_once('?').map(|(_, q)| q).unwrap_or("");
    let session = query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == "code" || k == "token")
            .then(|| exchange(port, k, v).1)
            .flatten()
    });
    (url, session)
}

/// Every string of the browser's arguments and environment, and every run of 16 or more
/// letters and digits in them: what another local user reads from `/proc` (those a header or
/// a query can carry: a secret has no space nor control character).
fn readable_by_others(l: &Launched) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for s in l.argv.iter().chain(&l.env) {
        let value = s.split_once('=').map(|(_, v)| v).unwrap_or(s);
        all.push(s.clone());
        all.push(value.to_string());
        all.extend(
            s.split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| w.len() >= 16)
                .map(str::to_string),
        );
    }
    all.retain(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic()));
    all.sort();
    all.dedup();
    all
}

#[test]
fn the_browser_is_opened_on_nothing_another_user_could_get_into_the_studio_with() {
    // Issue 53: a browser started on `/?token=…` showed the token to every local user.
    let l = launch();
    assert_eq!(l.argv.len(), 2, "one thing to open: {:?}", l.argv);
    let given = &l.argv[1];
    // The page file (if it is one) is its owner's only, in a directory of its own.
    let page_file = Path::new(given);
    if page_file.is_file() {
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .expect("its metadata")
                .permissions()
                .mode()
        };
        assert_eq!(mode(page_file) & 0o777, 0o600, "{given}");
        let parent = page_file.parent().expect("its directory");
        assert_eq!(mode(parent) & 0o777, 0o700, "{}", parent.display());
    }
    let (url, session) = browse(l.port, given);

    // (a) Nothing the browser's command line or environment holds opens the API, nor gets a
    // session, once the browser is in.
    for s in readable_by_others(&l) {
        assert_eq!(
            api_with(l.port, &s),
            401,
            "the browser's arguments or environment hold a secret that opens the API: {s}"
        );
        let escaped: String = s
            .bytes()
            .map(|b| match b {
                b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let q = format!("/v1/threads?token={escaped}");
        let by_query = http(l.port, "GET", &q, &[], "").0;
        assert_ne!(by_query, 200, "{s} opens the API in a query");
        for field in ["code", "token"] {
            assert_eq!(exchange(l.port, field, &s).1, None, "{s} gets a session");
        }
    }

    // (b) The browser's own session works.
    let session = session.expect("the page got a session for its code");
    let (code, threads) = http(
        l.port,
        "GET",
        "/v1/threads",
        &[("Authorization", &format!("Bearer {session}"))],
        "",
    );
    assert_eq!(code, 200, "{threads}");
    assert!(threads.contains("\"demo\""), "{threads}");

    // (c) The code it got in with is dead, and its file gone.
    let code = url.split_once("code=").map(|(_, c)| c).expect("a code");
    assert_eq!(exchange(l.port, "code", code), (401, None));
    assert!(
        !page_file.exists(),
        "{given} is left after its code was used"
    );
}

#[test]
fn a_page_file_never_used_is_removed_when_the_studio_stops() {
    // Issue 53: the page file holds a code good for a minute; it does not outlive the server.
    let mut l = launch();
    let page_file = PathBuf::from(&l.argv[1]);
    assert!(
        page_file.is_file(),
        "the browser is opened on a file: {page_file:?}"
    );
    let pid = rustix::process::Pid::from_child(&l.child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM sent");
    let status = l.child.wait().expect("the studio ends");
    assert!(status.success(), "{status:?}");
    assert!(
        !page_file.parent().expect("its directory").exists(),
        "{page_file:?} outlived the studio"
    );
}
