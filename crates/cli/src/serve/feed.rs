//! The event log over HTTP (issue 59): `GET /v1/events`, a feed of server-sent events, and
//! `GET /v1/events/log`, a page of it as JSON.
//!
//! Every event is sent with its cursor as its SSE id. The feed starts after the cursor in
//! `Last-Event-ID` (what a browser's `EventSource` sends when it reconnects), else after
//! `?cursor=`, else at the newest event; it reads the log itself from there, in order, so a
//! client that reconnects with its last cursor misses nothing and sees nothing twice. The
//! log is the thread database's, which every process sharing it writes: the feed carries the
//! rewinds and checkpoints of every client.

use super::error::{blocking, ApiError, ApiResult, ErrorBody};
use super::Service;
use crate::error::CliError;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use cairn_store::ErrorKind;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// How many events one read of the log takes.
const READ_AT_ONCE: usize = 500;

/// The routes of this part.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(events))
        .routes(routes!(log))
}

/// An event of the log.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub(crate) struct EventJson {
    /// Its cursor: read on after it.
    cursor: i64,
    /// The thread concerned.
    thread_id: Option<String>,
    /// `thread_created`, `entry_appended`, `checkpoint_created`, `rewind_started`,
    /// `rewind_completed`, `rewind_failed`, `fork_created`, `restore_applied`, ...
    kind: String,
    /// The details (ids).
    #[schema(value_type = Object)]
    data: serde_json::Value,
    /// When (ms since the Unix epoch).
    created_ms: i64,
}

impl From<cairn_rewind::Event> for EventJson {
    fn from(e: cairn_rewind::Event) -> EventJson {
        let kind = match serde_json::to_value(e.kind) {
            Ok(serde_json::Value::String(k)) => k,
            _ => format!("{:?}", e.kind),
        };
        EventJson {
            cursor: e.cursor,
            thread_id: e.thread_id.map(|t| t.to_string()),
            kind,
            data: e.data,
            created_ms: e.created_ms,
        }
    }
}

/// Where to read from.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct FeedQuery {
    /// Only the events after this cursor (0: from the start). The feed: `Last-Event-ID`
    /// wins; neither: from the newest event on.
    cursor: Option<i64>,
    /// Only this thread's events.
    thread: Option<String>,
    /// The log: at most this many (default and most 500).
    limit: Option<usize>,
}

/// A page of the log.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LogPage {
    /// The events, oldest first.
    events: Vec<EventJson>,
    /// The cursor to read on from (the last event's, or the one given).
    cursor: i64,
}

/// A page of the event log after a cursor, as JSON.
#[utoipa::path(get, path = "/v1/events/log", operation_id = "event_log", tag = "events",
    params(FeedQuery),
    responses((status = 200, body = LogPage), (status = 400, body = ErrorBody)))]
pub(crate) async fn log(
    State(service): State<Arc<Service>>,
    Query(q): Query<FeedQuery>,
) -> ApiResult<LogPage> {
    blocking(service, move |s| {
        let cursor = q.cursor.unwrap_or(0);
        let limit = q.limit.unwrap_or(READ_AT_ONCE).clamp(1, READ_AT_ONCE);
        let threads = &s.opened.threads;
        let list = match &q.thread {
            Some(t) => {
                threads.thread_events_since(&cairn_rewind::ThreadId::new(t), cursor, limit)?
            }
            None => threads.events_since(cursor, limit)?,
        };
        Ok(LogPage {
            cursor: list.last().map_or(cursor, |e| e.cursor),
            events: list.into_iter().map(EventJson::from).collect(),
        })
    })
    .await
}

/// Where a feed stands.
struct Feed {
    service: Arc<Service>,
    cursor: i64,
    thread: Option<cairn_rewind::ThreadId>,
    read: VecDeque<cairn_rewind::Event>,
    news: tokio::sync::watch::Receiver<i64>,
    /// The first event (`ready`), not yet sent.
    ready: bool,
}

/// The feed of the event log: `ready` first (its data `{"cursor": N}`, where it starts), then
/// every event after it as `event: cairn`, `id: CURSOR`, `data: EVENT`.
#[utoipa::path(get, path = "/v1/events", operation_id = "event_feed", tag = "events",
    params(FeedQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "The last cursor seen: the feed goes on after it")),
    responses((status = 200, content_type = "text/event-stream",
        description = "Server-sent events, each event's data an `EventJson`", body = String),
        (status = 400, body = ErrorBody)))]
pub(crate) async fn events(
    State(service): State<Arc<Service>>,
    headers: HeaderMap,
    Query(q): Query<FeedQuery>,
) -> Result<Sse<impl futures_util::Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let given = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| {
                    CliError::new(
                        ErrorKind::InvalidArgument,
                        "Last-Event-ID: the cursor of the last event seen (a number)",
                    )
                })?,
        ),
        None => q.cursor,
    };
    let cursor = match given {
        Some(c) => c,
        None => {
            blocking(service.clone(), |s| Ok(s.opened.threads.last_cursor()?))
                .await?
                .0
        }
    };
    let feed = Feed {
        news: service.news.subscribe(),
        service,
        cursor,
        thread: q.thread.map(cairn_rewind::ThreadId::new),
        read: VecDeque::new(),
        ready: true,
    };
    let stream = futures_util::stream::unfold(feed, |mut f| async move {
        if f.ready {
            f.ready = false;
            let data = serde_json::json!({ "cursor": f.cursor }).to_string();
            return Some((Ok(SseEvent::default().event("ready").data(data)), f));
        }
        loop {
            if let Some(e) = f.read.pop_front() {
                f.cursor = e.cursor;
                if f.thread
                    .as_ref()
                    .is_some_and(|t| e.thread_id.as_ref() != Some(t))
                {
                    continue;
                }
                let id = e.cursor.to_string();
                let data = serde_json::to_string(&EventJson::from(e)).unwrap_or_default();
                return Some((Ok(SseEvent::default().event("cairn").id(id).data(data)), f));
            }
            let (service, cursor) = (f.service.clone(), f.cursor);
            let read = tokio::task::spawn_blocking(move || {
                service.opened.threads.events_since(cursor, READ_AT_ONCE)
            })
            .await;
            match read {
                Ok(Ok(list)) if !list.is_empty() => {
                    f.read.extend(list);
                    continue;
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    // Said once, then read again after a pause: the cursor has not moved.
                    let data = serde_json::json!({ "error": CliError::from(e).line() });
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    return Some((
                        Ok(SseEvent::default().event("error").data(data.to_string())),
                        f,
                    ));
                }
                Err(_) => return None,
            }
            // Nothing new: wait for the poller (or look again in a second).
            let _ = tokio::time::timeout(Duration::from_secs(1), f.news.changed()).await;
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
