//! How a browser gets into the Studio without a secret in any process's arguments (issue 53).
//!
//! A browser started with a URL keeps that URL in its command line, which every local user
//! reads from `/proc`. So `cairn studio` opens the browser on a *page file* instead: an
//! owner-only HTML file (0600, in a directory of its own, 0700) that sends the browser on to
//! `/?code=CODE`. Its path is no secret; what it holds only its owner can read. The code is
//! random (128 bits), good once and for [`CODE_LIFETIME`]: the page's script exchanges it at
//! `POST /api/session` for a session secret of its own tab (kept in `sessionStorage`, which is
//! per origin, port included, where a cookie would also go to any other server on 127.0.0.1),
//! and the code and its file are gone. The long-lived token (`Authorization: Bearer`, for
//! scripts) is printed on stdout only; pasted into a browser (`/?token=…`) it is exchanged the
//! same way and stays out of the tab's storage.

use super::{new_token, refused, same_secret, Studio};
use crate::error::CliError;
use crate::serve::ApiError;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cairn_store::ErrorKind;
use serde::Deserialize;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the code of the page file the browser is opened on stays good.
pub(crate) const CODE_LIFETIME: Duration = Duration::from_secs(60);

/// The name of the page file inside its directory.
const PAGE_FILE: &str = "open.html";

/// Who may call the API besides the holder of the token: the sessions given out, and the one
/// code not yet used.
#[derive(Default)]
pub(crate) struct Logins {
    /// The session secrets given out by exchanges, one per page that logged in.
    sessions: Vec<String>,
    /// The page file's one-time code, until it is used or too old.
    code: Option<PageCode>,
}

/// A one-time code, when it dies, and the page file that holds it (removed with it).
struct PageCode {
    code: String,
    until: Instant,
    _file: Option<tempfile::TempDir>,
}

/// What a page hands over for a session: the page file's code or the printed token.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionRequest {
    code: Option<String>,
    token: Option<String>,
}

impl Studio {
    /// Makes `code` the one code good for a session until `until`; `file` (the page file's
    /// directory) is removed when the code is used or dies.
    pub(crate) fn set_code(&self, code: String, until: Instant, file: Option<tempfile::TempDir>) {
        self.logins().code = Some(PageCode {
            code,
            until,
            _file: file,
        });
    }

    /// Forgets the code (and removes its file) if it is dead at `now`, or at once with `None`.
    pub(crate) fn drop_code(&self, now: Option<Instant>) {
        let mut logins = self.logins();
        if now.is_none_or(|now| logins.code.as_ref().is_some_and(|c| now >= c.until)) {
            logins.code = None;
        }
    }

    /// A new session for the page that gives the live code (which dies) or the token.
    pub(crate) fn exchange(
        &self,
        req: &SessionRequest,
        now: Instant,
    ) -> std::result::Result<String, &'static str> {
        let mut logins = self.logins();
        match (&req.code, &req.token) {
            (Some(code), None) => {
                let live = logins.code.as_ref().is_some_and(|c| {
                    now < c.until && same_secret(code.as_bytes(), c.code.as_bytes())
                });
                if !live {
                    return Err(
                        "refused: this one-time code was used already, is older than \
                                60 s, or was never given; open the URL `cairn studio` printed",
                    );
                }
                logins.code = None;
            }
            (None, Some(token)) if same_secret(token.as_bytes(), self.token.as_bytes()) => {}
            (None, Some(_)) => {
                return Err(
                    "refused: this is not the token of this studio; open the URL \
                            `cairn studio` printed",
                )
            }
            _ => return Err("refused: a session takes either a `code` or a `token`"),
        }
        let session = new_token().map_err(|_| "refused: no random session could be made")?;
        logins.sessions.push(session.clone());
        Ok(session)
    }

    /// Whether `given` is the token or a session given out.
    pub(crate) fn admits(&self, given: &str) -> bool {
        same_secret(given.as_bytes(), self.token.as_bytes())
            || self
                .logins()
                .sessions
                .iter()
                .any(|s| same_secret(given.as_bytes(), s.as_bytes()))
    }

    fn logins(&self) -> std::sync::MutexGuard<'_, Logins> {
        // A panic while holding it leaves nothing half made: the lists are replaced whole.
        self.logins
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `POST /api/session`: a session secret for `{"code": …}` or `{"token": …}`.
pub(crate) async fn open_session(State(studio): State<Arc<Studio>>, bytes: Bytes) -> Response {
    let req: SessionRequest = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            let why = format!("a session takes {{\"code\": …}} or {{\"token\": …}}: {e}");
            return ApiError(CliError::new(ErrorKind::InvalidArgument, why)).into_response();
        }
    };
    match studio.exchange(&req, Instant::now()) {
        Ok(session) => Json(serde_json::json!({ "session": session })).into_response(),
        Err(why) => refused(StatusCode::UNAUTHORIZED, why),
    }
}

/// Writes the page file that sends a browser to `http://127.0.0.1:PORT/?code=CODE`: owner-only
/// (0600), in a new owner-only directory (0700) under `$XDG_RUNTIME_DIR` or else the temporary
/// directory. Returns the directory (removed when dropped) and the file's path.
pub(crate) fn write_page_file(
    port: u16,
    code: &str,
) -> std::io::Result<(tempfile::TempDir, PathBuf)> {
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new()
        .prefix("cairn-studio-")
        .tempdir_in(base)?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
    let path = dir.path().join(PAGE_FILE);
    write_private(&path, &page_file_html(port, code))?;
    Ok((dir, path))
}

fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// The page file: a refresh to the page with the code, and a link for a browser that does not
/// follow it. The code is hex, so it needs no escaping.
fn page_file_html(port: u16, code: &str) -> String {
    let url = format!("http://127.0.0.1:{port}/?code={code}");
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={url}\"><title>Cairn Studio</title></head>\n\
         <body><p>Opening <a href=\"{url}\">Cairn Studio</a>…</p></body></html>\n"
    )
}
