//! The record of a workload and the states a power cut could leave.
//!
//! The model of persistence (conservative, in the manner of ALICE's): an operation that
//! returned before the cut may or may not be on the disk, unless a sync made it durable:
//!
//! - a file's data, size and mode (writes, truncations, chmods) are durable once an `fsync` or
//!   `fdatasync` of that file follows them;
//! - a directory operation (create, mkdir, symlink, link, unlink, rmdir, rename) is durable once
//!   an `fsync` of a directory it changed (either side of a rename) follows it, and so is a
//!   directory's mode once it is synced itself; a rename is atomic (the old name and the new
//!   one go together);
//! - anything not durable may have reached the disk or not, in any subset, except that a
//!   directory operation never lands without the earlier ones it depends on (those on the same
//!   object or the same name, the creation of the directory it works in, and for an `rmdir` the
//!   removals that emptied it): a journalling file system commits a name's history in order;
//! - writes are whole (no torn write within one request) but land in any subset, so a file
//!   whose data was not synced may be empty, short, or have holes of zeros.
//!
//! `syncfs`, `sync` and `sync_file_range` never reach a FUSE file system; a workload that
//! relies on them is seen as not syncing (the restore workloads stay under the restore's
//! 256 actions, past which it syncs with `syncfs`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What a created object is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symlink and its target.
    Symlink(OsString),
    /// A FIFO, socket or device (materialised as nothing).
    Other,
}

/// One recorded operation. Objects are the recorder's inode numbers (the root is 1).
#[derive(Debug, Clone)]
pub enum Op {
    /// An object made at `name` in `parent`.
    Create {
        /// The directory.
        parent: u64,
        /// The name.
        name: OsString,
        /// The new object.
        ino: u64,
        /// What it is.
        kind: Kind,
        /// Its permission bits.
        mode: u32,
    },
    /// Another name for `ino`.
    Link {
        /// The object.
        ino: u64,
        /// The directory of the new name.
        parent: u64,
        /// The new name.
        name: OsString,
    },
    /// `name` removed from `parent` (unlink or rmdir).
    Unlink {
        /// The directory.
        parent: u64,
        /// The name.
        name: OsString,
        /// The object it named.
        ino: u64,
    },
    /// A rename (with `RENAME_EXCHANGE`, `exchange` is the object swapped back).
    Rename {
        /// The old directory.
        parent: u64,
        /// The old name.
        name: OsString,
        /// The new directory.
        newparent: u64,
        /// The new name.
        newname: OsString,
        /// The object renamed.
        ino: u64,
        /// The other object of an exchange.
        exchange: Option<u64>,
    },
    /// Bytes written at an offset.
    Write {
        /// The file.
        ino: u64,
        /// Where.
        offset: u64,
        /// What.
        data: Vec<u8>,
    },
    /// A new size.
    Truncate {
        /// The file.
        ino: u64,
        /// Its size.
        size: u64,
    },
    /// New permission bits.
    Chmod {
        /// The object.
        ino: u64,
        /// Its permission bits.
        mode: u32,
    },
    /// `fsync` or `fdatasync` of a file.
    Fsync {
        /// The file.
        ino: u64,
    },
    /// `fsync` of a directory.
    FsyncDir {
        /// The directory.
        ino: u64,
    },
    /// Everything before this is durable: the test made its own edits to the workspace
    /// through the file system and stands for a user whose edits reached the disk long
    /// before (Cairn's own operations never count on it).
    Barrier,
    /// The workload was told an operation succeeded: the `usize` is its index in the
    /// workload's list of acknowledgements.
    Ack(usize),
}

impl Op {
    fn is_namespace(&self) -> bool {
        matches!(
            self,
            Op::Create { .. } | Op::Link { .. } | Op::Unlink { .. } | Op::Rename { .. }
        )
    }

    fn is_sync_or_ack(&self) -> bool {
        matches!(self, Op::Fsync { .. } | Op::FsyncDir { .. } | Op::Ack(_))
    }
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    mode: u32,
    data: Vec<u8>,
    entries: BTreeMap<OsString, u64>,
}

/// A file system as a crash leaves it: objects by number, directories naming them.
#[derive(Debug, Clone)]
pub struct Model {
    nodes: HashMap<u64, Node>,
}

impl Model {
    /// An empty root with permission bits `mode`.
    pub fn new(mode: u32) -> Model {
        let mut nodes = HashMap::new();
        nodes.insert(
            1,
            Node {
                kind: Kind::Dir,
                mode,
                data: Vec::new(),
                entries: BTreeMap::new(),
            },
        );
        Model { nodes }
    }

    fn dir(&mut self, ino: u64) -> Option<&mut BTreeMap<OsString, u64>> {
        self.nodes
            .get_mut(&ino)
            .filter(|n| n.kind == Kind::Dir)
            .map(|n| &mut n.entries)
    }

    /// Makes `ino` at `name` in `parent`.
    pub fn create(&mut self, parent: u64, name: &OsStr, ino: u64, kind: &Kind, mode: u32) -> bool {
        let Some(d) = self.dir(parent) else {
            return false;
        };
        d.insert(name.to_os_string(), ino);
        self.nodes.insert(
            ino,
            Node {
                kind: kind.clone(),
                mode,
                data: Vec::new(),
                entries: BTreeMap::new(),
            },
        );
        true
    }

    /// Names `ino` `name` in `parent` too.
    pub fn link(&mut self, ino: u64, parent: u64, name: &OsStr) -> bool {
        if !self.nodes.contains_key(&ino) {
            return false;
        }
        match self.dir(parent) {
            Some(d) => {
                d.insert(name.to_os_string(), ino);
                true
            }
            None => false,
        }
    }

    /// Writes `data` at `offset` in `ino` (zeros fill a hole).
    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> bool {
        let Some(n) = self.nodes.get_mut(&ino) else {
            return false;
        };
        let end = offset as usize + data.len();
        if n.data.len() < end {
            n.data.resize(end, 0);
        }
        n.data[offset as usize..end].copy_from_slice(data);
        true
    }

    /// Whether `target` is `ino` or lies under it.
    fn within(&self, ino: u64, target: u64) -> bool {
        let mut todo = vec![ino];
        let mut seen = HashSet::new();
        while let Some(i) = todo.pop() {
            if i == target {
                return true;
            }
            if !seen.insert(i) {
                continue;
            }
            if let Some(n) = self.nodes.get(&i) {
                todo.extend(n.entries.values().copied());
            }
        }
        false
    }

    /// Applies one operation; `false` (and nothing changed) when what it needs is not there.
    pub fn apply(&mut self, op: &Op) -> bool {
        match op {
            Op::Create {
                parent,
                name,
                ino,
                kind,
                mode,
            } => self.create(*parent, name, *ino, kind, *mode),
            Op::Link { ino, parent, name } => self.link(*ino, *parent, name),
            Op::Unlink { parent, name, ino } => match self.dir(*parent) {
                Some(d) if d.get(name) == Some(ino) => {
                    d.remove(name);
                    true
                }
                _ => false,
            },
            Op::Rename {
                parent,
                name,
                newparent,
                newname,
                ino,
                exchange,
            } => {
                let present = self.dir(*parent).is_some_and(|d| d.get(name) == Some(ino));
                if !present || self.dir(*newparent).is_none() || self.within(*ino, *newparent) {
                    return false;
                }
                let swapped = exchange.filter(|t| {
                    self.dir(*newparent)
                        .is_some_and(|d| d.get(newname) == Some(t))
                });
                if exchange.is_some() && swapped.is_none() {
                    return false;
                }
                let d = self.dir(*parent).expect("checked above");
                d.remove(name);
                if let Some(t) = swapped {
                    d.insert(name.clone(), t);
                }
                self.dir(*newparent)
                    .expect("checked above")
                    .insert(newname.clone(), *ino);
                true
            }
            Op::Write { ino, offset, data } => self.write(*ino, *offset, data),
            Op::Truncate { ino, size } => match self.nodes.get_mut(ino) {
                Some(n) => {
                    n.data.resize(*size as usize, 0);
                    true
                }
                None => false,
            },
            Op::Chmod { ino, mode } => match self.nodes.get_mut(ino) {
                Some(n) => {
                    n.mode = *mode;
                    true
                }
                None => false,
            },
            Op::Fsync { .. } | Op::FsyncDir { .. } | Op::Ack(_) | Op::Barrier => true,
        }
    }

    /// Every path of the tree, relative, with its object: a directory before what it holds,
    /// each directory once (a state may name one twice).
    fn paths(&self) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        let mut todo = vec![(1u64, PathBuf::new())];
        let mut seen = HashSet::from([1u64]);
        while let Some((ino, path)) = todo.pop() {
            for (name, child) in &self.nodes[&ino].entries {
                let Some(c) = self.nodes.get(child) else {
                    continue;
                };
                if c.kind == Kind::Dir && !seen.insert(*child) {
                    continue;
                }
                let p = path.join(name);
                if c.kind == Kind::Dir {
                    todo.push((*child, p.clone()));
                }
                out.push((p, *child));
            }
        }
        out
    }

    /// Writes the tree into the empty directory `dest`: files, directories, symlinks, hard
    /// links as hard links, and permission bits (directories' last, deepest first).
    pub fn materialise(&self, dest: &Path) {
        let mut placed: HashMap<u64, PathBuf> = HashMap::new();
        let mut dirs = Vec::new();
        for (rel, ino) in self.paths() {
            let c = &self.nodes[&ino];
            let p = dest.join(rel);
            match &c.kind {
                Kind::Dir => {
                    std::fs::create_dir(&p).expect("materialise a directory");
                    dirs.push((p, c.mode));
                }
                Kind::File => match placed.get(&ino) {
                    Some(first) => std::fs::hard_link(first, &p).expect("materialise a hard link"),
                    None => {
                        std::fs::write(&p, &c.data).expect("materialise a file");
                        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(c.mode))
                            .expect("chmod a materialised file");
                        placed.insert(ino, p);
                    }
                },
                Kind::Symlink(t) => {
                    std::os::unix::fs::symlink(t, &p).expect("materialise a symlink")
                }
                Kind::Other => {}
            }
        }
        for (p, mode) in dirs.into_iter().rev() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode))
                .expect("chmod a materialised directory");
        }
    }

    /// A digest of the tree (what `materialise` would write), to tell states apart.
    pub fn digest(&self) -> [u8; 32] {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        for (rel, ino) in self.paths() {
            let c = &self.nodes[&ino];
            h.update(rel.as_os_str().as_bytes());
            h.update(format!(
                "\0{:?} {:o} {ino} ",
                std::mem::discriminant(&c.kind),
                c.mode
            ));
            match &c.kind {
                Kind::File => h.update(sha2::Sha256::digest(&c.data)),
                Kind::Symlink(t) => h.update(t.as_bytes()),
                Kind::Dir | Kind::Other => {}
            }
            h.update([0]);
        }
        h.finalize().into()
    }
}

/// One state a power cut could leave: the cut came just before operation `at` of the record,
/// and `included` says which of the operations before it reached the disk.
#[derive(Debug, Clone)]
pub struct CrashState {
    /// The index of the first operation that had not happened.
    pub at: usize,
    /// Which operations before `at` landed.
    pub included: Vec<bool>,
    /// How it was chosen, for the report.
    pub how: &'static str,
}

/// The record of a workload and what follows from it.
pub struct Record {
    /// The operations, in order.
    pub ops: Vec<Op>,
    /// For each operation, the index of the first sync that made it durable (`usize::MAX`
    /// when none did).
    durable_from: Vec<usize>,
    /// For each directory operation, the earlier ones it depends on.
    deps: Vec<Vec<usize>>,
}

impl Record {
    /// Works out, for `ops`, what each sync made durable and what depends on what.
    pub fn new(ops: Vec<Op>) -> Record {
        let n = ops.len();
        let mut durable_from = vec![usize::MAX; n];
        // Pending data operations per file, directory operations per directory.
        let mut data_pending: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut dir_pending: HashMap<u64, Vec<usize>> = HashMap::new();
        let mut deps = vec![Vec::new(); n];
        #[derive(Hash, PartialEq, Eq)]
        enum Key {
            Obj(u64),
            Entry(u64, OsString),
        }
        let mut last: HashMap<Key, usize> = HashMap::new();
        let mut entry_ops: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Write { ino, .. } | Op::Truncate { ino, .. } | Op::Chmod { ino, .. } => {
                    data_pending.entry(*ino).or_default().push(i)
                }
                Op::Fsync { ino } => {
                    for j in data_pending.remove(ino).unwrap_or_default() {
                        durable_from[j] = i;
                    }
                }
                Op::FsyncDir { ino } => {
                    // A directory's own mode too.
                    for j in data_pending.remove(ino).unwrap_or_default() {
                        durable_from[j] = i;
                    }
                    for j in dir_pending.remove(ino).unwrap_or_default() {
                        if durable_from[j] == usize::MAX {
                            durable_from[j] = i;
                        }
                    }
                }
                Op::Barrier => {
                    for d in durable_from.iter_mut().take(i) {
                        if *d == usize::MAX {
                            *d = i;
                        }
                    }
                    data_pending.clear();
                    dir_pending.clear();
                }
                _ => {}
            }
            if !op.is_namespace() {
                continue;
            }
            // What this operation writes and what it only needs.
            let (writes, reads): (Vec<Key>, Vec<u64>) = match op {
                Op::Create {
                    parent, name, ino, ..
                } => (
                    vec![Key::Obj(*ino), Key::Entry(*parent, name.clone())],
                    vec![*parent],
                ),
                Op::Link { ino, parent, name } => (
                    vec![Key::Obj(*ino), Key::Entry(*parent, name.clone())],
                    vec![*parent],
                ),
                Op::Unlink { parent, name, ino } => (
                    vec![Key::Obj(*ino), Key::Entry(*parent, name.clone())],
                    vec![*parent],
                ),
                Op::Rename {
                    parent,
                    name,
                    newparent,
                    newname,
                    ino,
                    exchange,
                } => {
                    let mut w = vec![
                        Key::Obj(*ino),
                        Key::Entry(*parent, name.clone()),
                        Key::Entry(*newparent, newname.clone()),
                    ];
                    if let Some(t) = exchange {
                        w.push(Key::Obj(*t));
                    }
                    (w, vec![*parent, *newparent])
                }
                _ => unreachable!("a directory operation"),
            };
            let mut d: Vec<usize> = writes
                .iter()
                .chain(
                    reads
                        .iter()
                        .map(|r| Key::Obj(*r))
                        .collect::<Vec<_>>()
                        .iter(),
                )
                .filter_map(|k| last.get(k).copied())
                .collect();
            if let Op::Unlink { ino, .. } = op {
                // An rmdir needs the removals that emptied the directory.
                d.extend(entry_ops.get(ino).into_iter().flatten().copied());
            }
            d.sort_unstable();
            d.dedup();
            deps[i] = d;
            for k in writes {
                last.insert(k, i);
            }
            for dir in dir_touched(op) {
                dir_pending.entry(dir).or_default().push(i);
                entry_ops.entry(dir).or_default().push(i);
            }
        }
        Record {
            ops,
            durable_from,
            deps,
        }
    }

    /// Where a cut is worth trying: just before each sync and each acknowledgement (the most
    /// that is pending there), and at the end.
    pub fn cut_points(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.is_sync_or_ack())
            .map(|(i, _)| i)
            .collect();
        v.push(self.ops.len());
        v.dedup();
        v
    }

    /// The operations before `at` that are durable there.
    fn durable(&self, at: usize) -> Vec<bool> {
        (0..at).map(|i| self.durable_from[i] < at).collect()
    }

    /// Adds to `set` every directory operation its members depend on.
    fn close(&self, set: &mut [bool]) {
        for i in (0..set.len()).rev() {
            if set[i] {
                let mut todo = self.deps[i].clone();
                while let Some(j) = todo.pop() {
                    if !set[j] {
                        set[j] = true;
                        todo.extend(self.deps[j].iter().copied());
                    }
                }
            }
        }
    }

    /// The state with only what was durable at `at`.
    pub fn minimal(&self, at: usize) -> CrashState {
        let mut included = self.durable(at);
        self.close(&mut included);
        CrashState {
            at,
            included,
            how: "only what was synced",
        }
    }

    /// The state with everything before `at` on the disk.
    pub fn everything(&self, at: usize) -> CrashState {
        CrashState {
            at,
            included: vec![true; at],
            how: "everything issued",
        }
    }

    /// What was durable at `at`, and the pending operations before `cut`.
    pub fn prefix(&self, at: usize, cut: usize) -> CrashState {
        let mut included = self.durable(at);
        for (i, inc) in included.iter_mut().enumerate().take(cut.min(at)) {
            *inc = true;
            let _ = i;
        }
        self.close(&mut included);
        CrashState {
            at,
            included,
            how: "a prefix of what was pending",
        }
    }

    /// What was durable at `at`, and each pending operation with probability `p_in_4`/4.
    pub fn subset(&self, at: usize, rng: &mut impl FnMut(u64) -> u64, p_in_4: u64) -> CrashState {
        let mut included = self.durable(at);
        for inc in included.iter_mut() {
            if !*inc && rng(4) < p_in_4 {
                *inc = true;
            }
        }
        self.close(&mut included);
        CrashState {
            at,
            included,
            how: "a random subset of what was pending",
        }
    }

    /// How many operations were pending (issued, not durable) at `at`.
    pub fn pending(&self, at: usize) -> usize {
        (0..at).filter(|&i| self.durable_from[i] >= at).count()
    }

    /// The model `base` with the state's operations applied.
    pub fn build(&self, base: &Model, state: &CrashState) -> Model {
        let mut m = base.clone();
        for (i, inc) in state.included.iter().enumerate() {
            if *inc {
                m.apply(&self.ops[i]);
            }
        }
        m
    }

    /// The acknowledgements recorded before `at`.
    pub fn acked(&self, at: usize) -> Vec<usize> {
        self.ops[..at]
            .iter()
            .filter_map(|op| match op {
                Op::Ack(a) => Some(*a),
                _ => None,
            })
            .collect()
    }
}

/// The directories whose entries `op` changes.
fn dir_touched(op: &Op) -> Vec<u64> {
    match op {
        Op::Create { parent, .. } | Op::Link { parent, .. } | Op::Unlink { parent, .. } => {
            vec![*parent]
        }
        Op::Rename {
            parent, newparent, ..
        } => vec![*parent, *newparent],
        _ => Vec::new(),
    }
}
