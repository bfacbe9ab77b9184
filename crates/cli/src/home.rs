//! Where the store is: `cairn info`, `cairn stores` and `cairn store move`.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::{count, human_bytes, human_time};
use cairn_restore::home::{self, StoreHome, StoreInfo};
use cairn_store::ErrorKind;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `cairn info --json`.
#[derive(Debug, Serialize)]
struct InfoJson {
    #[serde(with = "cairn_store::relpath::os_path")]
    root: PathBuf,
    workspace_id: String,
    #[serde(with = "cairn_store::relpath::os_path")]
    store: PathBuf,
    /// Why the store is there: given, env, data or legacy.
    store_home: StoreHome,
    /// Whether the store exists yet (the first snapshot makes it).
    store_exists: bool,
    #[serde(with = "cairn_store::relpath::opt_os_path")]
    data_dir: Option<PathBuf>,
    #[serde(with = "cairn_store::relpath::os_path")]
    threads_db: PathBuf,
    snapshots: u64,
    bytes: u64,
    /// What to do about where the store is, if anything.
    advice: Option<String>,
}

fn where_text(h: StoreHome) -> &'static str {
    match h {
        StoreHome::Given => "named with --store",
        StoreHome::Env => "named by $CAIRN_STORE",
        StoreHome::Data => "in the data directory, outside the workspace",
        StoreHome::Legacy => "inside the workspace, made by an earlier Cairn",
    }
}

/// The advice for a store inside the workspace.
fn advice(ctx: &Ctx, store: &Path, h: StoreHome) -> Option<String> {
    let inside = store.starts_with(ctx.canonical_root()) || store.starts_with(&ctx.root);
    match h {
        StoreHome::Legacy => Some(format!(
            "the store is inside the workspace, where `git clean -fdx` or `rm -rf` of the project \
             deletes every checkpoint; move it out with `cairn -C {} store move`",
            ctx.root.display()
        )),
        StoreHome::Given | StoreHome::Env if inside => Some(
            "the store is inside the workspace, where a clean of the tree deletes it; name one \
             outside it, or leave --store out to use the data directory"
                .into(),
        ),
        _ => None,
    }
}

/// `cairn info`: where the workspace's store and thread database are, and what they hold.
pub(crate) fn info(ctx: &Ctx) -> Result<()> {
    let (store, store_home, workspace_id) = ctx.workspace_location()?;
    let exists = cairn_store::is_store_dir(&store);
    let stats = exists.then(|| home::store_info(&store));
    let root = ctx.canonical_root();
    let json = InfoJson {
        workspace_id,
        root,
        advice: advice(ctx, &store, store_home),
        store_exists: exists,
        data_dir: home::data_dir().ok(),
        threads_db: ctx.threads_db()?,
        snapshots: stats.as_ref().map_or(0, |s| s.snapshots),
        bytes: stats.as_ref().map_or(0, |s| s.bytes),
        store,
        store_home,
    };
    ctx.emit(&json, || {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "workspace  {} ({})",
            json.root.display(),
            json.workspace_id
        );
        let _ = writeln!(
            out,
            "store      {} ({}{})",
            json.store.display(),
            where_text(json.store_home),
            if json.store_exists {
                ""
            } else {
                "; made by the first snapshot"
            }
        );
        let _ = writeln!(out, "threads    {}", json.threads_db.display());
        let _ = writeln!(
            out,
            "holds      {}, {}",
            count(json.snapshots, "snapshot", "snapshots"),
            human_bytes(json.bytes)
        );
        if let Some(a) = &json.advice {
            let _ = writeln!(out, "note: {a}");
        }
        out
    })
}

/// `cairn stores --json`.
#[derive(Debug, Serialize)]
struct StoresJson {
    #[serde(with = "cairn_store::relpath::os_path")]
    data_dir: PathBuf,
    stores: Vec<StoreInfo>,
}

/// `cairn stores`: every store in the data directory, with its roots, size and last use.
pub(crate) fn stores(ctx: &Ctx) -> Result<()> {
    let data_dir = home::data_dir()?;
    let json = StoresJson {
        stores: home::stores(&data_dir)?,
        data_dir,
    };
    ctx.emit(&json, || {
        let mut out = String::new();
        if json.stores.is_empty() {
            let _ = writeln!(
                out,
                "no stores in {} yet; `cairn snapshot` in a workspace makes its store there",
                json.data_dir.display()
            );
            return out;
        }
        let _ = writeln!(
            out,
            "{:<40}  {:>9}  {:>10}  {:<19}  ROOT",
            "STORE", "SNAPSHOTS", "SIZE", "LAST USED (UTC)"
        );
        for s in &json.stores {
            let name = s
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let roots = if s.roots.is_empty() {
                "-".to_string()
            } else {
                s.roots
                    .iter()
                    .map(|r| {
                        if r.exists {
                            r.root.clone()
                        } else {
                            format!("{} (gone)", r.root)
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = writeln!(
                out,
                "{name:<40}  {:>9}  {:>10}  {:<19}  {roots}",
                s.snapshots,
                human_bytes(s.bytes),
                human_time(s.last_used_ms)
            );
        }
        let _ = writeln!(
            out,
            "in {}; a store whose roots are all gone can be deleted with rm -r",
            json.data_dir.display()
        );
        out
    })
}

/// `cairn store move --json`.
#[derive(Debug, Serialize)]
struct MovedJson {
    #[serde(with = "cairn_store::relpath::os_path")]
    from: PathBuf,
    #[serde(with = "cairn_store::relpath::os_path")]
    to: PathBuf,
    /// Whether later commands find it without --store.
    found_by_default: bool,
}

/// `cairn store move [DIR]`: moves the workspace's store (default: to its place in the data
/// directory) with everything in it.
pub(crate) fn store_move(ctx: &Ctx, dir: Option<&Path>) -> Result<()> {
    let (from, _) = ctx.store_location()?;
    let root = ctx.canonical_root();
    let default = home::data_dir()?
        .join(home::STORES_DIR)
        .join(home::store_name(&root));
    let to = match dir {
        Some(d) if d.is_absolute() => d.to_path_buf(),
        Some(d) => ctx.root.join(d),
        None => default.clone(),
    };
    // Before "no store": an earlier move's copy may be the only one left (issue 53).
    home::check_unfinished_move(&from, &to)?;
    if !cairn_store::is_store_dir(&from) {
        return Err(CliError::new(
            ErrorKind::NotFound,
            format!(
                "no Cairn store at {} to move; `cairn info` says where the store is",
                from.display()
            ),
        )
        .with_path(from));
    }
    if cairn_store::fsutil::same_path(&from, &to) {
        return Err(CliError::new(
            ErrorKind::InvalidArgument,
            format!("the store is at {} already", from.display()),
        )
        .with_path(to));
    }
    home::move_store(&from, &to)?;
    let found_by_default = to == default
        && std::env::var_os(home::STORE_ENV).is_none_or(|v| v.is_empty())
        && !cairn_store::is_store_dir(&root.join(home::LEGACY_STORE));
    let json = MovedJson {
        from,
        to,
        found_by_default,
    };
    ctx.emit(&json, || {
        let mut out = format!(
            "moved the store {} to {}\n",
            json.from.display(),
            json.to.display()
        );
        if !json.found_by_default {
            let _ = writeln!(
                out,
                "name it from now on with --store {} (or CAIRN_STORE)",
                json.to.display()
            );
        }
        out
    })
}

/// `cairn workspace adopt ID|PATH [--force]`.
pub(crate) fn workspace_adopt(ctx: &Ctx, workspace: &str, force: bool) -> Result<()> {
    let as_path = Path::new(workspace);
    let id = if cairn_store::check_workspace_id(workspace).is_ok()
        && workspace.starts_with("ws-")
        && std::fs::symlink_metadata(ctx.root.join(as_path)).is_err()
    {
        workspace.to_string()
    } else {
        let p = if as_path.is_absolute() {
            as_path.to_path_buf()
        } else {
            ctx.root.join(as_path)
        };
        let p = std::fs::canonicalize(&p).unwrap_or(p);
        cairn_restore::default_workspace_id(&p)
    };
    let a = home::adopt(&ctx.canonical_root(), &id, ctx.store.as_deref(), force)?;
    ctx.emit(&a, || {
        let mut out = format!(
            "{} is workspace {} of the store {}",
            ctx.canonical_root().display(),
            a.workspace_id,
            a.store.display()
        );
        if let Some(prev) = &a.previous_root {
            let _ = write!(out, " (its root was {prev})");
        }
        out.push('\n');
        if !a.released.is_empty() {
            let _ = writeln!(out, "no longer claimed by {}", a.released.join(", "));
        }
        out
    })
}
