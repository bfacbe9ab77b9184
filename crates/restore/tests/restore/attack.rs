//! Attacks: nothing outside the root changes, ever.

use crate::fixtures::{picture, Fx};
use cairn_restore::RestoreOptions;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn outside(fx: &Fx) -> std::path::PathBuf {
    let o = fx.dir.path().join("outside");
    std::fs::create_dir_all(&o).expect("outside");
    std::fs::write(o.join("secret.txt"), b"secret").expect("write");
    o
}

#[test]
fn a_symlink_planted_where_a_file_will_be_written_is_replaced_not_followed() {
    let fx = Fx::new();
    fx.write("f.txt", b"snapshot content");
    let snap = fx.snap();
    let out = outside(&fx);
    std::fs::remove_file(fx.root().join("f.txt")).expect("rm");
    std::os::unix::fs::symlink(out.join("secret.txt"), fx.root().join("f.txt")).expect("plant");
    let before = picture(&out);
    fx.ws
        .restore(&snap.id, &RestoreOptions::default())
        .expect("restore");
    assert_eq!(picture(&out), before);
    assert_eq!(fx.read("f.txt"), b"snapshot content");
    assert!(!std::fs::symlink_metadata(fx.root().join("f.txt"))
        .expect("lstat")
        .file_type()
        .is_symlink());
}

#[test]
fn a_hard_link_to_a_file_outside_is_replaced_and_the_outside_file_is_untouched() {
    let fx = Fx::new();
    fx.write("f.txt", b"snapshot content");
    let snap = fx.snap();
    let out = outside(&fx);
    std::fs::remove_file(fx.root().join("f.txt")).expect("rm");
    std::fs::hard_link(out.join("secret.txt"), fx.root().join("f.txt")).expect("link");
    fx.write("extra.txt", b"to delete");
    std::fs::remove_file(fx.root().join("extra.txt")).expect("rm");
    std::fs::hard_link(out.join("secret.txt"), fx.root().join("extra.txt")).expect("link");
    let before = picture(&out);
    fx.ws
        .restore(&snap.id, &RestoreOptions::default())
        .expect("restore");
    assert_eq!(picture(&out), before);
    assert_eq!(
        std::fs::read(out.join("secret.txt")).expect("read"),
        b"secret"
    );
    assert_eq!(fx.read("f.txt"), b"snapshot content");
    assert!(!fx.root().join("extra.txt").exists());
}

#[test]
fn a_parent_directory_swapped_for_a_symlink_while_a_restore_runs_never_leads_outside() {
    for round in 0..20 {
        let fx = Fx::new();
        for i in 0..40 {
            fx.write(&format!("d/f{i}.txt"), format!("content {i}").as_bytes());
        }
        let snap = fx.snap();
        for i in 0..40 {
            fx.write(&format!("d/f{i}.txt"), b"edited");
        }
        fx.write("d/new.txt", b"new");
        let out = outside(&fx);
        for i in 0..40 {
            std::fs::write(out.join(format!("f{i}.txt")), b"outside").expect("write");
        }
        std::fs::write(out.join("new.txt"), b"outside").expect("write");
        let before = picture(&out);
        let stop = Arc::new(AtomicBool::new(false));
        let racer = {
            let stop = stop.clone();
            let root = fx.root();
            let out = out.clone();
            std::thread::spawn(move || {
                let d = root.join("d");
                let aside = root.join("d.aside");
                while !stop.load(Ordering::Relaxed) {
                    if std::fs::rename(&d, &aside).is_ok() {
                        let _ = std::os::unix::fs::symlink(&out, &d);
                        std::thread::yield_now();
                        let _ = std::fs::remove_file(&d);
                        let _ = std::fs::rename(&aside, &d);
                    }
                }
            })
        };
        // The restore may succeed or fail; either way nothing outside may change.
        let _ = fx.ws.restore(&snap.id, &RestoreOptions::default());
        stop.store(true, Ordering::Relaxed);
        racer.join().expect("racer");
        assert_eq!(
            picture(&out),
            before,
            "round {round}: something outside the root changed"
        );
    }
}
