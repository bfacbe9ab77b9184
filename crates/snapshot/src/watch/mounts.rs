//! The file systems and mounts beneath the root (issue 53): which file systems inotify
//! cannot watch, and the mount table read from `/proc/self/mountinfo`.

use super::*;

/// File systems whose changes inotify does not see (made on another machine, or by a FUSE
/// daemon): `statfs` magic numbers.
pub(super) const UNWATCHABLE_FS: &[(i64, &str)] = &[
    (0x6969, "NFS"),
    (0x517B, "SMB"),
    (0xFF53_4D42, "CIFS"),
    (0xFE53_4D42, "SMB2"),
    (0x6573_5546, "FUSE"),
    (0x0102_1997, "9P"),
    (0x00C3_6400, "Ceph"),
    (0x5346_414F, "AFS"),
    (0x0BD0_0BD0, "Lustre"),
];

/// The mounts beneath the root (issue 53): see the module documentation.
pub(super) struct Mounts {
    /// `/proc/self/mountinfo`, open: `poll` reports `POLLPRI` on it once after each change of
    /// the mount table since the last `poll` of this descriptor (proc(5)).
    pub(super) fd: OwnedFd,
    /// The mounts at or beneath the root: the mount point relative to the root, and the
    /// mount's id (two mounts stacked on one point are two).
    pub(super) under: BTreeSet<(Vec<u8>, u64)>,
    /// A directory was moved: the mount points beneath it moved with it, which changes no
    /// mount and so is not reported, and `under` is read again before it is compared.
    pub(super) moved: bool,
}

/// The mount table of the calling process's mount namespace.
pub(super) const MOUNTINFO: &str = "/proc/self/mountinfo";

/// [`MOUNTINFO`], open to be polled.
pub(super) fn open_mountinfo() -> std::io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    Ok(rustix::fs::open(
        MOUNTINFO,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The mounts at or beneath `root` (a canonical path) in `table`, the text of
/// [`MOUNTINFO`]: each line's first field is the mount's id and its fifth the mount point,
/// with a space, tab, newline or backslash written as `\ooo` in octal.
pub(super) fn mounts_under(table: &[u8], root: &[u8]) -> BTreeSet<(Vec<u8>, u64)> {
    table
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut fields = line.split(|&b| b == b' ');
            let id = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
            let point = unescape_octal(fields.nth(3)?);
            let rel = if root == b"/" {
                point.strip_prefix(b"/")?
            } else {
                match point.strip_prefix(root)? {
                    [] => &[],
                    [b'/', rest @ ..] => rest,
                    _ => return None,
                }
            };
            Some((rel.to_vec(), id))
        })
        .collect()
}

/// A field of [`MOUNTINFO`] with its `\ooo` escapes undone.
pub(super) fn unescape_octal(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let digits = field
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)) && d[0] <= b'3');
        match (field[i], digits) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, b| n * 8 + (b - b'0')));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The name of the file system of `fd` when inotify cannot watch it.
pub(super) fn unwatchable(fd: &OwnedFd) -> Option<&'static str> {
    let st = rustix::fs::fstatfs(fd).ok()?;
    #[allow(clippy::unnecessary_cast)]
    let kind = st.f_type as i64;
    UNWATCHABLE_FS
        .iter()
        .find(|(magic, _)| *magic == kind)
        .map(|(_, name)| *name)
}
