//! What a snapshot leaves out.
//!
//! Precedence, from first to last checked:
//! 1. **Defaults**, always: `.git`, `node_modules` and `.cairn` at any depth, and the store's
//!    own directory wherever it sits (recognised by device and inode, whatever its name).
//! 2. **Exclude globs** (the workspace's and the call's, added together), matched against the
//!    path relative to the root (`dist/**`, `src/*.gen.rs`) and, for a pattern without `/`,
//!    against the name alone (`*.log` at any depth). A glob that matches a directory leaves
//!    out everything under it.
//! 3. **`.gitignore` and `.cairnignore`** files of the workspace, when `gitignore` is on: each
//!    directory's files apply to it and below, deeper files override shallower ones, negations
//!    (`!keep.log`) and anchoring (`/build`) work as in git (the `ignore` crate's matcher). A
//!    `.cairnignore` overrides the `.gitignore` beside it. Global git configuration and
//!    `.git/info/exclude` are *not* read: a snapshot depends only on files in the workspace.

use crate::error::{Error, Result};
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

/// Names left out at any depth, always.
pub const DEFAULT_EXCLUDES: &[&str] = &[".git", "node_modules", ".cairn"];

/// Why an entry was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum ExcludeReason {
    /// A default exclude (`.git`, `node_modules`, `.cairn`, the store).
    Default,
    /// An exclude glob.
    Glob,
    /// A `.gitignore` or `.cairnignore` rule.
    Ignored,
    /// A socket, FIFO or device.
    Special,
}

/// Compiled exclude globs.
#[derive(Debug, Clone)]
pub struct Excludes {
    patterns: Vec<String>,
    by_path: GlobSet,
    by_name: GlobSet,
}

impl Excludes {
    /// Compiles `patterns`.
    pub fn new(patterns: &[String]) -> Result<Self> {
        let mut by_path = GlobSetBuilder::new();
        let mut by_name = GlobSetBuilder::new();
        for p in patterns {
            let trimmed = p.trim_start_matches('/').trim_end_matches('/');
            if trimmed.is_empty() {
                return Err(Error::BadExclude {
                    pattern: p.clone(),
                    detail: "it is empty".into(),
                });
            }
            let glob = GlobBuilder::new(trimmed)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| Error::BadExclude {
                    pattern: p.clone(),
                    detail: e.to_string(),
                })?;
            if trimmed.contains('/') || p.starts_with('/') {
                by_path.add(glob);
            } else {
                by_name.add(glob);
            }
        }
        let build = |b: GlobSetBuilder| {
            b.build().map_err(|e| Error::BadExclude {
                pattern: patterns.join(", "),
                detail: e.to_string(),
            })
        };
        Ok(Excludes {
            patterns: patterns.to_vec(),
            by_path: build(by_path)?,
            by_name: build(by_name)?,
        })
    }

    /// The patterns as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    /// Whether `name` is a default exclude.
    pub fn is_default(name: &[u8]) -> bool {
        DEFAULT_EXCLUDES.iter().any(|d| d.as_bytes() == name)
    }

    /// Whether a glob leaves out the entry at `rel` (relative path) named `name`.
    pub fn glob_matches(&self, rel: &[u8], name: &[u8]) -> bool {
        (!self.by_name.is_empty() && self.by_name.is_match(Path::new(OsStr::from_bytes(name))))
            || (!self.by_path.is_empty()
                && self.by_path.is_match(Path::new(OsStr::from_bytes(rel))))
    }
}

/// One directory's ignore files, chained to its parent's: an immutable `Arc` chain shared by
/// the walker's threads.
#[derive(Debug, Default)]
pub struct IgnoreChain {
    parent: Option<Arc<IgnoreChain>>,
    /// Checked first: `.cairnignore`, then `.gitignore` of the same directory.
    matchers: Vec<Gitignore>,
    /// What the chain was built from: the SHA-256 of its parent's key, its directory and the
    /// texts of its ignore files (all zero for the root). Two chains with one key match the
    /// same paths, so a chain built once is reused by the next snapshot (see [`BUILT`]).
    key: [u8; 32],
}

/// How many built chains [`BUILT`] keeps.
const BUILT_KEPT: usize = 64;

/// The chains built last in this process, by key, newest last: a watched snapshot walks the
/// same few directories on the way to each change (the root's `.gitignore` every time), and
/// compiling an ignore file's globs cost a tenth of its walk (measured when this was added;
/// see the git log). Bounded: a walk of a tree with more ignore files than this only builds
/// them as before.
static BUILT: parking_lot::Mutex<std::collections::VecDeque<([u8; 32], Arc<IgnoreChain>)>> =
    parking_lot::const_mutex(std::collections::VecDeque::new());

impl IgnoreChain {
    /// The empty chain (nothing ignored).
    pub fn root() -> Arc<Self> {
        Arc::new(IgnoreChain::default())
    }

    /// A child of `parent` with the rules of one directory's ignore files. `dir` is the
    /// directory's absolute path; `files` are the contents of `.cairnignore` then `.gitignore`.
    pub fn child(parent: &Arc<Self>, dir: &Path, files: &[Vec<u8>]) -> Arc<Self> {
        let key = Self::key_of(parent, dir, files);
        if let Some((_, built)) = BUILT.lock().iter().rev().find(|(k, _)| *k == key) {
            return built.clone();
        }
        let chain = Self::build(parent, dir, files, key);
        let mut built = BUILT.lock();
        if built.len() >= BUILT_KEPT {
            built.pop_front();
        }
        built.push_back((key, chain.clone()));
        chain
    }

    /// The key of `parent`'s child at `dir` with ignore files `files`: each part preceded by
    /// its length, so that no two lists of parts hash alike.
    fn key_of(parent: &Self, dir: &Path, files: &[Vec<u8>]) -> [u8; 32] {
        let mut h = cairn_store::Hasher::new();
        h.update(b"cairn ignore chain\0");
        h.update(&parent.key);
        let dir = dir.as_os_str().as_bytes();
        for part in std::iter::once(dir).chain(files.iter().map(Vec::as_slice)) {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finish().0
    }

    /// Compiles the child (see [`IgnoreChain::child`]) whose key is `key`; `parent` itself
    /// when the files hold no rule.
    fn build(parent: &Arc<Self>, dir: &Path, files: &[Vec<u8>], key: [u8; 32]) -> Arc<Self> {
        let mut matchers = Vec::new();
        for text in files {
            let mut b = GitignoreBuilder::new(dir);
            // A UTF-8 byte-order mark (as some editors write) is not part of the first
            // pattern: git skips it (issue 33).
            let text = text.strip_prefix(b"\xef\xbb\xbf").unwrap_or(text);
            for line in text.split(|&c| c == b'\n') {
                let line = String::from_utf8_lossy(line);
                // A line that does not parse is ignored, as git does.
                let _ = b.add_line(None, line.trim_end_matches('\r'));
            }
            if let Ok(g) = b.build() {
                if !g.is_empty() {
                    matchers.push(g);
                }
            }
        }
        if matchers.is_empty() {
            return parent.clone();
        }
        Arc::new(IgnoreChain {
            parent: Some(parent.clone()),
            matchers,
            key,
        })
    }

    pub(crate) fn matchers_empty(&self) -> bool {
        self.matchers.is_empty() && self.parent.is_none()
    }

    /// Whether the entry at absolute path `path` is ignored. The innermost rule that matches
    /// decides (a negation re-includes).
    pub fn is_ignored(&self, path: &Path, is_dir: bool) -> bool {
        let mut node = Some(self);
        while let Some(n) = node {
            for m in &n.matchers {
                let hit = m.matched(path, is_dir);
                if hit.is_ignore() {
                    return true;
                }
                if hit.is_whitelist() {
                    return false;
                }
            }
            node = n.parent.as_deref();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_chain_built_again_from_the_same_files_is_the_one_built_before_and_other_files_build_another(
    ) {
        let root = IgnoreChain::root();
        let dir = Path::new("/w/memo-test");
        let logs = vec![b"*.log\n".to_vec()];
        let first = IgnoreChain::child(&root, dir, &logs);
        let again = IgnoreChain::child(&root, dir, &logs);
        assert!(Arc::ptr_eq(&first, &again), "built once, reused");
        assert!(first.is_ignored(Path::new("/w/memo-test/a.log"), false));

        // Other texts, another directory, another parent: each a chain of its own, which
        // matches what its own files say.
        let tmps = IgnoreChain::child(&root, dir, &[b"*.tmp\n".to_vec()]);
        assert!(!Arc::ptr_eq(&first, &tmps));
        assert!(!tmps.is_ignored(Path::new("/w/memo-test/a.log"), false));
        assert!(tmps.is_ignored(Path::new("/w/memo-test/a.tmp"), false));
        let elsewhere = IgnoreChain::child(&root, Path::new("/w/memo-other"), &logs);
        assert!(!Arc::ptr_eq(&first, &elsewhere));
        assert!(elsewhere.is_ignored(Path::new("/w/memo-other/a.log"), false));
        let below = IgnoreChain::child(
            &first,
            Path::new("/w/memo-test/sub"),
            &[b"!keep.log\n".to_vec()],
        );
        let below_tmps = IgnoreChain::child(
            &tmps,
            Path::new("/w/memo-test/sub"),
            &[b"!keep.log\n".to_vec()],
        );
        assert!(
            !Arc::ptr_eq(&below, &below_tmps),
            "the parent is part of the key"
        );
        assert!(below.is_ignored(Path::new("/w/memo-test/sub/x.log"), false));
        assert!(!below.is_ignored(Path::new("/w/memo-test/sub/keep.log"), false));
        assert!(!below_tmps.is_ignored(Path::new("/w/memo-test/sub/x.log"), false));

        // The parts are delimited: a directory's name cannot run into its file's text.
        assert_ne!(
            IgnoreChain::key_of(&root, Path::new("/w/a"), &[b"b\n".to_vec()]),
            IgnoreChain::key_of(&root, Path::new("/w/ab"), &[b"\n".to_vec()])
        );
        // Files without a rule leave the parent as it is.
        assert!(Arc::ptr_eq(
            &IgnoreChain::child(&first, dir, &[b"# nothing\n".to_vec()]),
            &first
        ));
    }

    #[test]
    fn the_chains_kept_are_bounded() {
        let root = IgnoreChain::root();
        for i in 0..BUILT_KEPT + 10 {
            let dir = PathBuf::from(format!("/w/bound-{i}"));
            IgnoreChain::child(&root, &dir, &[b"*.o\n".to_vec()]);
        }
        assert!(BUILT.lock().len() <= BUILT_KEPT);
    }
}
