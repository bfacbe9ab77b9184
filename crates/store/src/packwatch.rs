//! Knowing, without listing it, whether `objects/packs/` changed since the last refresh.
//!
//! [`Store::refresh`](crate::Store::refresh) runs before every writer, so a long-lived process
//! (the `cairn watch` daemon, a binding) listed the packs directory at every snapshot: one
//! entry per pack and per index, hundreds in a store not collected for a while, where a
//! watched snapshot does little else (0.7 ms of a 3 ms snapshot with 258 packs). An inotify
//! watch on the directory says instead whether anything that matters happened there: an index
//! not yet loaded appeared, or one loaded went away. Only then is it listed again.
//!
//! The kernel queues an event inside the call that creates, renames or removes the name, before
//! that call returns; so once a collection removed a pack (and released its lock, which a
//! writer's operation waits for), the removal is in the queue when the writer's refresh reads
//! it. A queue overflow, the directory moved or removed, or a watch that cannot be set up
//! (`max_user_instances` reached) makes every refresh list the directory, as before. So does
//! every refresh elsewhere than Linux, where there is no inotify.
//!
//! The watch is set up at a process's third listing, not its first: closing an inotify
//! instance that holds a watch waits for the kernel's fsnotify SRCU grace period
//! (`fsnotify_destroy_group` flushes the mark reaper): 0.04 ms on an idle machine of two
//! cores, 4 ms median beside two spinning processes, 16 ms while a test suite ran, as one does
//! while an agent works. Every one-shot `cairn` command paid it at exit, to spare a listing or
//! two of a few dozen names.

use crate::id::ObjectId;
#[cfg(target_os = "linux")]
use rustix::fd::OwnedFd;
#[cfg(target_os = "linux")]
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
#[cfg(target_os = "linux")]
use rustix::io::Errno;
#[cfg(target_os = "linux")]
use std::mem::MaybeUninit;
use std::path::Path;

/// How many listings a process makes before it sets the watch up (see the module's
/// documentation).
#[cfg(target_os = "linux")]
const LISTINGS_BEFORE_WATCH: u32 = 2;

/// The watch on one store's packs directory (none before the third listing, or when it could
/// not be set up).
#[derive(Debug, Default)]
pub(crate) struct PacksWatch {
    #[cfg(target_os = "linux")]
    fd: Option<OwnedFd>,
    /// The listings made without a watch.
    #[cfg(target_os = "linux")]
    unwatched: u32,
}

#[cfg(target_os = "linux")]
/// What happened to one index's name, as an event says.
enum Seen {
    /// Made or renamed into the directory.
    Added(ObjectId),
    /// Removed or renamed away.
    Removed(ObjectId),
    /// Something else, or a name that is not an index.
    Other,
}

#[cfg(target_os = "linux")]
impl PacksWatch {
    /// Whether nothing that matters changed in the directory since the last [`arm`](Self::arm):
    /// every index added is loaded already (`loaded` says), no index loaded was removed.
    /// Reads every event queued. `false` when there is no watch (the directory is then listed).
    pub(crate) fn unchanged(&mut self, loaded: impl Fn(&ObjectId) -> bool) -> bool {
        let Some(fd) = &self.fd else {
            return false;
        };
        let mut same = true;
        let mut keep = true;
        drain(fd, |mask, name| {
            if mask.intersects(
                ReadFlags::QUEUE_OVERFLOW
                    | ReadFlags::IGNORED
                    | ReadFlags::DELETE_SELF
                    | ReadFlags::MOVE_SELF
                    | ReadFlags::UNMOUNT,
            ) {
                same = false;
                // The watch is gone (or its events are): set it up again before the listing.
                keep = !mask.intersects(
                    ReadFlags::IGNORED
                        | ReadFlags::DELETE_SELF
                        | ReadFlags::MOVE_SELF
                        | ReadFlags::UNMOUNT,
                );
                return;
            }
            match seen(mask, name) {
                Seen::Added(id) if !loaded(&id) => same = false,
                Seen::Removed(id) if loaded(&id) => same = false,
                _ => {}
            }
        })
        .unwrap_or_else(|_| {
            same = false;
            keep = false;
        });
        if !keep {
            self.fd = None;
        }
        same
    }

    /// Called just before the directory is listed: sets the watch up if there is none and
    /// [`LISTINGS_BEFORE_WATCH`] listings were made without one (a failure leaves none, and the
    /// next refresh lists again) and drops what is queued, all of which the listing sees.
    pub(crate) fn arm(&mut self, dir: &Path) {
        if self.fd.is_none() {
            if self.unwatched >= LISTINGS_BEFORE_WATCH {
                self.fd = watch(dir);
            }
            self.unwatched = self.unwatched.saturating_add(1);
        }
        if let Some(fd) = &self.fd {
            if drain(fd, |_, _| {}).is_err() {
                self.fd = None;
            }
        }
    }
}

/// Elsewhere than Linux: no watch, so every refresh lists the directory.
#[cfg(not(target_os = "linux"))]
impl PacksWatch {
    /// Never known unchanged: the directory is listed.
    pub(crate) fn unchanged(&mut self, _loaded: impl Fn(&ObjectId) -> bool) -> bool {
        false
    }

    /// Nothing to set up.
    pub(crate) fn arm(&mut self, _dir: &Path) {}
}

#[cfg(target_os = "linux")]
/// A new non-blocking inotify instance watching `dir`'s names, or `None`.
fn watch(dir: &Path) -> Option<OwnedFd> {
    let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC).ok()?;
    let flags = WatchFlags::CREATE
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW;
    inotify::add_watch(&fd, dir, flags).ok()?;
    Some(fd)
}

#[cfg(target_os = "linux")]
/// Hands every queued event to `each` (its mask and name), until the queue is empty.
fn drain(fd: &OwnedFd, mut each: impl FnMut(ReadFlags, Option<&[u8]>)) -> Result<(), Errno> {
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut reader = inotify::Reader::new(fd, &mut buf);
    loop {
        match reader.next() {
            Ok(e) => each(e.events(), e.file_name().map(|n| n.to_bytes())),
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

#[cfg(target_os = "linux")]
/// What an event says of an index's name.
fn seen(mask: ReadFlags, name: Option<&[u8]>) -> Seen {
    let id = name
        .and_then(|n| n.strip_suffix(b".idx"))
        .and_then(|hex| std::str::from_utf8(hex).ok())
        .and_then(|hex| ObjectId::from_hex(hex).ok());
    match id {
        Some(id) if mask.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) => Seen::Added(id),
        Some(id) if mask.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) => Seen::Removed(id),
        _ => Seen::Other,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn idx_name(byte: u8) -> String {
        format!("{}.idx", ObjectId([byte; 32]).to_hex())
    }

    #[test]
    fn a_watch_says_unchanged_only_while_no_index_it_does_not_know_comes_or_goes() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let packs = dir.path().join("packs");
        std::fs::create_dir(&packs).expect("mkdir");
        let mut w = PacksWatch::default();
        for listing in 0..LISTINGS_BEFORE_WATCH {
            assert!(
                !w.unchanged(|_| true),
                "no watch before listing {listing}: the directory must be listed"
            );
            w.arm(&packs);
            assert!(w.fd.is_none(), "a watch set up at listing {listing}");
        }
        assert!(!w.unchanged(|_| true), "no watch yet");
        w.arm(&packs);
        assert!(w.fd.is_some(), "no watch at the third listing");
        assert!(w.unchanged(|_| false), "nothing happened");

        std::fs::write(packs.join(idx_name(1)), b"").expect("write");
        assert!(!w.unchanged(|_| false), "an index not loaded appeared");
        w.arm(&packs);
        std::fs::write(packs.join(idx_name(2)), b"").expect("write");
        assert!(
            w.unchanged(|id| id.0[0] == 2),
            "an index already loaded appeared"
        );
        std::fs::write(packs.join("x.pack"), b"").expect("write");
        std::fs::write(packs.join("notes"), b"").expect("write");
        assert!(w.unchanged(|_| false), "names that are not indexes");

        std::fs::remove_file(packs.join(idx_name(1))).expect("rm");
        assert!(w.unchanged(|_| false), "an index never loaded went away");
        std::fs::remove_file(packs.join(idx_name(2))).expect("rm");
        assert!(!w.unchanged(|_| true), "an index loaded went away");
        w.arm(&packs);
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, b"").expect("write");
        std::fs::rename(&elsewhere, packs.join(idx_name(3))).expect("mv");
        assert!(!w.unchanged(|_| false), "an index renamed in");
        w.arm(&packs);
        std::fs::rename(packs.join(idx_name(3)), &elsewhere).expect("mv");
        assert!(!w.unchanged(|_| true), "an index renamed away");
        w.arm(&packs);

        // The directory itself moved away and another put in its place: the watch is dropped
        // and set up again on the new one.
        std::fs::rename(&packs, dir.path().join("old")).expect("mv");
        std::fs::create_dir(&packs).expect("mkdir");
        assert!(!w.unchanged(|_| true), "the directory moved");
        assert!(w.fd.is_none(), "the old directory's watch is dropped");
        w.arm(&packs);
        std::fs::write(packs.join(idx_name(4)), b"").expect("write");
        assert!(!w.unchanged(|_| false), "the new directory is watched");
    }
}
