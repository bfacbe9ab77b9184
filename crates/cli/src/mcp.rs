//! `cairn mcp`: the workspace's checkpoints and threads as tools of a Model Context Protocol
//! server on stdin/stdout, built on the official Rust SDK (`rmcp`).
//!
//! Every tool runs the command it is named after, with a context that captures what the
//! command reports instead of printing it ([`Ctx::capture`]): the structured content of a
//! result is the command's `--json` document, field for field, and its text content is what
//! the command prints for people. A command's error is a tool result with `isError` and the
//! document `--json` prints on stderr (`{"error": {kind, code, exit_code, message, path}}`), so
//! the server goes on answering. Nothing but the protocol is written on stdout.

use crate::args::{RewindArgs, SnapshotArgs};
use crate::ctx::{Capture, Ctx};
use crate::error::{CliError, Result};
use crate::{files, threads};
use cairn_store::ErrorKind;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::{Arc, Mutex, PoisonError};

/// What the server tells the agent about itself when it connects.
const INSTRUCTIONS: &str = "Cairn keeps checkpoints of this workspace's files outside it, where \
     cleaning the tree cannot reach them. Take a `checkpoint` before a risky change; `diff` shows \
     what changed since one; `restore` puts the files back as one holds them (always with \
     dry_run: true first, to see the plan). `list_threads`, `thread_log` and `rewind` work on \
     conversations kept in Cairn, whose user messages carry checkpoints.";

/// The arguments of `checkpoint`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct CheckpointArgs {
    /// A label for people; `restore` and `diff` find the newest checkpoint with it.
    #[serde(default)]
    label: Option<String>,
}

/// The arguments of `diff`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct DiffArgs {
    /// The older checkpoint: its id, a unique prefix of 4+ hex digits, or its label.
    from: String,
    /// The newer checkpoint (default: the files as they are now).
    #[serde(default)]
    to: Option<String>,
    /// Add the unified diff of each changed text file (binary files are marked as such).
    #[serde(default)]
    patch: Option<bool>,
    /// Name for each changed path the checkpoint interval it changed in and the tool call
    /// (tool_use_id, tool_name) or subagent (agent_id) whose checkpoint opened it.
    #[serde(default)]
    attribute: Option<bool>,
}

/// The arguments of `restore`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RestoreArgs {
    /// The checkpoint: its id, a unique prefix of 4+ hex digits, or its label.
    snapshot: String,
    /// true: only the plan (restored, deleted, kept), nothing changed. false: do it.
    dry_run: bool,
    /// Restore only these files and directories (relative to the workspace root); every other
    /// path is left as it is. Default: the whole workspace.
    #[serde(default)]
    paths: Vec<String>,
    /// What to do with files edited since the workspace's newest checkpoint by someone else
    /// (listed as `drifted`): "refuse" the restore, "keep" them, or "overwrite" them. Default:
    /// no check.
    #[serde(default)]
    on_drift: Option<DriftChoice>,
}

/// What a restore does with files someone else edited since the newest checkpoint.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DriftChoice {
    /// Refuse the whole restore, naming them.
    Refuse,
    /// Leave them as they are.
    Keep,
    /// Restore them too (the safety snapshot keeps them).
    Overwrite,
}

impl DriftChoice {
    fn arg(self) -> crate::args::OnDrift {
        match self {
            DriftChoice::Refuse => crate::args::OnDrift::Refuse,
            DriftChoice::Keep => crate::args::OnDrift::Keep,
            DriftChoice::Overwrite => crate::args::OnDrift::Overwrite,
        }
    }
}

/// The arguments of `rewind`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RewindToolArgs {
    /// The thread.
    thread: String,
    /// The entry to rewind to: its id or a unique prefix (4+ characters, `e_` optional).
    entry: String,
    /// Also put the files back as they were at that entry (default: the conversation only).
    #[serde(default)]
    files: Option<bool>,
    /// true: only the plan, nothing changed. false: do it.
    dry_run: bool,
    /// With files: restore only these files and directories (relative to the workspace root).
    #[serde(default)]
    paths: Vec<String>,
    /// With files: what to do with files edited since the thread's newest checkpoint by someone
    /// else: "refuse" (the default), "keep" or "overwrite".
    #[serde(default)]
    on_drift: Option<DriftChoice>,
    /// A request key: calling again with the same key answers the rewind it made and never
    /// runs a second one (a failed one is retried).
    #[serde(default)]
    key: Option<String>,
}

/// The arguments of `thread_log`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ThreadLogArgs {
    /// The thread.
    thread: String,
}

/// The server: the context of the `cairn mcp` invocation, which every tool call copies.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    ctx: Ctx,
    tool_router: ToolRouter<Server>,
}

#[tool_router]
impl Server {
    fn new(ctx: Ctx) -> Server {
        Server {
            ctx,
            tool_router: Self::tool_router(),
        }
    }

    /// Runs one command with a capturing context on a blocking thread, and makes its report
    /// (or its error) the tool's result.
    async fn run(
        &self,
        command: impl FnOnce(&Ctx) -> Result<()> + Send + 'static,
    ) -> CallToolResult {
        let capture: Capture = Arc::new(Mutex::new(None));
        let ctx = Ctx {
            json: true,
            interactive: false,
            progress: false,
            capture: Some(capture.clone()),
            ..self.ctx.clone()
        };
        let outcome = tokio::task::spawn_blocking(move || command(&ctx))
            .await
            .unwrap_or_else(|_| {
                Err(CliError::new(
                    ErrorKind::Panic,
                    "cairn stopped on an internal error in this tool call (printed on the server's stderr)",
                ))
            });
        let emitted = capture
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match (outcome, emitted) {
            (Ok(()), Some(e)) => {
                let mut result = CallToolResult::success(vec![ContentBlock::text(e.text)]);
                result.structured_content = Some(e.json);
                result
            }
            (Ok(()), None) => error_result(&CliError::new(
                ErrorKind::Panic,
                "the command finished without a report",
            )),
            (Err(e), _) => error_result(&e),
        }
    }

    #[tool(
        name = "checkpoint",
        description = "Take a checkpoint: a snapshot of the workspace's files as they are now, kept outside \
                       it. Returns its id, label, stats and the paths it skipped.",
        annotations(
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false
        )
    )]
    async fn checkpoint(&self, Parameters(a): Parameters<CheckpointArgs>) -> CallToolResult {
        let args = SnapshotArgs {
            label: a.label,
            exclude: Vec::new(),
            max_file_bytes: None,
            no_gitignore: false,
            refuse_hard_links: false,
        };
        self.run(move |ctx| files::snapshot(ctx, &args)).await
    }

    #[tool(
        name = "list_checkpoints",
        description = "List the workspace's checkpoints, newest last (id, label, created_ms, stats).",
        annotations(read_only_hint = true)
    )]
    async fn list_checkpoints(&self) -> CallToolResult {
        self.run(files::list).await
    }

    #[tool(
        name = "diff",
        description = "Show what changed from a checkpoint to another, or to the files as they are now: \
                       each change's path and kind (added, modified, deleted, mode_changed, type_changed), \
                       with unified patches of text files when `patch` is true.",
        annotations(read_only_hint = true)
    )]
    async fn diff(&self, Parameters(a): Parameters<DiffArgs>) -> CallToolResult {
        self.run(move |ctx| {
            files::diff(
                ctx,
                &a.from,
                a.to.as_deref(),
                a.patch.unwrap_or(false),
                a.attribute.unwrap_or(false),
            )
        })
        .await
    }

    #[tool(
        name = "restore",
        description = "Put the workspace's files back as a checkpoint holds them. DESTRUCTIVE: it \
                       overwrites and deletes files. Call it with dry_run: true first and read the plan \
                       (restored, deleted, kept); then dry_run: false does it, after a safety snapshot of \
                       the files as they were (its id is safety_snapshot_id: restoring it, with the same \
                       paths, undoes the restore). paths restores only those files and directories; \
                       on_drift decides what happens to files someone else edited since the newest \
                       checkpoint (listed as drifted).",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true
        )
    )]
    async fn restore(&self, Parameters(a): Parameters<RestoreArgs>) -> CallToolResult {
        let args = crate::args::RestoreArgs {
            snapshot: a.snapshot,
            paths: a.paths,
            dry_run: a.dry_run,
            yes: true,
            on_drift: a.on_drift.map(DriftChoice::arg),
            reference: None,
        };
        self.run(move |ctx| files::restore(ctx, &args)).await
    }

    #[tool(
        name = "rewind",
        description = "Rewind a thread to one of its entries: the later entries leave the active branch \
                       (kept on a branch of their own) and, with files: true, the files come back as they \
                       were at that entry (for a user message: as they were before it). DESTRUCTIVE with \
                       files: true (it overwrites and deletes files, after a safety snapshot). Call it with \
                       dry_run: true first and read the plan; then dry_run: false does it. With files, \
                       paths restores only those files and directories, and files someone else edited since \
                       the thread's newest checkpoint are refused unless on_drift is keep or overwrite. A key \
                       makes a retry safe: the same key answers the same rewind.",
        annotations(
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false
        )
    )]
    async fn rewind(&self, Parameters(a): Parameters<RewindToolArgs>) -> CallToolResult {
        let args = RewindArgs {
            thread: a.thread,
            entry: Some(a.entry),
            files: a.files.unwrap_or(false),
            no_memory: false,
            dry_run: a.dry_run,
            yes: true,
            force: false,
            on_drift: a.on_drift.map(DriftChoice::arg),
            paths: a.paths,
            key: a.key,
        };
        self.run(move |ctx| threads::rewind(ctx, &args)).await
    }

    #[tool(
        name = "list_threads",
        description = "List the threads (conversations kept in Cairn), oldest first.",
        annotations(read_only_hint = true)
    )]
    async fn list_threads(&self) -> CallToolResult {
        self.run(threads::list).await
    }

    #[tool(
        name = "thread_log",
        description = "Show a thread's active branch: each entry's id, kind, text, and the checkpoint taken \
                       before it (if any).",
        annotations(read_only_hint = true)
    )]
    async fn thread_log(&self, Parameters(a): Parameters<ThreadLogArgs>) -> CallToolResult {
        self.run(move |ctx| threads::log(ctx, &a.thread, false))
            .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cairn", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "{INSTRUCTIONS} The workspace: {}.",
                self.ctx.root.display()
            ))
    }
}

/// A command's error as a tool result: `isError`, the `--json` error document as structured
/// content, and `KIND: message` as text.
fn error_result(e: &CliError) -> CallToolResult {
    let kind = e.kind.map(|k| k.name()).unwrap_or("USAGE");
    let mut result =
        CallToolResult::error(vec![ContentBlock::text(format!("{kind}: {}", e.line()))]);
    result.structured_content = Some(e.json_value());
    result
}

/// `cairn mcp`: serves the tools on stdin/stdout until the client closes stdin.
pub(crate) fn serve(ctx: &Ctx) -> Result<()> {
    if !ctx.root.is_dir() {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!(
                "cannot serve {}: it is not a directory; start `cairn mcp` in the workspace or \
                 name it with -C DIR",
                ctx.root.display()
            ),
        )
        .with_path(&ctx.root));
    }
    let io = |what: &str, e: &dyn std::fmt::Display| {
        CliError::new(ErrorKind::Io, format!("cairn mcp: {what}: {e}"))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| io("cannot start the runtime", &e))?;
    let server = Server::new(ctx.clone());
    runtime.block_on(async move {
        let running = server.serve(rmcp::transport::stdio()).await.map_err(|e| {
            io(
                "the session ended before it began (no MCP client initialized it; \
                     `cairn mcp` is started by an agent, see `cairn mcp --help`)",
                &e,
            )
        })?;
        running
            .waiting()
            .await
            .map_err(|e| io("the server stopped", &e))?;
        Ok(())
    })
}
