//! The checks of what Cairn's hooks need when they run: a watcher that answers when they ask
//! for one, Codex running them, and a store that can be written with room to spare.

use super::hooks::shell_words;
use super::{home, Finding, Settings};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::parse::human_bytes;
use cairn_agents::Agent;
use cairn_restore::watch::{self, Found};
use cairn_store::Store;

/// A store on a file system with less free space than this is reported: checkpoints fail once
/// it fills.
const MIN_FREE_BYTES: u64 = 100 << 20;

/// `watcher`: when Cairn's hooks start a watcher (`--watch`), one answers for the workspace.
/// `silent_only` reports only a watcher that holds the workspace and does not answer (a hook
/// that has just started one is not yet answering). `None` when the hooks ask for no watcher.
pub(super) fn watcher(ctx: &Ctx, settings: &Settings, silent_only: bool) -> Option<Finding> {
    const CHECK: &str = "watcher";
    let (_, command, file) = settings
        .hooks
        .iter()
        .find(|(_, c, _)| shell_words(c).is_some_and(|w| w.iter().any(|w| w == "--watch")))?;
    if ctx.remote.is_some() {
        return Some(Finding::pass(
            CHECK,
            "the hooks start no watcher for a store that mirrors a remote",
        ));
    }
    let root = ctx.canonical_root();
    let found = (|| -> Result<Option<Found>> {
        let (store_path, _, id) = ctx.workspace_location()?;
        if std::fs::symlink_metadata(&store_path).is_err() {
            return Ok(None);
        }
        let store = Store::open(&store_path, ctx.store_options(false)?)?;
        Ok(Some(watch::find(&store, &id)?))
    })();
    let none = || {
        Finding::fail(
            CHECK,
            format!(
                "Cairn's hooks ask for a watcher (`{command}`) but none answers for {}: each \
                 checkpoint walks the whole tree until one runs",
                root.display()
            ),
            "run `cairn watch &` in the project (the next hook starts one too)",
            Some(file.clone()),
        )
    };
    match found {
        Ok(Some(Found::Running(st))) => Some(Finding::pass(
            CHECK,
            format!(
                "a watcher answers for {} (process {})",
                root.display(),
                st.pid
            ),
        )),
        Ok(Some(Found::Silent { pid, why })) => {
            Some(Finding::fail(
                CHECK,
                format!(
                "a watcher holds {} ({}) but does not answer: {why}; each checkpoint walks the \
                 whole tree meanwhile",
                root.display(),
                pid.map_or("its process unknown".to_string(), |p| format!("process {p}"))
            ),
                "run `cairn watch --stop` (the next hook starts another)",
                Some(file.clone()),
            ))
        }
        Ok(None | Some(Found::None)) if silent_only => None,
        Ok(None | Some(Found::None)) => Some(none()),
        Err(e) => Some(Finding::fail(
            CHECK,
            format!("cannot ask the watcher of {}: {}", root.display(), e.line()),
            "run `cairn watch --status` to see more",
            e.path.clone(),
        )),
    }
}

/// Issue 55: when Cairn's hooks are in Codex's hooks (the project's, else the user's), whether
/// Codex runs them, asked of Codex itself (`codex app-server`): it skips an untrusted or
/// disabled hook without a word. `None` when no Codex hooks of Cairn's are installed.
pub(super) fn codex_hooks(ctx: &Ctx) -> Option<Finding> {
    use cairn_agents::codex::{self, Codex};
    const CHECK: &str = "codex-hooks-trusted";
    let mut files = vec![Codex.project_settings(&ctx.root)];
    files.extend(home().map(|h| Codex.user_settings(&h)));
    let path = files
        .into_iter()
        .find(|p| codex::has_ours(p, |c| Codex.is_ours(c)))?;
    Some(match codex::hooks_not_run(&path, |c| Codex.is_ours(c)) {
        Ok(problems) if problems.is_empty() => {
            Finding::pass(CHECK, format!("Codex runs Cairn's hooks in {}", path.display()))
        }
        Ok(problems) => Finding::fail(
            CHECK,
            problems.join("; "),
            "run `cairn init codex` (it trusts Cairn's hooks through Codex's app-server), or trust \
             and enable them in /hooks in Codex",
            Some(path),
        ),
        Err(e) => Finding::fail(
            CHECK,
            format!("cannot ask Codex whether it runs Cairn's hooks ({e})"),
            "put `codex` on PATH or set CAIRN_CODEX to it, then run `cairn doctor` again; or check \
             /hooks in Codex",
            Some(path),
        ),
    })
}

/// `store-writable`: a file can be made in the store (or, before the first checkpoint, where it
/// will be made), the thread database can be written, and the file system has room.
pub(super) fn store_writable(ctx: &Ctx) -> Finding {
    const CHECK: &str = "store-writable";
    let store = match ctx.store_path() {
        Ok(s) => s,
        Err(e) => {
            return Finding::fail(
                CHECK,
                format!("cannot tell where the store is: {}", e.line()),
                "run `cairn info` to see more",
                e.path,
            )
        }
    };
    let move_it = "or move the store with `cairn store move DIR`";
    // Before the first checkpoint: the nearest directory the store will be made in.
    let mut dir = store.as_path();
    while std::fs::symlink_metadata(dir).is_err() {
        match dir.parent() {
            Some(p) => dir = p,
            None => break,
        }
    }
    let (dir, exists) = (dir.to_path_buf(), dir == store);
    // What is wrong with the store, or with where it will be made.
    let problem = |what: String| {
        if exists {
            format!("the store {} {what}", store.display())
        } else {
            format!(
                "the store {} cannot be made: {} {what}",
                store.display(),
                dir.display()
            )
        }
    };
    if !dir.is_dir() {
        return Finding::fail(
            CHECK,
            problem("is not a directory".into()),
            format!("remove what is at {}, {move_it}", dir.display()),
            Some(dir),
        );
    }
    if let Err(e) = tempfile::Builder::new()
        .prefix(".cairn-doctor-")
        .tempfile_in(&dir)
    {
        return Finding::fail(
            CHECK,
            problem(format!("cannot be written: {e}")),
            format!(
                "let this user write {} (check its permissions and owner), {move_it}",
                dir.display()
            ),
            Some(dir),
        );
    }
    if exists {
        if let Ok(db) = ctx.threads_db_with(|| Ok(store.clone())) {
            let is_file = !db.to_str().is_some_and(cairn_rewind::is_pg_url) && db.is_file();
            if is_file && rustix::fs::access(&db, rustix::fs::Access::WRITE_OK).is_err() {
                return Finding::fail(
                    CHECK,
                    format!(
                        "the thread database {} cannot be written: prompts are not recorded",
                        db.display()
                    ),
                    format!("let this user write {}", db.display()),
                    Some(db),
                );
            }
        }
    }
    if let Ok(st) = rustix::fs::statvfs(&dir) {
        let free = st.f_bavail.saturating_mul(st.f_frsize);
        if free < MIN_FREE_BYTES {
            return Finding::fail(
                CHECK,
                format!(
                    "only {} free on the file system of the store {}: checkpoints fail once it \
                     is full",
                    human_bytes(free),
                    store.display()
                ),
                format!(
                    "free space there (`cairn prune --max-age 14d` drops old snapshots), \
                     {move_it}"
                ),
                Some(store),
            );
        }
        return Finding::pass(
            CHECK,
            format!(
                "the store {} {} ({} free)",
                store.display(),
                if exists {
                    "can be written"
                } else {
                    "can be made by the first checkpoint"
                },
                human_bytes(free)
            ),
        );
    }
    Finding::pass(
        CHECK,
        format!("the store {} can be written", store.display()),
    )
}
