//! The service's startup gate (issue 59).

use super::*;

/// A served workspace with an empty thread database.
fn service() -> (tempfile::TempDir, Arc<Service>) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path().join("project");
    std::fs::create_dir(&root).expect("the project directory");
    let ctx = Ctx {
        store: Some(dir.path().join("store")),
        ..Ctx::new(Some(root), None, true)
    };
    let opened = crate::threads::open(&ctx, true).expect("the workspace and its threads");
    (dir, Arc::new(Service::new(ctx, opened, "cairn serve")))
}

// Issue 59: until startup recovery is done, what changes files is BUSY, naming the journal.
#[test]
fn calls_that_change_files_are_busy_naming_the_journal_until_recovery_is_done() {
    let (_dir, s) = service();
    assert!(s.ready().is_ok());
    *lock(&s.recovering) = Some("the restore of journal j-1234".into());
    let e = s.ready().expect_err("busy while recovering");
    assert_eq!(e.kind, Some(ErrorKind::Busy));
    assert!(e.line().contains("journal j-1234"), "{}", e.line());
    *lock(&s.recovering) = None;
    assert!(s.ready().is_ok());
}
