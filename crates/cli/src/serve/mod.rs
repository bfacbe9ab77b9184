//! `cairn serve`: a local service for cockpits and IDEs, a versioned HTTP API (`/v1/...`) over
//! the workspace and its thread database (issue 59).
//!
//! - It listens on `127.0.0.1` (every call carries the per-launch token, `Authorization:
//!   Bearer …`, printed on stdout only, as `cairn studio` does) or on a Unix socket that only
//!   its owner can open (mode 0600, made under a umask that never lets it be otherwise).
//! - The API is built from one module per concern (threads and pages of them, the thread view,
//!   snapshots and diffs, plans, rewinds, the event feed); [`api`] assembles them, and the
//!   OpenAPI document (`/v1/openapi.json`, `docs/openapi.json`) is generated from the same
//!   handlers and types. `cairn studio` serves the same `/v1` routes to its page.
//! - A rewind by entry or checkpoint id takes a request key: the same key answers the same
//!   rewind (completed, failed then retried, or under way) and never runs a second one.
//! - The feed (`/v1/events`, server-sent events) carries the thread database's event log, each
//!   event with its cursor as its id: a client that reconnects with its last cursor
//!   (`Last-Event-ID`) misses nothing and sees nothing twice.
//! - At startup the restores and rewinds a crash left unfinished are finished before anything
//!   that changes files is answered; until then such calls get `BUSY` naming the journal.

mod browse;
mod error;
mod feed;
mod inbox;
pub(crate) mod plans;
mod rewind;
mod view;

#[cfg(test)]
pub(crate) use browse::next_checkpoints;
pub(crate) use error::ApiError;

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::threads::Opened;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use cairn_rewind::ThreadId;
use cairn_store::ErrorKind;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

/// How often the event log's newest cursor is looked at, to wake the feeds.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// What every handler of the API shares.
pub(crate) struct Service {
    /// The invocation's context (where the workspace and the store are).
    pub(crate) ctx: Ctx,
    /// The workspace and its thread database.
    pub(crate) opened: Opened,
    /// Recent diffs, so paging through a large one does not compute it again.
    pub(crate) diffs: Mutex<browse::DiffCache>,
    /// The directories forks made here went into (a restore may undo their files).
    pub(crate) fork_roots: Mutex<HashSet<PathBuf>>,
    /// While startup recovery runs: what it is finishing (the calls that change files get
    /// `BUSY` naming it); after it, `None`.
    recovering: Mutex<Option<String>>,
    /// The newest cursor of the event log, for the feeds to wait on.
    news: tokio::sync::watch::Sender<i64>,
    /// The rewinds under way in this server, by thread and request key.
    keys: Mutex<HashSet<(ThreadId, String)>>,
    /// Who speaks in messages on stderr (`cairn serve`, `cairn studio`).
    pub(crate) name: &'static str,
}

impl Service {
    /// The state of a server of `opened`, its recovery done.
    pub(crate) fn new(ctx: Ctx, opened: Opened, name: &'static str) -> Service {
        let newest = opened.threads.last_cursor().unwrap_or(0);
        Service {
            ctx,
            opened,
            diffs: Mutex::default(),
            fork_roots: Mutex::default(),
            recovering: Mutex::new(None),
            news: tokio::sync::watch::channel(newest).0,
            keys: Mutex::default(),
            name,
        }
    }

    /// `BUSY` naming what startup recovery is finishing, while it runs: for every call that
    /// changes files (or plans to).
    pub(crate) fn ready(&self) -> Result<()> {
        match lock(&self.recovering).as_ref() {
            None => Ok(()),
            Some(what) => Err(CliError::new(
                ErrorKind::Busy,
                format!(
                    "{} is finishing {what} that a crash interrupted before it changes any \
                     file; nothing was changed: try again in a moment",
                    self.name
                ),
            )),
        }
    }

    /// Starts the thread that wakes the feeds when the event log grows.
    pub(crate) fn start_poller(self: &Arc<Self>) {
        let service = Arc::downgrade(self);
        std::thread::spawn(move || loop {
            std::thread::sleep(POLL_EVERY);
            let Some(s) = service.upgrade() else { return };
            if let Ok(newest) = s.opened.threads.last_cursor() {
                s.news.send_if_modified(|seen| {
                    let grew = *seen != newest;
                    *seen = newest;
                    grew
                });
            }
        });
    }

    /// Finishes, on a thread of its own, the restores and rewinds a crash left unfinished,
    /// answering `BUSY` to the calls that change files until it is done. A restore that
    /// cannot finish (a later edit is in its way) keeps them refused: `cairn recover` says
    /// what is in the way.
    fn recover_in_background(self: &Arc<Self>) -> Result<()> {
        let pending: Vec<String> = self
            .opened
            .ws
            .journals()?
            .into_iter()
            .filter(|j| j.state != cairn_restore::JournalState::Done)
            .map(|j| j.id)
            .collect();
        let what = if pending.is_empty() {
            "the rewinds".to_string()
        } else {
            format!("the restore of journal {}", pending.join(", journal "))
        };
        *lock(&self.recovering) = Some(what.clone());
        let service = self.clone();
        std::thread::spawn(move || {
            let outcome = service.recover();
            let mut gate = lock(&service.recovering);
            match outcome {
                Ok(()) => *gate = None,
                Err(e) => {
                    eprintln!("{}: {what} could not finish: {}", service.name, e.line());
                    *gate = Some(format!(
                        "{what} (it could not finish: {}; run `cairn recover`, then start the \
                         server again)",
                        e.line()
                    ));
                }
            }
        });
        Ok(())
    }

    /// What `cairn recover` does: the workspace's journals, then the rewinds waiting on them.
    fn recover(&self) -> Result<()> {
        let ws = &self.opened.ws;
        let done = ws.recover()?;
        if let Some(stuck) = done.iter().find(|r| !r.completed && !r.abandoned) {
            return Err(CliError::new(
                ErrorKind::Conflict,
                format!(
                    "the restore of journal {} is obstructed by later edits",
                    stuck.journal
                ),
            ));
        }
        let rewinds = self
            .opened
            .threads
            .recover(&[ws.clone() as Arc<dyn cairn_rewind::Files>])?;
        rewinds.completed.iter().for_each(crate::agents::settle);
        Ok(())
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // What they hold is replaced whole: a panic leaves nothing half made.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The OpenAPI document's frame: what the API is and how a call is authorised.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Cairn local API",
        version = "1",
        description = "The API of `cairn serve` (and of `cairn studio`'s page): the threads of \
            a workspace and their views, snapshots, diffs, planned changes, rewinds with request \
            keys, and the event feed. Over TCP every call carries the launch's token \
            (`Authorization: Bearer …`); over the Unix socket none is needed."
    ),
    modifiers(&BearerToken),
    security(("token" = [])),
    tags(
        (name = "threads", description = "Threads, their entries, checkpoints and rewinds"),
        (name = "files", description = "Snapshots and diffs"),
        (name = "changes", description = "Rewinds and planned changes"),
        (name = "events", description = "The event log and its feed"),
    )
)]
struct ApiDoc;

/// Adds the bearer token's security scheme.
struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The API's routes, one module per concern, with the OpenAPI document they make.
pub(crate) fn api() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(browse::routes())
        .merge(view::routes())
        .merge(rewind::routes())
        .merge(plans::routes())
        .merge(feed::routes())
        .merge(inbox::routes())
}

/// The OpenAPI document of [`api`], as pretty JSON with a final newline.
pub(crate) fn openapi_json() -> String {
    let (_, doc) = api().split_for_parts();
    let mut text = doc
        .to_pretty_json()
        .expect("an OpenAPI document always encodes");
    text.push('\n');
    text
}

/// The `/v1` routes on `service`, with `/v1/openapi.json`.
pub(crate) fn v1<S: Clone + Send + Sync + 'static>(service: Arc<Service>) -> Router<S> {
    let (router, _) = api().split_for_parts();
    let doc = openapi_json();
    router
        .route(
            "/v1/openapi.json",
            axum::routing::get(move || async move {
                ([(header::CONTENT_TYPE, "application/json")], doc)
            }),
        )
        .with_state(service)
}

/// A random token of 128 bits, in hex.
pub(crate) fn new_token() -> Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| {
            CliError::new(
                ErrorKind::of_io(&e),
                format!("cannot read /dev/urandom for a token: {e}"),
            )
        })?;
    Ok(hex::encode(bytes))
}

/// Compares two secrets in time that depends on their lengths only.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Where `cairn serve` listens.
pub(crate) enum Listen {
    /// `127.0.0.1` on this port (0: any free one), with a token.
    Loopback(u16),
    /// A Unix socket at this path, its owner's only.
    Socket(PathBuf),
}

/// `cairn serve`: serves the API until the process is stopped; `--openapi` prints the
/// document instead.
pub(crate) fn serve(ctx: &Ctx, listen: Listen, openapi: bool) -> Result<()> {
    if openapi {
        print!("{}", openapi_json());
        return Ok(());
    }
    let ws = Arc::new(ctx.open_workspace_with(false, false)?);
    let opened = crate::threads::open_on(ctx, ws, false)?;
    let service = Arc::new(Service::new(ctx.clone(), opened, "cairn serve"));
    // The gate is closed before the first connection is taken.
    service.recover_in_background()?;
    service.start_poller();
    let runtime = runtime().map_err(io_error)?;
    let stop = Stop::catch(&runtime);
    let served = match listen {
        Listen::Loopback(port) => {
            let listener =
                std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
                    .map_err(|e| bind_error(e, &format!("127.0.0.1:{port}")))?;
            let port = listener.local_addr().map_err(io_error)?.port();
            let token = new_token()?;
            announce(&serde_json::json!({
                "url": format!("http://127.0.0.1:{port}"),
                "token": token,
            }));
            eprintln!(
                "cairn serve: serving {} on 127.0.0.1:{port} (the token is on stdout); stop with Ctrl-C",
                ctx.root.display()
            );
            listener.set_nonblocking(true).map_err(io_error)?;
            let gate = Arc::new(Gate {
                token,
                hosts: vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")],
            });
            let app =
                v1::<()>(service).layer(axum::middleware::from_fn_with_state(gate, require_token));
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).map_err(io_error)?;
                tokio::select! {
                    served = axum::serve(listener, app) => served.map_err(io_error),
                    () = stop.requested() => Ok(()),
                }
            })
        }
        Listen::Socket(path) => {
            let listener = bind_private_socket(&path)?;
            announce(&serde_json::json!({ "socket": path }));
            eprintln!(
                "cairn serve: serving {} on {} (yours only); stop with Ctrl-C",
                ctx.root.display(),
                path.display()
            );
            let app = v1::<()>(service);
            let served = runtime.block_on(async move {
                let listener = tokio::net::UnixListener::from_std(listener).map_err(io_error)?;
                tokio::select! {
                    served = axum::serve(listener, app) => served.map_err(io_error),
                    () = stop.requested() => Ok(()),
                }
            });
            let _ = std::fs::remove_file(&path);
            served
        }
    };
    runtime.shutdown_background();
    served
}

/// The first line on stdout, for the program that started the server.
fn announce(line: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Binds a Unix socket at `path` that only its owner can connect to: made under umask 0177
/// (never another mode, not even for an instant), then checked. A socket left by a server
/// that is gone is replaced; one a server answers on is `BUSY`.
fn bind_private_socket(path: &Path) -> Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let live = std::os::unix::net::UnixStream::connect(path).is_ok();
        if !meta.file_type().is_socket() || live {
            return Err(CliError::new(
                ErrorKind::Busy,
                format!(
                    "{} is taken ({}); choose another --socket",
                    path.display(),
                    if live {
                        "a server answers on it"
                    } else {
                        "it is not a socket"
                    }
                ),
            )
            .with_path(path));
        }
        std::fs::remove_file(path).map_err(io_error)?;
    }
    let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o177));
    let bound = std::os::unix::net::UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(|e| bind_error(e, &path.display().to_string()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(io_error)?;
    listener.set_nonblocking(true).map_err(io_error)?;
    Ok(listener)
}

/// A listener that could not be made: `BUSY` when the address is taken.
pub(crate) fn bind_error(e: std::io::Error, at: &str) -> CliError {
    CliError::new(
        if e.kind() == std::io::ErrorKind::AddrInUse {
            ErrorKind::Busy
        } else {
            ErrorKind::of_io(&e)
        },
        format!("cannot listen on {at}: {e}; choose another --port (or --socket)"),
    )
}

/// The runtime a server runs in (two worker threads: it serves one user).
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// SIGINT (Ctrl-C) and SIGTERM, the signals that stop a server.
pub(crate) struct Stop(Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>);

impl Stop {
    /// Catches SIGINT and SIGTERM from now on, in `runtime`: made before the server says where
    /// it listens, so a stop asked for as soon as it did still ends it cleanly (its socket or
    /// page file removed), not by the signal's default action.
    pub(crate) fn catch(runtime: &tokio::runtime::Runtime) -> Stop {
        use tokio::signal::unix::{signal, SignalKind};
        let _in = runtime.enter();
        match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Stop(Some((int, term))),
            _ => Stop(None),
        }
    }

    /// Waits for either signal (for ever where they could not be caught).
    pub(crate) async fn requested(self) {
        let Some((mut int, mut term)) = self.0 else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}

pub(crate) fn io_error(e: std::io::Error) -> CliError {
    CliError::new(ErrorKind::of_io(&e), format!("the server: {e}"))
}

/// What a call over TCP must show.
struct Gate {
    token: String,
    /// The `host:port` forms this server answers to.
    hosts: Vec<String>,
}

/// A refusal of the security checks: `DENIED`, with what was wrong.
pub(crate) fn refused(status: StatusCode, message: impl Into<String>) -> Response {
    let mut r = ApiError(CliError::new(ErrorKind::Denied, message)).into_response();
    *r.status_mut() = status;
    r
}

/// Refuses a call over TCP without the launch's token, or naming another host (a page of
/// another site whose name was rebound to 127.0.0.1), or sent by a browser page (`Origin`).
async fn require_token(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !gate.hosts.iter().any(|h| h == host) {
        return refused(
            StatusCode::FORBIDDEN,
            format!(
                "refused: the request names host '{host}', not this server ({})",
                gate.hosts[0]
            ),
        );
    }
    if req.headers().contains_key(header::ORIGIN) {
        return refused(
            StatusCode::FORBIDDEN,
            "refused: a browser page may not call `cairn serve` (use `cairn studio`)",
        );
    }
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !bearer.is_some_and(|b| same_secret(b.as_bytes(), gate.token.as_bytes())) {
        return refused(
            StatusCode::UNAUTHORIZED,
            "refused: this call does not carry the token `cairn serve` printed \
             (Authorization: Bearer TOKEN)",
        );
    }
    next.run(req).await
}

#[cfg(test)]
mod tests;
