//! `cairn-cli`: the `cairn` command. It snapshots a workspace into its store, shows and diffs
//! snapshots, restores them (planned, confirmed and undoable), keeps the store (delete, prune,
//! gc, verify, recover), keeps threads whose user messages carry checkpoints (thread new, list,
//! log, append), rewinds and forks them with their files, serves all that to agents (Claude
//! Code's hooks, `cairn hook claude-code`; an MCP server, `cairn mcp`), and tells the whole story
//! with `cairn demo`.
//!
//! Every command prints for people by default and one JSON document with `--json`; errors are
//! one line (a JSON document on stderr with `--json`) and exit with a stable code per error
//! kind: `10 + ErrorKind::code()`, `2` for usage errors (see [`error::EXIT_CODES_HELP`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod agents;
pub mod args;
mod container;
mod ctx;
mod demo;
mod doctor;
pub mod error;
mod export;
mod files;
mod home;
mod inbox;
mod mcp;
mod own_rewind;
pub mod parse;
mod patch;
mod serve;
mod studio;
mod threads;
mod trust;
mod watch;

use args::{Cli, Command, HookCommand, InitCommand, StoreCommand, ThreadCommand, WorkspaceCommand};
use clap::Parser;
use ctx::Ctx;
use error::{CliError, Result};

/// Runs the command line of this process and returns the exit code.
pub fn run() -> i32 {
    // Large blocks (a plan, a map of a restore's records) are mapped on their own and go back
    // to the system when freed, rather than raise the heap's threshold and stay: a full
    // restore of test262's 57k files peaked at 64 MiB resident with glibc's sliding threshold,
    // 56 MiB with it fixed, no slower (issue 56).
    cairn_store::fix_mmap_threshold(128 * 1024);
    // A hook must never block its agent: whatever fails, it exits with the agent's
    // non-blocking code (Claude Code blocks the prompt or the tool on 2, the usage code).
    let is_hook = std::env::args_os()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w[0] == "hook" && w[1] == "claude-code");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` and `--version` print as for any command.
        Err(e)
            if is_hook
                && !matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                ) =>
        {
            eprintln!(
                "cairn hook: {}",
                e.to_string().lines().next().unwrap_or("bad arguments")
            );
            return agents::HOOK_FAILED;
        }
        Err(e) => return clap_error(e),
    };
    let json = cli.json;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(cli)))
        .unwrap_or_else(|_| {
            Err(CliError::new(
                cairn_store::ErrorKind::Panic,
                "cairn stopped on an internal error (printed above)",
            ))
        });
    match outcome {
        Ok(()) => 0,
        Err(e) if is_hook => {
            eprintln!(
                "cairn hook: {} (the agent goes on; no checkpoint was taken)",
                e.line()
            );
            agents::HOOK_FAILED
        }
        Err(e) => {
            if json {
                eprintln!("{}", e.json());
            } else {
                eprintln!("cairn: error: {}", e.line());
            }
            e.exit_code()
        }
    }
}

/// Reports a parse error: clap's own text, or a JSON document when `--json` was given.
fn clap_error(e: clap::Error) -> i32 {
    use clap::error::ErrorKind as K;
    let informational = matches!(e.kind(), K::DisplayHelp | K::DisplayVersion)
        || e.kind() == K::DisplayHelpOnMissingArgumentOrSubcommand;
    let json = std::env::args_os().any(|a| a == "--json");
    if informational || !json {
        let _ = e.print();
        return if informational && e.kind() != K::DisplayHelpOnMissingArgumentOrSubcommand {
            0
        } else {
            error::EXIT_USAGE
        };
    }
    let text = e.to_string();
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("bad arguments")
        .trim_start_matches("error: ");
    let err = CliError::usage(format!("{first}; see `cairn --help`"));
    eprintln!("{}", err.json());
    err.exit_code()
}

fn dispatch(cli: Cli) -> Result<()> {
    let mut ctx = Ctx::new(cli.dir, cli.store, cli.json).with_remote(cli.remote);
    ctx.force_root = cli.force_root;
    ctx.threads_db = cli.threads_db.or_else(|| {
        std::env::var(ctx::THREADS_DB_ENV)
            .ok()
            .filter(|v| !v.is_empty())
    });
    match cli.command {
        Command::Snapshot(a) => files::snapshot(&ctx, &a),
        Command::Watch(a) => watch::watch(&ctx, &a),
        Command::List => files::list(&ctx),
        Command::Show { snapshot } => files::show(&ctx, &snapshot),
        Command::Diff {
            snapshot,
            snapshot2,
            patch,
            attribute,
        } => files::diff(&ctx, &snapshot, snapshot2.as_deref(), patch, attribute),
        Command::Restore(a) => files::restore(&ctx, &a),
        Command::Delete {
            snapshot,
            dry_run,
            yes,
        } => files::delete(&ctx, &snapshot, dry_run, yes),
        Command::Prune(a) => files::prune(&ctx, &a),
        Command::Gc { dry_run } => files::gc(&ctx, dry_run),
        Command::Verify => files::verify(&ctx),
        Command::Recover { give_up } => files::recover(&ctx, give_up),
        Command::Info => home::info(&ctx),
        Command::Doctor => doctor::doctor(&ctx),
        Command::Resume { thread, args } => agents::resume(&ctx, &thread, &args),
        Command::Stores => home::stores(&ctx),
        Command::Store(StoreCommand::Move { to }) => home::store_move(&ctx, to.as_deref()),
        Command::Workspace(WorkspaceCommand::Adopt { workspace, force }) => {
            home::workspace_adopt(&ctx, &workspace, force)
        }
        Command::Thread(t) => match t {
            ThreadCommand::New { id } => threads::new(&ctx, id),
            ThreadCommand::List => threads::list(&ctx),
            ThreadCommand::Log { thread, all } => threads::log(&ctx, &thread, all),
            ThreadCommand::Append {
                thread,
                kind,
                text,
                key,
            } => threads::append(&ctx, &thread, kind, text, key),
            ThreadCommand::Queue { thread, key, text } => inbox::queue(&ctx, &thread, &key, text),
            ThreadCommand::Inbox { thread } => inbox::list(&ctx, &thread),
            ThreadCommand::Deliver { thread } => inbox::deliver(&ctx, &thread),
        },
        Command::Rewind(a) => threads::rewind(&ctx, &a),
        Command::Events {
            since,
            follow,
            thread,
        } => threads::events(&ctx, since, follow, thread.as_deref()),
        Command::Fork(a) => threads::fork(&ctx, &a),
        Command::Export { snapshot, output } => export::export(&ctx, &snapshot, output.as_deref()),
        Command::Import { input } => export::import(&ctx, input.as_deref()),
        Command::Init(InitCommand::Container(a)) => container::init(&ctx, &a),
        Command::Demo { keep } => demo::demo(&ctx, keep),
        Command::Studio { port, no_open } => studio::studio(&ctx, port, no_open),
        Command::Serve {
            port,
            socket,
            openapi,
        } => {
            let listen = match socket {
                Some(path) => serve::Listen::Socket(path),
                None => serve::Listen::Loopback(port),
            };
            serve::serve(&ctx, listen, openapi)
        }
        Command::Hook(HookCommand::ClaudeCode { tool, watch }) => {
            agents::hook(&ctx, &cairn_agents::claude::ClaudeCode, &tool, watch)
        }
        Command::Init(InitCommand::ClaudeCode {
            user,
            remove,
            on_rewind,
            watch,
        }) => agents::init(
            &ctx,
            &cairn_agents::claude::ClaudeCode,
            user,
            remove,
            &on_rewind,
            watch,
        ),
        Command::Hook(HookCommand::Codex { tool, watch }) => {
            agents::hook(&ctx, &cairn_agents::codex::Codex, &tool, watch)
        }
        Command::Init(InitCommand::Codex {
            user,
            remove,
            on_rewind,
            watch,
        }) => agents::init(
            &ctx,
            &cairn_agents::codex::Codex,
            user,
            remove,
            &on_rewind,
            watch,
        ),
        Command::Hook(HookCommand::Gemini { tool, watch }) => {
            agents::hook(&ctx, &cairn_agents::gemini::GeminiCli, &tool, watch)
        }
        Command::Init(InitCommand::Gemini {
            user,
            remove,
            on_rewind,
            watch,
        }) => agents::init(
            &ctx,
            &cairn_agents::gemini::GeminiCli,
            user,
            remove,
            &on_rewind,
            watch,
        ),
        Command::Hook(HookCommand::Copilot { tool, watch }) => {
            agents::hook(&ctx, &cairn_agents::copilot::CopilotCli, &tool, watch)
        }
        Command::Init(InitCommand::Copilot {
            user,
            remove,
            on_rewind,
            watch,
        }) => agents::init(
            &ctx,
            &cairn_agents::copilot::CopilotCli,
            user,
            remove,
            &on_rewind,
            watch,
        ),
        Command::Trust { path, revoke } => trust::trust_command(&ctx, path.as_deref(), revoke),
        Command::Mcp => mcp::serve(&ctx),
    }
}
