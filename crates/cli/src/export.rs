//! `cairn export` and `cairn import`: a snapshot carried as one stream where no store is
//! shared (issue 58). The format and its checks are `cairn_store::export`'s.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use crate::parse::count;
use cairn_store::export::{ExportReport, ImportReport};
use cairn_store::{fsutil, ErrorKind};
use std::io::{IsTerminal, Write};
use std::path::Path;

impl From<cairn_store::export::Error> for CliError {
    fn from(e: cairn_store::export::Error) -> Self {
        use cairn_store::Classify;
        let mut err = CliError::new(e.kind(), e.to_string());
        err.path = e.path().map(Path::to_path_buf);
        err
    }
}

/// `cairn export SNAP [-o FILE]`.
pub(crate) fn export(ctx: &Ctx, name: &str, output: Option<&Path>) -> Result<()> {
    let store = ctx.open_store()?;
    let id = store.resolve(name)?;
    let Some(path) = output else {
        let stdout = std::io::stdout();
        if stdout.is_terminal() {
            return Err(CliError::usage(
                "refusing to write an export stream to a terminal: name a file with -o FILE, or \
                 redirect standard output (`cairn export SNAP > snap.tar`)",
            ));
        }
        let mut out = std::io::BufWriter::new(stdout.lock());
        let report = cairn_store::export::export(&store, &id, &mut out, "on standard output")?;
        out.flush().map_err(|e| {
            CliError::new(
                ErrorKind::of_io(&e),
                format!("cannot write the export: {e}"),
            )
        })?;
        ctx.note(&done(&report, None));
        return Ok(());
    };
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let dir = path.parent().unwrap_or(Path::new("."));
    // Written beside its place and renamed there once whole: a failed export leaves no file
    // that looks like one.
    let tmp = fsutil::temp_name(dir, ".cairn-export");
    let result = (|| {
        let file = fsutil::create_new_file(&tmp)?;
        let mut out = std::io::BufWriter::new(file);
        let shown = path.display().to_string();
        let report = cairn_store::export::export(&store, &id, &mut out, &shown)?;
        let file = out.into_inner().map_err(|e| {
            cairn_store::Error::io("write", &tmp, std::io::Error::other(e.to_string()))
        })?;
        file.sync_all()
            .map_err(|e| cairn_store::Error::io("sync", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| cairn_store::Error::io("rename", &path, e))?;
        Ok::<_, CliError>(report)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    let report = result?;
    ctx.emit(&report, || done(&report, Some(&path)) + "\n")
}

fn done(r: &ExportReport, path: Option<&Path>) -> String {
    format!(
        "exported snapshot {} ({}, {} bytes){}",
        r.snapshot.short(),
        count(r.objects, "object", "objects"),
        r.bytes,
        path.map(|p| format!(" to {}", p.display()))
            .unwrap_or_default()
    )
}

/// `cairn import [FILE]`.
pub(crate) fn import(ctx: &Ctx, input: Option<&Path>) -> Result<()> {
    let ws = ctx.open_workspace(true)?;
    let report = match input.filter(|p| *p != Path::new("-")) {
        None => {
            let stdin = std::io::stdin();
            if stdin.is_terminal() {
                return Err(CliError::usage(
                    "`cairn import` reads the stream on standard input, which is a terminal: \
                     name the file (`cairn import snap.tar`) or redirect it (`< snap.tar`)",
                ));
            }
            let mut lock = stdin.lock();
            cairn_store::export::import(ws.store(), &mut lock, "on standard input")?
        }
        Some(path) => {
            let mut file = std::fs::File::open(path).map_err(|e| {
                CliError::new(
                    ErrorKind::of_io(&e),
                    format!("cannot open the export stream {}: {e}", path.display()),
                )
                .with_path(path)
            })?;
            let shown = path.display().to_string();
            cairn_store::export::import(ws.store(), &mut file, &shown)?
        }
    };
    ctx.emit(&report, || imported(&report))
}

fn imported(r: &ImportReport) -> String {
    let what = if r.copy.already_present {
        "the store had it already".to_string()
    } else {
        format!(
            "{} new to this store",
            count(r.copy.objects_copied, "object", "objects")
        )
    };
    format!(
        "imported snapshot {} ({} read and verified, {what}); `cairn restore {}` puts its files here\n",
        r.copy.snapshot.short(),
        count(r.objects_read, "object", "objects"),
        r.copy.snapshot.short()
    )
}
