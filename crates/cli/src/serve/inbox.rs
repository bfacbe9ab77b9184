//! `/v1/threads/{id}/inbox`: a thread's inbox of queued prompts (issue 59). A prompt is queued
//! with its admission key and delivered at the thread's next safe boundary (no run of the
//! thread running or paused, no tool call of its runs open) with the checkpoint of the files
//! taken then; a rewind of the thread cancels the prompts still queued, and their old keys
//! answer with the cancelled admission.

use super::error::{blocking, ApiError, ApiResult, ErrorBody};
use super::plans::body;
use super::Service;
use crate::inbox::{deliver_on, enqueue_on, inbox_on, AdmissionJson, DeliveryJson};
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The routes of this part.
pub(crate) fn routes() -> OpenApiRouter<Arc<Service>> {
    OpenApiRouter::new()
        .routes(routes!(inbox, queue))
        .routes(routes!(deliver))
}

/// A prompt to queue.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueRequest {
    /// Its admission key: the same key is the same prompt, never sent twice.
    key: String,
    /// The prompt's text.
    text: String,
    /// Its metadata (a JSON object), kept on the entry it becomes.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Value>,
}

/// The thread's inbox: queued, delivered and cancelled prompts, oldest first.
#[utoipa::path(get, path = "/v1/threads/{id}/inbox", operation_id = "inbox", tag = "threads",
    params(("id" = String, Path, description = "The thread's id (or a name a rewind gave it)")),
    responses((status = 200, body = Vec<AdmissionJson>), (status = 404, body = ErrorBody)))]
pub(crate) async fn inbox(
    State(service): State<Arc<Service>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Vec<AdmissionJson>> {
    blocking(service, move |s| inbox_on(&s.opened, &id)).await
}

/// Queues a prompt, delivered at the thread's next safe boundary. A key seen before answers
/// with its admission as it is now (`repeated`: queued, delivered, or cancelled by a rewind)
/// and queues nothing.
#[utoipa::path(post, path = "/v1/threads/{id}/inbox", operation_id = "queue", tag = "threads",
    params(("id" = String, Path, description = "The thread's id (or a name a rewind gave it)")),
    request_body = QueueRequest,
    responses(
        (status = 201, description = "Queued", body = AdmissionJson),
        (status = 200, description = "The key's earlier admission", body = AdmissionJson),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "THREAD_BUSY: a rewind holds the thread", body = ErrorBody)))]
pub(crate) async fn queue(
    State(service): State<Arc<Service>>,
    UrlPath(id): UrlPath<String>,
    bytes: Bytes,
) -> std::result::Result<Response, ApiError> {
    let req: QueueRequest = body(&bytes)?;
    let Json(a) = blocking(service, move |s| {
        enqueue_on(&s.opened, &id, &req.key, &req.text, req.metadata.clone())
    })
    .await?;
    let status = if a.repeated {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(a)).into_response())
}

/// Delivers the oldest queued prompt if the thread is at a safe boundary, with the checkpoint
/// of the files taken then; otherwise `waiting` says what is under way.
#[utoipa::path(post, path = "/v1/threads/{id}/inbox/deliver", operation_id = "deliver",
    tag = "threads",
    params(("id" = String, Path, description = "The thread's id (or a name a rewind gave it)")),
    responses((status = 200, body = DeliveryJson), (status = 404, body = ErrorBody),
        (status = 409, description = "BUSY (startup recovery) or THREAD_BUSY", body = ErrorBody),
        (status = 500, description = "The checkpoint failed: the prompt stays queued", body = ErrorBody)))]
pub(crate) async fn deliver(
    State(service): State<Arc<Service>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<DeliveryJson> {
    blocking(service, move |s| {
        // A checkpoint taken mid-recovery would hold half-restored files.
        s.ready()?;
        deliver_on(&s.opened, &id)
    })
    .await
}
