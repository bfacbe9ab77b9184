//! `cairn studio`: a local web page for the workspace's threads, checkpoints, diffs and
//! rewinds (issue 22).
//!
//! An axum server on a tokio runtime, bound to `127.0.0.1` only, serving a page whose HTML,
//! CSS and JavaScript are compiled into the binary, and the API of `cairn serve` under `/v1/`
//! (the page is one of its clients, issue 59; see [`crate::serve`]):
//!
//! - every request must name this server by its loopback address in `Host` (and in `Origin`
//!   when the browser sends one), so a page of another site that rebinds its name to
//!   127.0.0.1 is refused (DNS rebinding);
//! - every API call must carry the per-launch token or a page's session secret
//!   (`Authorization: Bearer …`, or `?token=` for the event stream, which a browser cannot
//!   give headers); a page gets its session for the one-time code of the owner-only file the
//!   browser is opened on, so no secret is in any process's arguments (see [`login`]);
//! - a change (rewind, restore, fork) is planned first (`/v1/plans`, a dry run) and applied
//!   only by `/v1/plans/apply` naming the plan's digest: the server plans again, and refuses
//!   with `CONFLICT` unless the plan it would carry out is the one the page showed.
//!
//! The operations call the same library code as `cairn rewind`, `cairn restore` and
//! `cairn fork`. Live updates come from the thread database's event log, sent to every page
//! by the feed (`/v1/events`).

mod login;

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::serve::{new_token, refused, same_secret, Service, Stop};
use crate::threads::Opened;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use cairn_store::ErrorKind;
use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

/// What every request handler shares.
pub(crate) struct Studio {
    /// The API's state (the workspace, its thread database, ...).
    pub(crate) service: Arc<Service>,
    /// The per-launch token for scripts (`Authorization: Bearer`), printed on stdout only.
    token: String,
    /// The pages' sessions and the page file's one-time code.
    logins: Mutex<login::Logins>,
    /// The `host:port` forms this server answers to.
    hosts: Vec<String>,
    /// The `Origin`s this server's page has.
    origins: Vec<String>,
}

impl std::ops::Deref for Studio {
    type Target = Service;
    fn deref(&self) -> &Service {
        &self.service
    }
}

impl Studio {
    /// The state of a server on `port` with `token`.
    pub(crate) fn new(ctx: Ctx, opened: Opened, port: u16, token: String) -> Studio {
        let hosts = vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")];
        let origins = hosts.iter().map(|h| format!("http://{h}")).collect();
        Studio {
            service: Arc::new(Service::new(ctx, opened, "cairn studio")),
            token,
            logins: Mutex::default(),
            hosts,
            origins,
        }
    }
}

/// `cairn studio`: serves the page until the process is stopped.
pub(crate) fn studio(ctx: &Ctx, port: u16, no_open: bool) -> Result<()> {
    let opened = crate::threads::open(ctx, false)?;
    let listener = std::net::TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .map_err(|e| crate::serve::bind_error(e, &format!("127.0.0.1:{port}")))?;
    let port = listener.local_addr().map_err(io_error)?.port();
    let token = new_token()?;
    let url = format!("http://127.0.0.1:{port}/?token={token}");
    let studio = Arc::new(Studio::new(ctx.clone(), opened, port, token));
    let runtime = crate::serve::runtime().map_err(io_error)?;
    let stop = Stop::catch(&runtime);
    {
        // The URL is the first line on stdout, whatever else is printed: scripts read it. It
        // goes to the owner only: never to a browser's command line (issue 53).
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{url}");
        let _ = out.flush();
    }
    eprintln!(
        "cairn studio: serving {} on 127.0.0.1:{port}; stop with Ctrl-C",
        ctx.root.display()
    );
    if !no_open {
        open_browser(&studio, port);
    }
    listener.set_nonblocking(true).map_err(io_error)?;
    studio.service.start_poller();
    let app = router(studio.clone());
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).map_err(io_error)?;
        tokio::select! {
            served = axum::serve(listener, app) => served.map_err(io_error),
            () = stop.requested() => Ok(()),
        }
    });
    // The page file goes with the server, used or not.
    studio.drop_code(None);
    runtime.shutdown_background();
    served
}

fn io_error(e: std::io::Error) -> CliError {
    CliError::new(ErrorKind::of_io(&e), format!("the studio's server: {e}"))
}

/// Asks the desktop to open the page: on an owner-only page file holding a one-time code, not
/// on the URL, which its command line would show every local user (issue 53). A machine
/// without a desktop only gets a note.
fn open_browser(studio: &Arc<Studio>, port: u16) {
    let code = match new_token() {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "cairn studio: no browser opened ({}); open the URL above",
                e.line()
            );
            return;
        }
    };
    let (dir, page) = match login::write_page_file(port, &code) {
        Ok(written) => written,
        Err(e) => {
            eprintln!(
                "cairn studio: no browser opened: cannot write the page file for it ({e}); \
                 open the URL above"
            );
            return;
        }
    };
    let until = std::time::Instant::now() + login::CODE_LIFETIME;
    studio.set_code(code, until, Some(dir));
    let expire = studio.clone();
    std::thread::spawn(move || {
        std::thread::sleep(login::CODE_LIFETIME);
        expire.drop_code(Some(std::time::Instant::now()));
    });
    let opened = std::process::Command::new("xdg-open")
        .arg(&page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match opened {
        Ok(mut child) => {
            eprintln!(
                "cairn studio: opened a browser on {} (yours only; good once, for {} s); if no \
                 page shows, open the URL above",
                page.display(),
                login::CODE_LIFETIME.as_secs()
            );
            std::thread::spawn(move || child.wait());
        }
        Err(_) => {
            studio.drop_code(None);
            eprintln!("cairn studio: no browser could be opened (xdg-open); open the URL above");
        }
    }
}

/// The server's routes: the page, its assets, and the API behind the token.
pub(crate) fn router(studio: Arc<Studio>) -> Router {
    let api = crate::serve::v1(studio.service.clone())
        .route_layer(axum::middleware::from_fn_with_state(
            studio.clone(),
            require_token,
        ))
        .route("/api/session", post(login::open_session));
    Router::new()
        .route("/", get(index))
        .route("/app.js", get(app_js))
        .route("/style.css", get(style_css))
        .merge(api)
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            studio.clone(),
            require_loopback,
        ))
        .with_state(studio)
}

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const STYLE_CSS: &str = include_str!("assets/style.css");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = Response::new(Body::from(body));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // The page runs only its own script and talks only to this server.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    r
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

async fn style_css() -> Response {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

async fn not_found() -> Response {
    crate::serve::ApiError(CliError::new(
        ErrorKind::NotFound,
        "no such page or API call",
    ))
    .into_response()
}

/// Refuses a request whose `Host`, or `Origin` when it has one, is not this server's loopback
/// address: a page of another site whose name was rebound to 127.0.0.1 has its own name there.
async fn require_loopback(State(studio): State<Arc<Studio>>, req: Request, next: Next) -> Response {
    if let Err(why) = check_loopback(&studio, req.headers(), is_page_navigation(&req)) {
        return refused(StatusCode::FORBIDDEN, why);
    }
    next.run(req).await
}

/// A browser loading the page itself as a document (`GET /`): from the page file this is a
/// navigation a browser marks cross-site (its origin is a file), and the page holds no secret
/// (nor may it be framed: `frame-ancestors 'none'`).
fn is_page_navigation(req: &Request) -> bool {
    let fetch = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok());
    req.method() == axum::http::Method::GET
        && req.uri().path() == "/"
        && fetch("sec-fetch-mode") == Some("navigate")
        && fetch("sec-fetch-dest") == Some("document")
}

fn check_loopback(
    studio: &Studio,
    headers: &HeaderMap,
    page_navigation: bool,
) -> std::result::Result<(), String> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !studio.hosts.iter().any(|h| h == host) {
        return Err(format!(
            "refused: the request names host '{host}', not this server ({}); \
             open the URL `cairn studio` printed",
            studio.hosts[0]
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        if !studio.origins.iter().any(|o| o == origin) {
            return Err(format!(
                "refused: a page of another origin ('{origin}') may not call this server"
            ));
        }
    }
    // Fetch metadata, where the browser sends it: only this page's own requests (and the
    // page itself, however it was reached).
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if site != "same-origin" && site != "none" && !page_navigation {
            return Err(format!(
                "refused: a request from another site (sec-fetch-site: {site})"
            ));
        }
    }
    Ok(())
}

/// Refuses an API call without this launch's token or a session of its pages.
async fn require_token(State(studio): State<Arc<Studio>>, req: Request, next: Next) -> Response {
    if !given_secret(&req).is_some_and(|given| studio.admits(&given)) {
        return refused(
            StatusCode::UNAUTHORIZED,
            "refused: this API call does not carry the token of this studio or a session of \
             its page; open the URL `cairn studio` printed",
        );
    }
    next.run(req).await
}

/// The secret a request carries: its bearer, or else its `token=`.
fn given_secret(req: &Request) -> Option<String> {
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let query = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_string)
    });
    bearer.map(str::to_string).or(query)
}

#[cfg(test)]
mod tests;
