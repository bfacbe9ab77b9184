//! The command line, as clap parses it.

use crate::error::exit_codes_table;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// The `cairn` command line.
#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "Snapshot a workspace into a content-addressed store, and restore, rewind or fork it safely",
    long_about = "Snapshot a workspace into a content-addressed store, and restore, rewind or fork it safely.\n\n\
        Every command works on the current directory or `-C DIR`. Its snapshots are kept outside it, \
        in a store of its own in Cairn's data directory ($CAIRN_HOME, else $XDG_DATA_HOME/cairn, else \
        ~/.local/share/cairn), where cleaning the tree cannot reach them; `--store` (or $CAIRN_STORE) \
        names another store, and a `DIR/.cairn` store made by an earlier version is used until \
        `cairn store move` moves it. `cairn info` says where the store is. Output is for people by default; `--json` prints one JSON \
        document on stdout (errors as one JSON document on stderr). Commands that change files \
        (restore, rewind --files, fork --files, delete, prune) show their plan and ask first; \
        `--yes` confirms without asking.",
    after_help = concat!(
        "Examples:\n",
        "  cairn snapshot --label before-refactor\n",
        "  cairn diff before-refactor --patch\n",
        "  cairn restore before-refactor --dry-run\n",
        "  cairn -C ~/project --json list\n",
        "  cairn demo                          # the whole story in a temporary directory\n\n",
        exit_codes_table!()
    ),
    propagate_version = true
)]
pub struct Cli {
    /// Work on the workspace rooted at DIR instead of the current directory.
    #[arg(short = 'C', value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
    /// The store directory (default: $CAIRN_STORE, else the workspace's store in the data
    /// directory; `cairn info` shows it).
    #[arg(long, value_name = "DIR", global = true)]
    pub store: Option<PathBuf>,
    /// The thread database: a file, or a PostgreSQL URL (`postgres://user:password@host/db`)
    /// that several machines share (default: $CAIRN_THREADS_DB, else STORE/threads.db).
    #[arg(long, value_name = "PATH_OR_URL", global = true)]
    pub threads_db: Option<String>,
    /// A remote object store the store mirrors into: s3://bucket/prefix (endpoint and keys
    /// from AWS_ENDPOINT, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), gs://…,
    /// az://… or file:///path. The store directory is then this machine's cache of it.
    /// Default: $CAIRN_REMOTE.
    #[arg(long, value_name = "URL", global = true)]
    pub remote: Option<String>,
    /// Print one JSON document on stdout instead of text for people.
    #[arg(long, global = true)]
    pub json: bool,
    /// Use the root even when it is `/` or on a pseudo file system (/proc, /sys, /dev, ...),
    /// which every command otherwise refuses: a snapshot there walks the whole machine or the
    /// kernel's own files.
    #[arg(long, global = true)]
    pub force_root: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Take a snapshot of the workspace.
    #[command(
        after_help = "Examples:\n  cairn snapshot --label before-refactor\n  cairn snapshot --exclude 'dist/**' --max-file-bytes 5MiB\n  cairn -C ~/project --json snapshot"
    )]
    Snapshot(SnapshotArgs),
    /// Watch the workspace, so that every snapshot of it looks only at what changed.
    #[command(
        after_help = "Runs in the foreground until stopped (Ctrl-C, SIGTERM, `cairn watch --stop`) or until the \
        workspace root or its store is moved or deleted. It watches every directory with inotify and answers \
        the snapshots of every Cairn process on the workspace over a socket in the store; a snapshot with no \
        watcher walks the whole tree. It holds no lock. With CAIRN_WATCH=auto a snapshot starts one in the \
        background when none runs; CAIRN_WATCH=off makes a process ignore it.\n\n\
        Examples:\n  cairn watch &\n  cairn watch --status\n  cairn --json watch --status\n  cairn watch --stop"
    )]
    Watch(WatchArgs),
    /// List the snapshots in the store, oldest first.
    #[command(after_help = "Examples:\n  cairn list\n  cairn list --json | jq '.snapshots[].id'")]
    List,
    /// Show one snapshot: its manifest and the files it holds.
    #[command(
        after_help = "A snapshot is named by its id, a unique prefix of 4+ hex digits, or its label.\n\nExamples:\n  cairn show 3fa2b1\n  cairn show before-refactor --json"
    )]
    Show {
        /// The snapshot: id, prefix of 4+ hex digits, or label.
        snapshot: String,
    },
    /// Show what changed from a snapshot to another, or to the files as they are now.
    #[command(
        after_help = "Examples:\n  cairn diff before-refactor            # snapshot -> the files now\n  cairn diff 3fa2b1 9c04de --patch      # unified diffs of text files\n  \
        cairn diff before-refactor --attribute  # which tool call or subagent changed each path\n\n\
        --attribute: the snapshots of the workspace taken between the two (the checkpoints before each tool call, \
        prompt and restore) cut the time into intervals; each changed path is named with the intervals it changed \
        in and what opened each: the tool call (tool_use_id, tool_name: a shell command is the Bash call that ran \
        it), the subagent (agent_id), or the checkpoint's label."
    )]
    Diff {
        /// The older snapshot.
        snapshot: String,
        /// The newer snapshot (default: the files as they are now).
        snapshot2: Option<String>,
        /// Print unified diffs of text files (binary files are named as such).
        #[arg(long)]
        patch: bool,
        /// Name for each changed path the checkpoint interval it changed in, and the tool call
        /// or subagent whose checkpoint opened it (tool_use_id, tool_name, agent_id).
        #[arg(long)]
        attribute: bool,
    },
    /// Put the files back as a snapshot holds them (undoable: a safety snapshot is taken first).
    #[command(
        after_help = "Shows the plan and asks before changing anything; --yes confirms without asking.\n\
        Without a terminal to ask on, it refuses unless given --yes. With --json it needs --dry-run or --yes.\n\n\
        With PATH... only those files and directories (each with everything under it) come back; \
        every other path is left as it is. Paths are relative to the workspace root.\n\n\
        With --on-drift, a path the restore would change whose content differs from the reference snapshot \
        (--reference, default the newest snapshot of the workspace taken after SNAP: the files being left; none, no check) was edited by someone \
        else since; it is listed as drifted, and refuse stops the restore (CONFLICT), keep leaves it as it is, \
        overwrite restores it (the safety snapshot keeps it).\n\n\
        Examples:\n  cairn restore before-refactor --dry-run\n  cairn restore before-refactor\n  cairn restore 3fa2b1 --yes --json\n  \
        cairn restore before-refactor -- src/main.rs docs/\n  cairn restore before-refactor --on-drift keep"
    )]
    Restore(RestoreArgs),
    /// Delete one snapshot (its objects are collected once no snapshot needs them).
    #[command(after_help = "Examples:\n  cairn delete 3fa2b1\n  cairn delete old-label --yes")]
    Delete {
        /// The snapshot: id, prefix of 4+ hex digits, or label.
        snapshot: String,
        /// Show what would be deleted, delete nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do it without asking.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Delete the snapshots a retention policy drops, then collect garbage.
    #[command(
        after_help = "Protected snapshots, and snapshots in use by a restore, are always kept.\n\n\
        Examples:\n  cairn prune --keep 20 --dry-run\n  cairn prune --max-age 14d --max-bytes 2GiB --yes"
    )]
    Prune(PruneArgs),
    /// Collect objects no snapshot reaches (older than an hour, so other writers are safe).
    #[command(after_help = "Examples:\n  cairn gc --dry-run\n  cairn gc --json")]
    Gc {
        /// Show what a collection would remove, remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Re-hash every object and check every snapshot can be restored in full.
    #[command(
        after_help = "Exits with 19 (CORRUPT) when it finds damage.\n\nExamples:\n  cairn verify\n  cairn verify --json"
    )]
    Verify,
    /// Finish restores a crash interrupted.
    #[command(
        after_help = "Every command that opens the workspace does this too; `recover` reports it.\n\
        Exits with 20 (CONFLICT) when later edits, or paths it may not change (another owner, an immutable \
        file), stand in the way of a pending restore; --give-up then ends that restore with those paths as \
        they are (its safety snapshot keeps the files as they were before it).\n\n\
        Examples:\n  cairn recover\n  cairn recover --give-up\n  cairn -C ~/project recover --json"
    )]
    Recover {
        /// End the restores that cannot finish, with the paths in their way left as they are.
        #[arg(long)]
        give_up: bool,
    },
    /// Say where the workspace's store and thread database are, and what they hold.
    #[command(after_help = "Examples:\n  cairn info\n  cairn -C ~/project info --json")]
    Info,
    /// Check what would leave Claude Code's prompts and edits without checkpoints here.
    #[command(
        after_help = "One line per check, each failed one with what to do and the path concerned; exits 0 when \
        every check passes, else with 13 (VALIDATION). Checks: hooks-installed (Cairn's hooks for UserPromptSubmit, \
        PreToolUse, PreCompact and Stop are in .claude/settings.json, .claude/settings.local.json or \
        ~/.claude/settings.json), hooks-disabled (\"disableAllHooks\": true in one of those or in \
        /etc/claude-code/managed-settings.json), hooks-command (each hook command starts an executable file), \
        watcher (hooks installed with --watch: a watcher answers), store-writable (the store can be written and \
        has 100 MiB free), transcript-prompts (every prompt of Claude Code's transcripts of the project from the \
        last 30 days, the newest 20, typed since the hooks were installed, is a user entry of a thread: a \
        `claude --bare` run, or one whose settings were not loaded, ran no hook). With --json: \
        {\"ok\": bool, \"findings\": [{\"check\", \"ok\", \"message\", \"fix\", \"path\"?}]}.\n\n\
        Examples:\n  cairn doctor\n  cairn -C ~/project --json doctor"
    )]
    Doctor,
    /// Continue an agent's conversation where a rewind left it (Claude Code: runs `claude`).
    #[command(
        after_help = "After `cairn rewind THREAD ENTRY` of an agent's thread, the agent's own conversation still \
        holds the turns the rewind took off. The rewind chose where it continues (the message before the first \
        turn taken off) and a new session for it, and kept both in its journal; `cairn resume` runs the agent \
        from there: for Claude Code, `claude --resume SESSION --resume-session-at MESSAGE --fork-session \
        --session-id NEW`, then ARGS. The new session records into the same thread. With nothing rewound, or \
        once the new session has prompts, it continues the newest prompt's session. `claude` is looked up on \
        PATH; CAIRN_CLAUDE names another program.\n\n\
        Codex CLI (issue 55) keeps one history per session: the rewind took the same session back \
        (`thread/revert` over `codex app-server`; resume does it first if it was not done), and resume runs \
        `codex resume SESSION`, then ARGS; ARGS beginning with `exec` run `codex exec resume SESSION` and the \
        rest (non-interactive). `codex` is looked up on PATH; CAIRN_CODEX names another program.\n\n\
        Examples:\n  cairn resume claude-0f2c…\n  cairn resume claude-0f2c… -- -p \"go on\"\n  \
        cairn resume codex-01a2… -- exec \"go on\""
    )]
    Resume {
        /// The thread (`claude-<session id>`, or a name a rewind gave it).
        thread: String,
        /// More arguments for the agent, after `--`.
        #[arg(last = true, value_name = "ARGS")]
        args: Vec<String>,
    },
    /// List every store in Cairn's data directory, with the roots it serves, its size and last use.
    #[command(
        after_help = "A store whose roots are all marked (gone) belongs to a workspace that was moved or \
        deleted: name it with --store from the new root, or delete it.\n\nExamples:\n  cairn stores\n  cairn stores --json"
    )]
    Stores,
    /// The workspace's store as a whole.
    #[command(subcommand)]
    Store(StoreCommand),
    /// The workspace's identity: which workspace of its store this directory is.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Run by an agent on its hook events (Claude Code: `cairn hook claude-code`).
    #[command(subcommand)]
    Hook(HookCommand),
    /// Plug Cairn into an agent (Claude Code: `cairn init claude-code`).
    #[command(subcommand)]
    Init(InitCommand),
    /// Trust a cairn.json's exact content, so its on_rewind commands run after a rewind.
    #[command(
        after_help = "A command kept in a file of the workspace (.claude/cairn.json, which a cloned repository \
        or an agent can write) runs only once you have trusted that file's exact content: this records its \
        SHA-256 in Cairn's data directory, outside the workspace, and shows the commands it trusts. Any \
        change to the file (an agent, a git pull) makes it untrusted again: the rewind then runs none of its \
        commands and says so. `cairn init claude-code --on-rewind CMD` trusts what it writes. Your own \
        ~/.claude/cairn.json needs no trust while only you can write it and it is outside the workspace.\n\n\
        Examples:\n  cat .claude/cairn.json && cairn trust\n  cairn trust ~/src/app/.claude/cairn.json\n  \
        cairn trust --revoke"
    )]
    Trust {
        /// The file (default: the workspace's .claude/cairn.json).
        #[arg(value_name = "PATH")]
        path: Option<PathBuf>,
        /// Take the trust back: its commands no longer run.
        #[arg(long)]
        revoke: bool,
    },
    /// Serve the workspace's checkpoints and threads to an agent over MCP (stdio).
    #[command(
        after_help = "A Model Context Protocol server on stdin/stdout (JSON-RPC 2.0) for the workspace of -C DIR \
        (or the directory it starts in), with the same store and thread database as every other command. \
        Tools: checkpoint {label?}, list_checkpoints {}, diff {from, to?, patch?, attribute?}, restore {snapshot, \
        dry_run, paths?, on_drift?}, rewind {thread, entry, files?, dry_run, paths?, on_drift?}, list_threads {}, thread_log {thread}. Each answers with the \
        fields of the command's --json output as structured content, and a short text; a failure is a tool \
        error (isError) naming the error's kind. Notes and errors of the server itself go to stderr.\n\n\
        Examples, to register it with an agent:\n  \
        claude mcp add cairn -- cairn mcp      # Claude Code\n  \
        codex mcp add cairn -- cairn mcp       # Codex CLI (~/.codex/config.toml: [mcp_servers.cairn])\n  \
        gemini mcp add cairn cairn mcp         # Gemini CLI (.gemini/settings.json: mcpServers)"
    )]
    Mcp,
    /// Threads: conversations whose user messages carry checkpoints of the files.
    #[command(subcommand)]
    Thread(ThreadCommand),
    /// Rewind a thread to an entry: the conversation, and with --files the files too.
    #[command(
        after_help = "ENTRY is an entry of the thread's active branch: its id or a unique prefix (4+ characters, \
        `e_` optional), or a checkpoint id of the thread (`cp_…` or a unique prefix): the conversation goes to \
        the checkpoint's point (a branch a rewind cut included), and with --no-memory only the files come back. \
        Without ENTRY it lists the active branch ([files] on the entries with a checkpoint) and the \
        checkpoints taken by hand or before a rewind. With --files the files come back as they were at that \
        point; a safety snapshot is taken first, and a \"Before rewind\" checkpoint records it with the \
        conversation as it was: `cairn rewind THREAD <that checkpoint> --files` undoes the whole rewind. The \
        command shows the plan and asks, and changes nothing unless confirmed or given --yes. With --json it \
        needs --dry-run or --yes.\n\n\
        With --files, `-- PATH...` restores only those files and directories (everything else is left as it is), \
        and a file edited since the thread's newest checkpoint after the one restored (by someone other than \
        the rewind) is drift: the rewind refuses it (CONFLICT, nothing changed) unless --on-drift keep (leave \
        it) or overwrite (restore it; the safety snapshot keeps it).\n\n\
        Examples:\n  cairn rewind chat\n  cairn rewind chat e_3fa2 --files --dry-run\n  \
        cairn rewind chat e_3fa2 --files\n  cairn rewind chat e_3fa2 --files --no-memory --yes\n  \
        cairn rewind chat cp_91c0 --files --yes\n  cairn rewind chat e_3fa2 --files --on-drift keep -- src/\n  \
        cairn rewind chat e_3fa2 --files --yes --key retry-7"
    )]
    Rewind(RewindArgs),
    /// Print the thread database's events (checkpoints, rewinds, forks, ...) for other tools.
    #[command(
        after_help = "One event a line: its cursor, time, kind, thread and details; with --json each line is \
        one JSON object {cursor, thread_id, kind, data, created_ms}, for a memory plugin, a message bus or an \
        IDE to consume. Kinds: thread_created, checkpoint_created, entry_appended, rewind_started, \
        rewind_completed, rewind_failed, fork_created. Every process sharing the thread database writes to the \
        same log, so --follow sees the rewinds of every other process (it looks every 100 ms). --since CURSOR \
        prints only the events after that cursor (the last line's `cursor` resumes where a reader stopped).\n\n\
        Examples:\n  cairn events\n  cairn events --json --follow\n  cairn events --json --since 42 --thread chat"
    )]
    Events {
        /// Only the events after this cursor (0: from the start).
        #[arg(long, value_name = "CURSOR", default_value_t = 0)]
        since: i64,
        /// Keep printing events as they come, until interrupted.
        #[arg(long)]
        follow: bool,
        /// Only the events of this thread.
        #[arg(long, value_name = "THREAD")]
        thread: Option<String>,
    },
    /// Fork a thread at an entry into a new thread, with --files giving it the files at that point.
    #[command(
        after_help = "With --files and --into DIR, DIR (made if missing) gets the files as they were at \
        the entry, with a store of its own (in the data directory) that the checkpoints are copied into; without --into \
        the current workspace does. It shows the plan and asks, as a restore does.\n\n\
        Examples:\n  cairn fork chat e_3fa2 --new-id chat-b\n  cairn fork chat e_3fa2 --files --into ../project-b --dry-run\n  \
        cairn fork chat e_3fa2 --files --into ../project-b --yes"
    )]
    Fork(ForkArgs),
    /// Write a snapshot with every object it reaches as one stream (a tar), for another store.
    #[command(
        after_help = "The stream is a tar archive (`tar -tf` lists it): cairn-export.json, the manifest \
        (snapshots/ID), every tree and blob the snapshot reaches (trees/ID, blobs/ID, each named by the \
        SHA-256 of its bytes) and END, the count, last. It goes to standard output unless -o names a file \
        (written whole, then renamed into place). `cairn import` reads it into another store, verified \
        (issue 58): a provider's file API, a CI artifact or a copy carries a snapshot where no store is \
        shared.\n\n\
        Examples:\n  cairn export before-refactor -o snap.tar\n  cairn export 3fa2b1 | ssh box cairn -C /work import"
    )]
    Export {
        /// The snapshot: id, prefix of 4+ hex digits, or label.
        snapshot: String,
        /// Write the stream to this file instead of standard output.
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Read a snapshot `cairn export` wrote into the workspace's store, verified.
    #[command(
        after_help = "Every object's bytes are checked against its name, the manifest against its id, and \
        the stream must be whole (its END entry and count): a truncated, altered or foreign stream is \
        refused with CORRUPT and the store is left as it was (the stream is staged apart first, then the \
        snapshot is copied in once it is whole). With --remote the snapshot goes to the remote too. \
        Then `cairn restore ID` puts its files here.\n\n\
        Examples:\n  cairn import snap.tar\n  cairn import < snap.tar\n  cairn --json import snap.tar"
    )]
    Import {
        /// The stream (default, or `-`: standard input).
        #[arg(value_name = "FILE")]
        input: Option<PathBuf>,
    },
    /// Take the guided tour: a whole story in a temporary directory, printed step by step.
    #[command(after_help = "Example:\n  cairn demo")]
    Demo {
        /// Keep the temporary directory and print where it is.
        #[arg(long)]
        keep: bool,
    },
    /// Serve a local web page of the threads, checkpoints, diffs and rewinds (127.0.0.1 only).
    #[command(
        after_help = "Prints the page's URL, with a token for this launch, as the first line on stdout.\n\nExamples:\n  cairn studio\n  cairn studio --port 8765 --no-open"
    )]
    Studio {
        /// The port on 127.0.0.1 (0: any free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Do not open a browser.
        #[arg(long)]
        no_open: bool,
    },
    /// Serve the local API (/v1/...) for cockpits and IDEs: threads, views, diffs, rewinds with
    /// request keys, and a live feed of the event log.
    #[command(
        after_help = "Listens on 127.0.0.1 (every call carries the token printed on stdout: \
        `Authorization: Bearer TOKEN`) or, with --socket, on a Unix socket only you can open (no token). \
        The first line on stdout is JSON: {\"url\", \"token\"} or {\"socket\"}. The API is described by its \
        OpenAPI document, at /v1/openapi.json and printed by --openapi. Restores and rewinds a crash left \
        unfinished are finished first: until then calls that change files answer BUSY naming the journal.\n\n\
        Examples:\n  cairn serve\n  cairn serve --port 8766\n  cairn serve --socket \"$XDG_RUNTIME_DIR/cairn.sock\"\n  \
        cairn serve --openapi > openapi.json"
    )]
    Serve {
        /// The port on 127.0.0.1 (0: any free one).
        #[arg(long, default_value_t = 0, conflicts_with = "socket")]
        port: u16,
        /// Listen on a Unix socket at this path instead (mode 0600: yours only).
        #[arg(long, value_name = "PATH")]
        socket: Option<std::path::PathBuf>,
        /// Print the API's OpenAPI document and exit.
        #[arg(long)]
        openapi: bool,
    },
}

/// Arguments of `cairn restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The snapshot: id, prefix of 4+ hex digits, or label.
    pub snapshot: String,
    /// Restore only these files and directories (relative to the workspace root).
    #[arg(value_name = "PATH")]
    pub paths: Vec<String>,
    /// Show what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do it without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// What to do with paths edited since the reference snapshot (default: no check).
    #[arg(long, value_enum, value_name = "CHOICE")]
    pub on_drift: Option<OnDrift>,
    /// With --on-drift: the snapshot to compare with (default: the newest of the workspace
    /// taken after the one restored).
    #[arg(long, value_name = "SNAPSHOT", requires = "on_drift")]
    pub reference: Option<String>,
}

/// What `--on-drift` does with a path edited by someone else since the files being left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnDrift {
    /// Refuse the whole restore (CONFLICT), naming the paths.
    Refuse,
    /// Leave those paths as they are; restore the rest.
    Keep,
    /// Restore them too (the safety snapshot keeps what they held).
    Overwrite,
}

impl OnDrift {
    /// The library's policy.
    pub fn policy(self) -> cairn_restore::DriftPolicy {
        match self {
            OnDrift::Refuse => cairn_restore::DriftPolicy::Refuse,
            OnDrift::Keep => cairn_restore::DriftPolicy::Skip,
            OnDrift::Overwrite => cairn_restore::DriftPolicy::Overwrite,
        }
    }
}

/// Arguments of `cairn snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// A label for people; `cairn restore LABEL` finds the newest snapshot with it.
    #[arg(long, short = 'l')]
    pub label: Option<String>,
    /// Leave out paths matching GLOB (and everything under them); may be repeated.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Skip files larger than this (default 10MiB); accepts suffixes like 512KiB, 5MB, 1G.
    #[arg(long, value_name = "N", value_parser = crate::parse::bytes)]
    pub max_file_bytes: Option<u64>,
    /// Do not honour .gitignore and .cairnignore files.
    #[arg(long)]
    pub no_gitignore: bool,
    /// Skip files with more than one hard link (reported as `hard-link`) without reading
    /// them: their inode may be a file outside the workspace.
    #[arg(long)]
    pub refuse_hard_links: bool,
}

/// Arguments of `cairn watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Say whether a watcher runs, and what it watches, its memory and processor time.
    #[arg(long, conflicts_with = "stop")]
    pub status: bool,
    /// Stop the watcher that runs.
    #[arg(long)]
    pub stop: bool,
    /// Watch at most N directories (those past it are walked by every snapshot).
    #[arg(long, value_name = "N")]
    pub max_watches: Option<usize>,
    /// Stop once no process has asked anything for this long (s, m, h, d or w: 30m, 8h); a
    /// watcher started on first use stops after 8h.
    #[arg(long, value_name = "AGE", value_parser = crate::parse::duration)]
    pub idle_exit: Option<std::time::Duration>,
}

/// Arguments of `cairn prune`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("policy").required(true).multiple(true))]
pub struct PruneArgs {
    /// Keep the newest N snapshots (at least 1; `--all` deletes every snapshot).
    #[arg(long, value_name = "N", group = "policy")]
    pub keep: Option<usize>,
    /// Delete every snapshot (what `--keep 0` would do, which is refused as a likely slip).
    #[arg(long, group = "policy", conflicts_with = "keep")]
    pub all: bool,
    /// Drop snapshots older than this (s, m, h, d or w: 90m, 14d, 2w).
    #[arg(long, value_name = "AGE", value_parser = crate::parse::duration, group = "policy")]
    pub max_age: Option<std::time::Duration>,
    /// Drop the oldest snapshots until the store holds at most this (2GiB, 500MB, ...).
    #[arg(long, value_name = "SIZE", value_parser = crate::parse::bytes, group = "policy")]
    pub max_bytes: Option<u64>,
    /// Show what would be deleted, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do it without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `cairn thread …`.
#[derive(Debug, Subcommand)]
pub enum ThreadCommand {
    /// Start a thread.
    #[command(after_help = "Examples:\n  cairn thread new\n  cairn thread new --id chat")]
    New {
        /// The thread's id (default: a new one).
        #[arg(long)]
        id: Option<String>,
    },
    /// List the threads, oldest first.
    #[command(after_help = "Examples:\n  cairn thread list\n  cairn thread list --json")]
    List,
    /// Show a thread's active branch; entries with a checkpoint are marked [files].
    #[command(
        after_help = "Examples:\n  cairn thread log chat\n  cairn thread log chat --all    # the cut branches too"
    )]
    Log {
        /// The thread.
        thread: String,
        /// Show the branches a rewind cut, too.
        #[arg(long)]
        all: bool,
    },
    /// Append an entry; a checkpoint of the files is taken before every user message.
    #[command(
        after_help = "Examples:\n  cairn thread append chat --kind user --text 'Make it greet by name'\n  \
        cairn thread append chat --kind assistant --text 'Done.'\n  cairn thread append chat --kind tool --text 'sh: make' --key call-17"
    )]
    Append {
        /// The thread.
        thread: String,
        /// What the entry is.
        #[arg(long, value_enum)]
        kind: EntryKindArg,
        /// Its text.
        #[arg(long)]
        text: Option<String>,
        /// An admission key: appending the same key again returns the first entry.
        #[arg(long)]
        key: Option<String>,
    },
    /// Queue a prompt in the thread's inbox, delivered at its next safe boundary (issue 59).
    #[command(
        after_help = "The prompt waits while a run of the thread is under way (running, or paused for an \
        approval) or a tool call of its runs is open; `cairn thread deliver` delivers it at the next safe \
        boundary, taking the checkpoint of the files then. The same --key again answers with its admission \
        (queued, delivered, or cancelled by a rewind) and never sends the prompt twice; a rewind of the \
        thread cancels the prompts still queued.\n\n\
        Examples:\n  cairn thread queue chat --key p-42 --text 'Then add tests'\n  \
        cairn thread inbox chat\n  cairn thread deliver chat"
    )]
    Queue {
        /// The thread.
        thread: String,
        /// The prompt's admission key (the same key is the same prompt).
        #[arg(long)]
        key: String,
        /// Its text.
        #[arg(long)]
        text: Option<String>,
    },
    /// List the thread's inbox: queued, delivered and cancelled prompts, oldest first.
    #[command(
        after_help = "Examples:\n  cairn thread inbox chat\n  cairn thread inbox chat --json"
    )]
    Inbox {
        /// The thread.
        thread: String,
    },
    /// Deliver the oldest queued prompt if the thread is at a safe boundary (no run or tool call
    /// under way), with a checkpoint of the files taken then.
    #[command(after_help = "Examples:\n  cairn thread deliver chat")]
    Deliver {
        /// The thread.
        thread: String,
    },
}

/// The kinds of entry `cairn thread append` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum EntryKindArg {
    /// A user message (a checkpoint of the files is taken before it).
    User,
    /// A model's message.
    Assistant,
    /// A tool call or its result.
    Tool,
    /// A note.
    Note,
}

/// Arguments of `cairn rewind`.
#[derive(Debug, Args)]
pub struct RewindArgs {
    /// The thread.
    pub thread: String,
    /// The entry to rewind to (an id or a unique prefix), or a checkpoint (`cp_…`, a "Before
    /// rewind" one included). Without it: the active branch and the checkpoints, to choose from.
    pub entry: Option<String>,
    /// Restore the files from the checkpoint at that point, too.
    #[arg(long)]
    pub files: bool,
    /// With --files: restore the files only, leave the conversation and memory.
    #[arg(long)]
    pub no_memory: bool,
    /// Show what would change, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do it without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Stop the runs in the way first.
    #[arg(long)]
    pub force: bool,
    /// With --files: what to do with paths edited since the thread's newest checkpoint (by
    /// someone other than the rewind): refuse (the default), keep them, or overwrite them.
    #[arg(long, value_enum, value_name = "CHOICE")]
    pub on_drift: Option<OnDrift>,
    /// With --files: restore only these files and directories (relative to the root).
    #[arg(value_name = "PATH", last = true)]
    pub paths: Vec<String>,
    /// A request key: the same key again answers the rewind it made (done, or failed and
    /// then retried) and never runs a second one.
    #[arg(long, value_name = "KEY")]
    pub key: Option<String>,
}

/// `cairn hook ...`: run by an agent on its hook events.
#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Claude Code's hook: reads one hook document on stdin and checkpoints the workspace of its
    /// `cwd` (or $CLAUDE_PROJECT_DIR).
    #[command(
        after_help = "UserPromptSubmit: the prompt is appended to the session's thread (claude-<session_id>) \
        as a user entry, after a checkpoint of the files. PreToolUse of Write, Edit, MultiEdit, NotebookEdit, \
        Bash (and each --tool): a checkpoint labelled with the tool_use_id, so `cairn restore toolu_…` puts \
        the files back as they were before that call. PreCompact: a checkpoint before the compaction. \
        Stop: a checkpoint labelled end-of-turn, the files as the agent left them (so a later rewind's drift \
        check counts only edits made after the agent stopped as someone else's). Other events: nothing. It prints nothing on stdout, and on any failure it prints one line on stderr \
        and exits with 1, which never blocks the agent.\n\n\
        Installed by `cairn init claude-code`. Example, to try it by hand:\n  \
        echo '{\"session_id\":\"s1\",\"hook_event_name\":\"UserPromptSubmit\",\"cwd\":\".\",\"prompt\":\"hi\"}' | cairn hook claude-code"
    )]
    ClaudeCode {
        /// Another tool whose calls change files (an MCP tool's name, say); repeatable.
        #[arg(long, value_name = "NAME")]
        tool: Vec<String>,
        /// Start `cairn watch` for the workspace in the background when none runs, so the
        /// checkpoints after this one look only at what changed.
        #[arg(long)]
        watch: bool,
    },
    /// Codex CLI's hook: reads one hook document on stdin and checkpoints the workspace of its
    /// `cwd` (issue 55).
    #[command(
        after_help = "UserPromptSubmit: the prompt is appended to the session's thread (codex-<session_id>) \
        as a user entry, after a checkpoint of the files; the entry keeps the turn id (what `thread/revert` \
        takes) and the rollout file. PreToolUse of apply_patch, Bash, every MCP tool (mcp__…) and each --tool: \
        a checkpoint labelled with the tool call's id. PreCompact: a checkpoint. Stop: a checkpoint labelled \
        end-of-turn. Other events: nothing. On any failure it prints one line on stderr and exits with 1.\n\n\
        Installed by `cairn init codex`. Example, to try it by hand:\n  \
        echo '{\"session_id\":\"s1\",\"turn_id\":\"t1\",\"hook_event_name\":\"UserPromptSubmit\",\"cwd\":\".\",\"prompt\":\"hi\"}' | cairn hook codex"
    )]
    Codex {
        /// Another tool whose calls change files; repeatable.
        #[arg(long, value_name = "NAME")]
        tool: Vec<String>,
        /// Start `cairn watch` for the workspace in the background when none runs.
        #[arg(long)]
        watch: bool,
    },
    /// Gemini CLI's hook: reads one hook document on stdin and checkpoints the workspace of its
    /// `cwd` (issue 55).
    #[command(
        after_help = "BeforeAgent: the prompt is appended to the session's thread (gemini-<session_id>) as a \
        user entry, after a checkpoint of the files; the entry keeps the session file and how long it was, \
        which finds the prompt's message for a rewind. BeforeTool of write_file, replace, run_shell_command, \
        every MCP tool (mcp_…) and each --tool: a checkpoint labelled before-<tool>. PreCompress (when \
        installed by hand): a checkpoint. AfterAgent: a checkpoint labelled end-of-turn. Other events: nothing. On any failure it prints one \
        line on stderr and exits with 1, which Gemini CLI shows as a warning.\n\n\
        Installed by `cairn init gemini`. Example, to try it by hand:\n  \
        echo '{\"session_id\":\"s1\",\"hook_event_name\":\"BeforeAgent\",\"cwd\":\".\",\"prompt\":\"hi\"}' | cairn hook gemini"
    )]
    Gemini {
        /// Another tool whose calls change files; repeatable.
        #[arg(long, value_name = "NAME")]
        tool: Vec<String>,
        /// Start `cairn watch` for the workspace in the background when none runs.
        #[arg(long)]
        watch: bool,
    },
    /// GitHub Copilot CLI's hook: reads one hook document on stdin and checkpoints the workspace
    /// of its `cwd` (issue 55).
    #[command(
        after_help = "UserPromptSubmit: the prompt is appended to the session's thread (copilot-<session_id>) \
        as a user entry, after a checkpoint of the files. PreToolUse of a tool that changes files (create, \
        edit, bash, powershell; Write, Edit, Bash as Copilot CLI names them to these hooks) and each --tool: a \
        checkpoint labelled before-<tool>. PreCompact: a checkpoint. Stop: a checkpoint labelled end-of-turn. \
        Other events and tools: nothing. On any failure it prints one line on stderr and exits with 1, which \
        never blocks the agent.\n\n\
        Installed by `cairn init copilot`. Example, to try it by hand:\n  \
        echo '{\"session_id\":\"s1\",\"hook_event_name\":\"UserPromptSubmit\",\"cwd\":\".\",\"prompt\":\"hi\"}' | cairn hook copilot"
    )]
    Copilot {
        /// Another tool whose calls change files; repeatable.
        #[arg(long, value_name = "NAME")]
        tool: Vec<String>,
        /// Start `cairn watch` for the workspace in the background when none runs.
        #[arg(long)]
        watch: bool,
    },
}

/// `cairn init ...`: plug Cairn into an agent.
#[derive(Debug, Subcommand)]
pub enum InitCommand {
    /// Mark the workspace as a directory bind-mounted into a container: restores and rewinds
    /// with files are refused (BUSY) while a process runs in it (issue 58).
    #[command(
        after_help = "The container is found from its cgroup, never by asking it: with NAME, `ENGINE \
        [--engine-arg ...] inspect NAME` gives its init's process id, whose cgroup (/proc/PID/cgroup, the \
        unified hierarchy first, else pids, else name=systemd) is read; with --cgroup, that directory. A \
        process runs in the container when its cgroup, or one below it, lists a process other than the \
        container's init (the process that is PID 1 of its own PID namespace): a command run with `exec`, \
        a shell, anything the init started or left behind. A container that is stopped, or that only \
        idles in its init, runs nothing. While one runs, `cairn restore`, `cairn rewind --files` and `cairn fork --files` \
        into it are refused with BUSY, their dry runs too, naming the container and the processes; --force does not \
        go around it. Kept in the workspace's store (outside the container's reach).\n\n\
        Examples:\n  cairn init container agent-box\n  cairn init container agent-box --engine docker\n  \
        cairn init container --cgroup /sys/fs/cgroup/kubepods.slice/.../cri-containerd-ab12.scope\n  \
        cairn init container --status\n  cairn init container --remove"
    )]
    Container(ContainerArgs),
    /// Install Cairn's hooks in Claude Code's settings (the project's .claude/settings.json).
    #[command(
        after_help = "Merges into the settings, leaving every other setting and hook as it is (idempotent):\n  \
        hooks.UserPromptSubmit, hooks.PreCompact, hooks.Stop: {\"hooks\": [{\"type\": \"command\", \"command\": \"<cairn> hook claude-code\", \"timeout\": 60}]}\n  \
        hooks.PreToolUse: the same, with \"matcher\": \"Write|Edit|MultiEdit|NotebookEdit|Bash\"\n\n\
        --on-rewind CMD: after each rewind that a cairn command completes (cairn rewind, the MCP server's rewind tool \
        and the Studio), CMD runs with `sh -c` in the workspace root, once the file's content is trusted (init trusts \
        what it writes; see `cairn trust`), the rewind_completed event on stdin (as `cairn events --json` \
        prints it) and CAIRN_EVENT=rewind_completed, for up to 60 s; its failure is reported, never the rewind's. \
        Rewinds of other processes (the bindings) are seen by `cairn events --follow`.\n\n\
        --watch: the hook command becomes `<cairn> hook claude-code --watch`, which starts `cairn watch` for the \
        workspace in the background when none runs; the watcher stops by itself when the workspace is deleted, \
        or with `cairn watch --stop`.\n\n\
        Examples:\n  cairn init claude-code\n  cairn init claude-code --user\n  cairn init claude-code --watch\n  \
        cairn init claude-code --remove\n  cairn init claude-code --on-rewind 'my-memory-plugin resync'"
    )]
    ClaudeCode {
        /// The user's settings (~/.claude/settings.json) instead of the project's.
        #[arg(long)]
        user: bool,
        /// Take Cairn's hooks out again (and the --on-rewind commands).
        #[arg(long)]
        remove: bool,
        /// A command to run after every rewind Cairn completes in this workspace, given the
        /// rewind_completed event (JSON) on stdin; repeatable. Kept in .claude/cairn.json
        /// (with --user, ~/.claude/cairn.json).
        #[arg(long, value_name = "CMD")]
        on_rewind: Vec<String>,
        /// The hooks start `cairn watch` for the workspace when none runs (the hook command
        /// gets --watch), so each checkpoint looks only at what changed instead of walking the
        /// tree. Running init again without it takes it out.
        #[arg(long, conflicts_with = "remove")]
        watch: bool,
    },
    /// Install Cairn's hooks in Codex's hooks (the project's .codex/hooks.json) and have Codex
    /// trust them (issue 55).
    #[command(
        after_help = "Merges into .codex/hooks.json (with --user, $CODEX_HOME/hooks.json or ~/.codex/hooks.json), \
        leaving every other hook as it is (idempotent): SessionStart, UserPromptSubmit, PreCompact, Stop, and \
        PreToolUse with \"matcher\": \"^(apply_patch|Bash|mcp__.*)$\", each {\"type\": \"command\", \"command\": \
        \"<cairn> hook codex\", \"timeout\": 60}.\n\n\
        Codex skips a hook it has not trusted, without a word. init asks Codex (`codex app-server`: `codex` on \
        PATH, or CAIRN_CODEX) which of Cairn's hooks it does not trust and trusts those through Codex's own \
        interface (hooks/list, then config/batchWrite of hooks.state, as /hooks does), and says so; when it \
        cannot, it says how to trust them in Codex (/hooks). A project's .codex/ is read only once Codex trusts \
        the project.\n\n\
        Examples:\n  cairn init codex\n  cairn init codex --user\n  cairn init codex --remove"
    )]
    Codex {
        /// The user's hooks ($CODEX_HOME/hooks.json, ~/.codex/hooks.json) instead of the project's.
        #[arg(long)]
        user: bool,
        /// Take Cairn's hooks out again (and the --on-rewind commands).
        #[arg(long)]
        remove: bool,
        /// A command to run after every rewind Cairn completes in this workspace; repeatable
        /// (kept in .claude/cairn.json, as for Claude Code).
        #[arg(long, value_name = "CMD")]
        on_rewind: Vec<String>,
        /// The hooks start `cairn watch` for the workspace when none runs.
        #[arg(long, conflicts_with = "remove")]
        watch: bool,
    },
    /// Install Cairn's hooks in Gemini CLI's settings (the project's .gemini/settings.json)
    /// (issue 55).
    #[command(
        after_help = "Merges into .gemini/settings.json (with --user, ~/.gemini/settings.json), leaving every \
        other setting and hook as it is (idempotent): SessionStart, BeforeAgent, AfterAgent, and \
        BeforeTool with \"matcher\": \"^(write_file|replace|run_shell_command|mcp_.+)$\", each {\"type\": \
        \"command\", \"command\": \"<cairn> hook gemini\", \"timeout\": 60000, \"name\": \"cairn\"}. Not PreCompress: \
        Gemini CLI fires it before every model request.\n\n\
        Gemini CLI runs no hook in a folder it does not trust, nor with hooksConfig.enabled false: init says \
        so. A rewind of a gemini-… thread takes the same session back (Gemini CLI's own /rewind record in \
        its session file) and `cairn resume` runs `gemini --resume SESSION`.\n\n\
        Examples:\n  cairn init gemini\n  cairn init gemini --user\n  cairn init gemini --remove"
    )]
    Gemini {
        /// The user's settings (~/.gemini/settings.json) instead of the project's.
        #[arg(long)]
        user: bool,
        /// Take Cairn's hooks out again (and the --on-rewind commands).
        #[arg(long)]
        remove: bool,
        /// A command to run after every rewind Cairn completes in this workspace; repeatable
        /// (kept in .claude/cairn.json, as for Claude Code).
        #[arg(long, value_name = "CMD")]
        on_rewind: Vec<String>,
        /// The hooks start `cairn watch` for the workspace when none runs.
        #[arg(long, conflicts_with = "remove")]
        watch: bool,
    },
    /// Install Cairn's hooks for GitHub Copilot CLI (the project's .github/hooks/cairn.json)
    /// (issue 55).
    #[command(
        after_help = "Writes .github/hooks/cairn.json (with --user, ~/.copilot/hooks/cairn.json), a hooks file \
        of Cairn's own, leaving the other files of the directory as they are (idempotent): {\"version\": 1, \
        \"hooks\": {EVENT: [{\"type\": \"command\", \"bash\": \"<cairn> hook copilot\", \"timeoutSec\": 60}]}} \
        for SessionStart, UserPromptSubmit, PreToolUse, PreCompact and Stop.\n\n\
        Copilot CLI loads a repository's hooks only in a folder you trust, and skips them without a word \
        otherwise: init says so. A rewind of a copilot-… thread takes the files back; Copilot CLI cannot \
        continue a session from an earlier message, so its conversation still holds the turns taken off \
        (`cairn resume` runs `copilot --resume=SESSION`).\n\n\
        Examples:\n  cairn init copilot\n  cairn init copilot --user\n  cairn init copilot --remove"
    )]
    Copilot {
        /// The user's hooks (~/.copilot/hooks/cairn.json) instead of the project's.
        #[arg(long)]
        user: bool,
        /// Take Cairn's hooks out again (and the --on-rewind commands).
        #[arg(long)]
        remove: bool,
        /// A command to run after every rewind Cairn completes in this workspace; repeatable
        /// (kept in .claude/cairn.json, as for Claude Code).
        #[arg(long, value_name = "CMD")]
        on_rewind: Vec<String>,
        /// The hooks start `cairn watch` for the workspace when none runs.
        #[arg(long, conflicts_with = "remove")]
        watch: bool,
    },
}

/// Arguments of `cairn init container`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("what").multiple(false))]
pub struct ContainerArgs {
    /// The container's name or id, as its engine knows it.
    #[arg(group = "what")]
    pub name: Option<String>,
    /// The engine program that inspects it (default: podman when on PATH, else docker).
    #[arg(long, value_name = "PROGRAM", requires = "name")]
    pub engine: Option<String>,
    /// An argument the engine gets before `inspect` (`--root DIR`, `--host URL`, ...);
    /// repeatable.
    #[arg(
        long,
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "name"
    )]
    pub engine_arg: Vec<String>,
    /// The container's cgroup directory instead of a name (`/sys/fs/cgroup/...`): for an
    /// engine Cairn does not ask, or a Kubernetes pod's container.
    #[arg(long, value_name = "DIR", group = "what")]
    pub cgroup: Option<PathBuf>,
    /// Forget the container: the directory is an ordinary workspace again.
    #[arg(long, group = "what")]
    pub remove: bool,
    /// Say what is recorded and which processes run in the container now.
    #[arg(long, group = "what")]
    pub status: bool,
}

/// `cairn store ...`.
#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Move the store, with every snapshot, journal and the thread database in it.
    #[command(
        after_help = "Without DIR the store goes to its place in the data directory, where later commands \
        find it by themselves (this is how a DIR/.cairn store of an earlier version moves out of the tree). \
        One rename on the same file system; across file systems a copy, renamed into place once whole, then \
        the removal of the old one. Refused (BUSY) while another process snapshots, restores or collects.\n\n\
        Examples:\n  cairn store move\n  cairn store move /data/cairn/project-store"
    )]
    Move {
        /// Where to (default: the workspace's store in the data directory).
        #[arg(value_name = "DIR")]
        to: Option<PathBuf>,
    },
}

/// `cairn workspace ...`.
#[derive(Debug, Subcommand)]
pub enum WorkspaceCommand {
    /// Make this directory an existing workspace: after a copy, or a move to another file system.
    #[command(
        after_help = "A workspace is known by its directory's identity (device, inode, birth time), so a rename or a         bind mount keeps its snapshots, pending restores and threads. A copy, or a move to another file system,         makes a new directory: adopt tells Cairn it continues the old workspace, named by its id (`cairn info`,         `cairn stores`) or its old path. Refused while the old directory is still there as it was, unless --force.

        Examples:
  cairn workspace adopt /home/me/old-project
  cairn workspace adopt ws-3fa2b1c4d5e6f708 --json"
    )]
    Adopt {
        /// The workspace: its id (`ws-...`), or the path its root had.
        #[arg(value_name = "ID|PATH")]
        workspace: String,
        /// Adopt it even though its old directory is still there (both become one workspace).
        #[arg(long)]
        force: bool,
    },
}

/// Arguments of `cairn fork`.
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The thread.
    pub thread: String,
    /// The last entry the fork shares: an id or a unique prefix.
    pub entry: String,
    /// Give the fork's workspace the files as they were at that point.
    #[arg(long)]
    pub files: bool,
    /// The fork's workspace (made if missing), with its own store.
    #[arg(long, value_name = "DIR")]
    pub into: Option<PathBuf>,
    /// The new thread's id (default: a new one).
    #[arg(long, value_name = "ID")]
    pub new_id: Option<String>,
    /// Show what would be made, make nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --files: do it without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// With --files: replace the contents of an existing, non-empty --into directory that is
    /// no workspace of this thread's forks, and stop the runs in the way.
    #[arg(long)]
    pub force: bool,
}
