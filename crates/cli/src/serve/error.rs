//! The API's errors: a status and `{"error": {kind, code, message, meaning, path}}`, and the
//! way a handler runs blocking library code.

use super::Service;
use crate::error::CliError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cairn_store::ErrorKind;
use serde::Serialize;
use std::sync::Arc;

/// The body of every refusal and failure.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    /// What went wrong.
    pub(crate) error: ErrorDetail,
}

/// What went wrong, in the words of the CLI's error lines.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// The kind (`BUSY`, `CONFLICT`, `NOT_FOUND`, `VALIDATION`, ...; `USAGE` for a request
    /// not understood).
    pub(crate) kind: String,
    /// The kind's exit code, as `cairn` exits with it.
    pub(crate) code: Option<u32>,
    /// What happened and what to do.
    pub(crate) message: String,
    /// What the kind means, for people.
    pub(crate) meaning: String,
    /// The path concerned, when there is one.
    pub(crate) path: Option<String>,
}

/// An error as the API answers it: a status and `{"error": {kind, code, message, meaning,
/// path}}`, `meaning` saying for people what the kind means.
#[derive(Debug)]
pub(crate) struct ApiError(pub(crate) CliError);

impl<E: Into<CliError>> From<E> for ApiError {
    fn from(e: E) -> Self {
        ApiError(e.into())
    }
}

/// What an error kind means for someone looking at the page.
pub(crate) fn meaning(kind: Option<ErrorKind>) -> &'static str {
    match kind {
        None => "The request was not understood.",
        Some(ErrorKind::Busy) => {
            "BUSY: something holds the workspace or its store right now (a snapshot, restore \
             or command in another process). Nothing was changed; try again when it is done."
        }
        Some(ErrorKind::WorkspaceBusy) => {
            "WORKSPACE_BUSY: a run or hold in an overlapping workspace refuses a restore. \
             Nothing was changed; wait for it to end."
        }
        Some(ErrorKind::ThreadBusy) => {
            "THREAD_BUSY: a run of this thread is going on (an agent is working in it). \
             Nothing was changed; wait for the run to end, or stop it, then try again."
        }
        Some(ErrorKind::Denied) => {
            "DENIED: Cairn refused, because it would lose data or cross a permission \
             boundary. Nothing was changed."
        }
        Some(ErrorKind::Conflict) => {
            "CONFLICT: someone else's change is in the way: the files or the thread changed \
             since the plan was shown. Nothing was changed; look at the new plan."
        }
        Some(ErrorKind::NotFound) => "NOT_FOUND: no such thread, entry or snapshot.",
        Some(ErrorKind::Validation) => {
            "VALIDATION: well formed, but not allowed now (the rewind rules)."
        }
        Some(ErrorKind::InvalidArgument) => "INVALID_ARGUMENT: a malformed id or value.",
        Some(ErrorKind::Corrupt) => {
            "CORRUPT: stored data is damaged; `cairn verify` shows what is affected."
        }
        Some(ErrorKind::Io) => "IO: the operating system failed a read or write.",
        Some(_) => "The operation failed.",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = self.0;
        let status = match e.kind {
            None | Some(ErrorKind::InvalidArgument) => StatusCode::BAD_REQUEST,
            Some(ErrorKind::NotFound) => StatusCode::NOT_FOUND,
            Some(ErrorKind::Validation) => StatusCode::UNPROCESSABLE_ENTITY,
            Some(
                ErrorKind::Busy
                | ErrorKind::WorkspaceBusy
                | ErrorKind::ThreadBusy
                | ErrorKind::Conflict,
            ) => StatusCode::CONFLICT,
            Some(ErrorKind::Denied) => StatusCode::FORBIDDEN,
            Some(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let body = ErrorBody {
            error: ErrorDetail {
                kind: e.kind.map(|k| k.name()).unwrap_or("USAGE").to_string(),
                code: e.kind.map(|k| k.code()),
                message: e.line(),
                meaning: meaning(e.kind).to_string(),
                path: e.path.as_ref().map(|p| p.display().to_string()),
            },
        };
        (status, Json(body)).into_response()
    }
}

/// The API's result type.
pub(crate) type ApiResult<T> = std::result::Result<Json<T>, ApiError>;

/// Runs `f` on a thread that may block (the store, the database, the file system).
pub(crate) async fn blocking<T: Send + 'static>(
    service: Arc<Service>,
    f: impl FnOnce(&Service) -> crate::error::Result<T> + Send + 'static,
) -> ApiResult<T> {
    match tokio::task::spawn_blocking(move || f(&service)).await {
        Ok(r) => r.map(Json).map_err(ApiError),
        Err(_) => Err(ApiError(CliError::new(
            ErrorKind::Panic,
            "the server stopped on an internal error",
        ))),
    }
}
