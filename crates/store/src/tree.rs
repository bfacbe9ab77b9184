//! Trees: one directory listing each, in a canonical byte encoding.
//!
//! The encoding (version 1), all integers little-endian:
//!
//! ```text
//! magic    4 bytes  "CTRE"
//! version  u8       1
//! count    u32      number of entries
//! entries, strictly ascending by name bytes (so no two share a name):
//!   kind   u8       1 = file, 2 = symlink, 3 = directory
//!   mode   u32      the full st_mode: file-type bits matching `kind`, and permission bits
//!   size   u64      file: its length; symlink: the target's length; directory: bytes of all files below
//!   id     32 bytes file and symlink: the blob id (of the content, of the target); directory: the tree id
//!   nlen   u16      length of the name, 1..=4096
//!   name   nlen     raw bytes; never containing `/` or NUL, never `.` or `..`
//! ```
//!
//! A tree's id is the SHA-256 of these bytes. [`Tree::decode`] checks all of it and returns
//! `CORRUPT` for any violation: nothing is written from a tree that fails.

use crate::error::{Error, Result};
use crate::id::{ObjectId, TreeId};
use std::path::Path;

/// The magic at the start of every encoded tree.
pub const TREE_MAGIC: &[u8; 4] = b"CTRE";
/// The tree encoding version this build writes and reads.
pub const TREE_VERSION: u8 = 1;
/// The longest name a tree accepts, in bytes.
pub const MAX_NAME_LEN: usize = 4096;

const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFDIR: u32 = 0o040000;

/// What a tree entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "FileKind"))]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file; its id names a blob of its content.
    File,
    /// A symbolic link; its id names a blob of its target bytes.
    Symlink,
    /// A directory; its id names a tree.
    Dir,
}

impl EntryKind {
    fn code(self) -> u8 {
        match self {
            EntryKind::File => 1,
            EntryKind::Symlink => 2,
            EntryKind::Dir => 3,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        match c {
            1 => Some(EntryKind::File),
            2 => Some(EntryKind::Symlink),
            3 => Some(EntryKind::Dir),
            _ => None,
        }
    }

    /// The `st_mode` file-type bits of this kind.
    pub fn type_bits(self) -> u32 {
        match self {
            EntryKind::File => S_IFREG,
            EntryKind::Symlink => S_IFLNK,
            EntryKind::Dir => S_IFDIR,
        }
    }

    /// The kind whose file-type bits `mode` carries, if it is one a tree holds.
    pub fn of_mode(mode: u32) -> Option<Self> {
        match mode & S_IFMT {
            S_IFREG => Some(EntryKind::File),
            S_IFLNK => Some(EntryKind::Symlink),
            S_IFDIR => Some(EntryKind::Dir),
            _ => None,
        }
    }
}

/// One entry of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// The entry's name: raw bytes, without `/` or NUL, never `.` or `..`.
    pub name: Vec<u8>,
    /// What it is.
    pub kind: EntryKind,
    /// The full `st_mode`, type bits included.
    pub mode: u32,
    /// File length, symlink target length, or the bytes of all files below a directory.
    pub size: u64,
    /// The blob (file, symlink) or tree (directory) it names.
    pub id: ObjectId,
}

impl TreeEntry {
    /// The permission bits (`mode & 0o7777`).
    pub fn permissions(&self) -> u32 {
        self.mode & 0o7777
    }

    /// The entry with its name borrowed.
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            name: &self.name,
            kind: self.kind,
            mode: self.mode,
            size: self.size,
            id: self.id,
        }
    }
}

/// A tree entry whose name is borrowed, for [`encode_sorted`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    /// The entry's name (see [`TreeEntry::name`]).
    pub name: &'a [u8],
    /// What it is.
    pub kind: EntryKind,
    /// The full `st_mode`, type bits included.
    pub mode: u32,
    /// File length, symlink target length, or the bytes of all files below a directory.
    pub size: u64,
    /// The blob (file, symlink) or tree (directory) it names.
    pub id: ObjectId,
}

impl EntryRef<'_> {
    /// The entry, its name copied.
    pub fn to_entry(&self) -> TreeEntry {
        TreeEntry {
            name: self.name.to_vec(),
            kind: self.kind,
            mode: self.mode,
            size: self.size,
            id: self.id,
        }
    }
}

/// Encodes a tree straight from `entries` already sorted by name, without building a [`Tree`]
/// and so without owning their names (a snapshot rebuilds each directory on the way to a
/// change from its stat cache record, hundreds of entries whose names it would copy only to
/// encode them): the bytes `Tree::new(entries)?.encode()` gives and the checks `Tree::new`
/// makes, and entries out of order fail too (`INVALID_ARGUMENT`). Returns the encoding and
/// the tree's total size (see [`Tree::total_size`]).
pub fn encode_sorted<'a>(entries: impl Iterator<Item = EntryRef<'a>>) -> Result<(Vec<u8>, u64)> {
    // A filtered iterator's lower bound is 0: room for as many as it may give instead.
    let (least, most) = entries.size_hint();
    let mut out = encoding_for(most.unwrap_or(least));
    let (mut count, mut size) = (0usize, 0u64);
    let mut prev: Option<&[u8]> = None;
    for e in entries {
        if prev.is_some_and(|p| p > e.name) {
            return Err(Error::InvalidArgument(format!(
                "a tree's entries must be sorted by name: {:?} comes after {:?}",
                String::from_utf8_lossy(e.name),
                String::from_utf8_lossy(prev.unwrap_or_default())
            )));
        }
        check_entry(prev, e.name, e.kind, e.mode)?;
        encode_entry(&mut out, e);
        if e.kind != EntryKind::Symlink {
            size = size.saturating_add(e.size);
        }
        count += 1;
        prev = Some(e.name);
    }
    set_count(&mut out, count);
    Ok((out, size))
}

/// An encoding's header, with room for about `entries` entries (the count is set last).
fn encoding_for(entries: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + entries * 64);
    out.extend_from_slice(TREE_MAGIC);
    out.push(TREE_VERSION);
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}

/// Sets the entry count of an encoding begun by [`encoding_for`].
fn set_count(out: &mut [u8], count: usize) {
    out[5..9].copy_from_slice(&(count as u32).to_le_bytes());
}

fn encode_entry(out: &mut Vec<u8>, e: EntryRef<'_>) {
    out.push(e.kind.code());
    out.extend_from_slice(&e.mode.to_le_bytes());
    out.extend_from_slice(&e.size.to_le_bytes());
    out.extend_from_slice(e.id.as_bytes());
    out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
    out.extend_from_slice(e.name);
}

/// The checks [`Tree::new`] makes of one entry, `prev` the name before it in name order.
fn check_entry(prev: Option<&[u8]>, name: &[u8], kind: EntryKind, mode: u32) -> Result<()> {
    check_name(name).map_err(|why| {
        Error::InvalidArgument(format!(
            "a tree cannot hold {why}: {:?}",
            String::from_utf8_lossy(name)
        ))
    })?;
    if prev == Some(name) {
        return Err(Error::InvalidArgument(format!(
            "a tree cannot hold two entries named {:?}",
            String::from_utf8_lossy(name)
        )));
    }
    if mode & S_IFMT != kind.type_bits() || mode & !(S_IFMT | 0o7777) != 0 {
        return Err(Error::InvalidArgument(format!(
            "mode {mode:o} does not fit a {kind:?} entry"
        )));
    }
    Ok(())
}

/// A directory listing: entries sorted by name bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    entries: Vec<TreeEntry>,
}

/// Checks that `name` may stand in a tree: not empty, at most [`MAX_NAME_LEN`] bytes, no `/`
/// or NUL, not `.` or `..`. Returns what is wrong.
pub fn check_name(name: &[u8]) -> std::result::Result<(), &'static str> {
    if name.is_empty() {
        return Err("an empty name");
    }
    if name.len() > MAX_NAME_LEN {
        return Err("a name longer than 4096 bytes");
    }
    if name == b"." || name == b".." {
        return Err("a name '.' or '..'");
    }
    if name.contains(&b'/') {
        return Err("a name containing '/'");
    }
    if name.contains(&0) {
        return Err("a name containing NUL");
    }
    Ok(())
}

impl Tree {
    /// A tree of `entries`, which are sorted here. Fails (`INVALID_ARGUMENT`) on a bad name, a
    /// duplicate name, or a mode whose type bits do not match the kind.
    pub fn new(mut entries: Vec<TreeEntry>) -> Result<Self> {
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for (i, e) in entries.iter().enumerate() {
            let prev = i.checked_sub(1).map(|p| entries[p].name.as_slice());
            check_entry(prev, &e.name, e.kind, e.mode)?;
        }
        Ok(Tree { entries })
    }

    /// The entries, sorted by name bytes.
    pub fn entries(&self) -> &[TreeEntry] {
        &self.entries
    }

    /// Takes the entries out.
    pub fn into_entries(self) -> Vec<TreeEntry> {
        self.entries
    }

    /// The entry named `name`, found by binary search.
    pub fn get(&self, name: &[u8]) -> Option<&TreeEntry> {
        self.entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Whether the tree has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The total size recorded for the entries (the `size` a parent records for this
    /// directory); at most `u64::MAX`, whatever sizes a hostile tree records.
    pub fn total_size(&self) -> u64 {
        self.entries
            .iter()
            .filter(|e| e.kind != EntryKind::Symlink)
            .fold(0u64, |total, e| total.saturating_add(e.size))
    }

    /// The canonical encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = encoding_for(self.entries.len());
        for e in &self.entries {
            encode_entry(&mut out, e.as_ref());
        }
        set_count(&mut out, self.entries.len());
        out
    }

    /// The tree's id: the SHA-256 of its encoding.
    pub fn id(&self) -> TreeId {
        TreeId(ObjectId::of(&self.encode()))
    }

    /// Decodes and validates `bytes`. `expected` is the id it was asked for (checked when given);
    /// `origin` names where the bytes came from, for the error.
    pub fn decode(bytes: &[u8], expected: Option<&TreeId>, origin: &Path) -> Result<Tree> {
        let what = || match expected {
            Some(id) => format!("tree {}", id.short()),
            None => "tree".to_string(),
        };
        let bad = |detail: String| Error::corrupt(what(), origin, detail);
        if let Some(id) = expected {
            let actual = ObjectId::of(bytes);
            if actual != id.0 {
                return Err(bad(format!("its bytes hash to {}", actual.short())));
            }
        }
        let mut r = Reader { bytes, pos: 0 };
        let magic = r.take(4).ok_or_else(|| bad("truncated header".into()))?;
        if magic != TREE_MAGIC {
            return Err(bad("bad magic".into()));
        }
        let version = r.u8().ok_or_else(|| bad("truncated header".into()))?;
        if version != TREE_VERSION {
            return Err(bad(format!("unknown tree version {version}")));
        }
        let count = r.u32().ok_or_else(|| bad("truncated header".into()))? as usize;
        // Each entry takes at least 48 bytes: refuse counts the input cannot hold before allocating.
        if count > bytes.len() / 48 {
            return Err(bad(format!(
                "entry count {count} does not fit in {} bytes",
                bytes.len()
            )));
        }
        let mut entries: Vec<TreeEntry> = Vec::with_capacity(count);
        for i in 0..count {
            let trunc = || bad(format!("truncated at entry {i}"));
            let kind_code = r.u8().ok_or_else(trunc)?;
            let kind = EntryKind::from_code(kind_code)
                .ok_or_else(|| bad(format!("entry {i} has unknown kind {kind_code}")))?;
            let mode = r.u32().ok_or_else(trunc)?;
            let size = r.u64().ok_or_else(trunc)?;
            let id_bytes = r.take(32).ok_or_else(trunc)?;
            let nlen = r.u16().ok_or_else(trunc)? as usize;
            let name = r.take(nlen).ok_or_else(trunc)?;
            check_name(name).map_err(|why| bad(format!("entry {i} has {why}")))?;
            if mode & S_IFMT != kind.type_bits() || mode & !(S_IFMT | 0o7777) != 0 {
                return Err(bad(format!(
                    "entry {i} has mode {mode:o}, which does not fit a {kind:?}"
                )));
            }
            if let Some(prev) = entries.last() {
                if prev.name.as_slice() >= name {
                    return Err(bad(format!(
                        "entry {i} ({:?}) is not sorted after {:?}, or repeats it",
                        String::from_utf8_lossy(name),
                        String::from_utf8_lossy(&prev.name)
                    )));
                }
            }
            let mut id = [0u8; 32];
            id.copy_from_slice(id_bytes);
            entries.push(TreeEntry {
                name: name.to_vec(),
                kind,
                mode,
                size,
                id: ObjectId(id),
            });
        }
        if r.pos != bytes.len() {
            return Err(bad(format!(
                "{} trailing bytes after the last entry",
                bytes.len() - r.pos
            )));
        }
        Ok(Tree { entries })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("take(4) gives 4 bytes")))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("take(8) gives 8 bytes")))
    }
}
