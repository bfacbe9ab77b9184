//! The `cairn watch` daemon as its clients and rivals meet it (issue 53): one that does not
//! answer holds no snapshot past its bound, even with its queue of connections full, and of
//! watchers started at once for one workspace exactly one runs, reachable.
//!
//! Seeded: `CAIRN_SEED` picks the seed (default: from the clock, printed).

use crate::ahead::{wait_for, Rng};
use crate::fixtures::{open, Fx};
use cairn_restore::watch::{self, ServeEnd};
use cairn_snapshot::WatchOptions;
use cairn_store::{Classify, ErrorKind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// How long a call may take to return before the test fails.
const DEADLINE: Duration = Duration::from_secs(60);

// Issue 53, item 6: watchers started together each checked that nobody listened, then removed
// the socket and bound their own: two (or more) stayed running, all but one on an unlinked
// socket nothing could reach or stop. A lock decides now.
#[test]
fn watchers_started_at_once_leave_exactly_one_running_and_reachable() {
    let mut rng = Rng::from_env("watchers_started_at_once");
    let fx = Fx::new();
    fx.write("a.txt", b"a\n");
    fx.snap();
    for round in 0..40 {
        let n = 3 + rng.below(6) as usize;
        let workspaces: Vec<_> = (0..n).map(|_| open(fx.dir.path())).collect();
        let watchers: Vec<_> = workspaces
            .iter()
            .map(|w| w.watch(&WatchOptions::default()).expect("a watcher"))
            .collect();
        let stop = AtomicBool::new(false);
        let refused = AtomicUsize::new(0);
        let barrier = std::sync::Barrier::new(n);
        /// Stops the daemons when dropped: also when the test fails, or the scope would
        /// wait for ever.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let ends: Vec<_> = std::thread::scope(|scope| {
            let served: Vec<_> = workspaces
                .iter()
                .zip(watchers)
                .map(|(ws, w)| {
                    let (stop, refused, barrier) = (&stop, &refused, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        let end = watch::serve(ws, w, stop, None, |_| {});
                        refused.fetch_add(usize::from(end.is_err()), Ordering::SeqCst);
                        end
                    })
                })
                .collect();
            let stopping = StopOnDrop(&stop);
            wait_for(
                || refused.load(Ordering::SeqCst) == n - 1,
                &format!("all but one of {n} watchers to refuse (round {round})"),
            );
            // The one left is reachable: it answers, and takes the next snapshot.
            let st = watch::status(fx.ws.store(), fx.ws.id())
                .expect("ask")
                .expect("a watcher answers");
            assert_eq!(st.snapshots, 0);
            fx.write("a.txt", format!("round {round}\n").as_bytes());
            fx.snap();
            let st = watch::status(fx.ws.store(), fx.ws.id())
                .expect("ask")
                .expect("a watcher answers");
            assert_eq!(st.snapshots, 1, "the watcher took the snapshot");
            drop(stopping);
            served
                .into_iter()
                .map(|h| h.join().expect("a watcher's thread"))
                .collect()
        });
        let stopped = ends
            .iter()
            .filter(|e| matches!(e, Ok(ServeEnd::Stopped)))
            .count();
        assert_eq!(stopped, 1, "round {round}: {ends:?}");
        for e in ends.iter().filter_map(|e| e.as_ref().err()) {
            assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
            assert!(
                e.to_string()
                    .contains(&format!("process {}", std::process::id())),
                "the refusal names the running watcher's process: {e}"
            );
        }
    }
}

// Issue 53, item 1: a client waited up to 10 minutes for a daemon that took its connection
// and never answered, and blocked in `connect` for ever once the daemon's queue of
// connections was full. A listener that never accepts stands for such a daemon here.
#[test]
fn a_watcher_that_does_not_answer_holds_no_snapshot_even_with_its_queue_full() {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fx = Fx::new();
    fx.write("a.txt", b"a\n");
    fx.snap();
    let socket = watch::socket_path(fx.ws.store(), fx.ws.id()).expect("the socket's path");
    let dir = std::fs::File::open(socket.parent().expect("its directory")).expect("open");
    // By a short name: a temporary directory's path may be longer than an address holds.
    let short = format!(
        "/proc/self/fd/{}/{}",
        std::os::fd::AsRawFd::as_raw_fd(&dir),
        watch::SOCKET_NAME
    );
    let addr = SocketAddrUnix::new(short.as_str()).expect("an address");
    let unix = || {
        rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .expect("a socket")
    };
    let listener = unix();
    rustix::net::bind(&listener, &addr).expect("bind");
    rustix::net::listen(&listener, 0).expect("listen");
    let mut queued = Vec::new();
    loop {
        let fd = unix();
        match rustix::net::connect(&fd, &addr) {
            Ok(()) => queued.push(fd),
            Err(rustix::io::Errno::AGAIN) => break,
            Err(e) => panic!("connect: {e}"),
        }
        assert!(queued.len() < 1000, "the queue never filled");
    }
    fx.write("a.txt", b"changed\n");
    let (tx, rx) = std::sync::mpsc::channel();
    let dir_path = fx.dir.path().to_path_buf();
    // Detached: on the code before the fix it never returns.
    std::thread::spawn(move || {
        let ws = open(&dir_path);
        let _ = tx.send(ws.snapshot(&ws.snapshot_options(), Default::default()));
    });
    let taken = rx
        .recv_timeout(DEADLINE)
        .expect("the snapshot returned: a watcher that does not answer wedged it")
        .expect("a snapshot");
    let walk = &taken.snapshot.walk;
    assert_eq!(walk.walked, cairn_snapshot::Walked::Full, "{walk:?}");
    assert!(
        walk.reason
            .as_deref()
            .is_some_and(|r| r.contains("did not answer")),
        "{walk:?}"
    );
    assert_eq!(taken.snapshot.stats.files, 1);
    drop(listener);
}
