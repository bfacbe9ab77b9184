//! A short agent conversation on real files: two turns whose tool calls write files and run
//! shell commands, a dry run and a rewind of files and conversation, an undo of the file part,
//! and a fork with its files into another workspace. Prints every report as JSON.
//!
//! ```sh
//! cargo run -p cairn-rewind --example agent_session
//! ```

use cairn_restore::{Workspace, WorkspaceOptions};
use cairn_rewind::{
    AppendOptions, Checkpoints, EntryId, ForkOptions, NewEntry, RewindOptions, Run, RunOptions,
    ThreadId, Threads, ThreadsOptions,
};
use std::error::Error;
use std::path::Path;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn Error>> {
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("project");
    std::fs::create_dir_all(root.join("src"))?;
    std::fs::write(root.join("src/greet.txt"), "hello\n")?;
    let ws = Arc::new(Workspace::open(
        &root,
        WorkspaceOptions {
            id: Some("project".into()),
            ..Default::default()
        },
    )?);
    // The thread database lives in the workspace's store.
    let threads = Threads::open_in_store(ws.store().path(), ThreadsOptions::default())?;
    let chat = threads
        .create_thread(
            Some("chat".into()),
            serde_json::json!({"title": "greetings"}),
        )?
        .id;
    let run = threads.begin_run(
        &chat,
        RunOptions {
            workspace: Some(ws.clone()),
            checkpoints: Some(Checkpoints::default()),
            ..Default::default()
        },
    )?;

    // Turn 1: a tool edits a file, a shell command builds something.
    let say = |entry: NewEntry| {
        threads.append(
            &chat,
            entry,
            &AppendOptions {
                run: Some(run.clone()),
                ..Default::default()
            },
        )
    };
    let u1 = say(NewEntry::user("Add a name to the greeting"))?;
    println!(
        "user message {} with checkpoint {:?}",
        u1.entry.id,
        u1.checkpoint.as_ref().map(|c| c.snapshot_id.short())
    );
    tool(&threads, &run, "write_file", || {
        std::fs::write(root.join("src/greet.txt"), "hello, world\n")
    })?;
    tool(&threads, &run, "shell", || {
        shell(&root, "cat src/greet.txt > build.txt")
    })?;
    let a1 = say(NewEntry::assistant("Done: the greeting names the world."))?
        .entry
        .id;

    // Turn 2: the agent goes too far.
    let u2 = say(NewEntry::user("Now make it shout"))?;
    tool(&threads, &run, "write_file", || {
        std::fs::write(root.join("src/greet.txt"), "HELLO, WORLD!!!\n")
    })?;
    tool(&threads, &run, "shell", || {
        shell(&root, "rm build.txt && echo loud > loud.txt")
    })?;
    say(NewEntry::assistant("Done: it shouts."))?;
    threads.end_run(&run)?;
    println!(
        "user message {} with checkpoint {:?}",
        u2.entry.id,
        u2.checkpoint.as_ref().map(|c| c.snapshot_id.short())
    );
    println!(
        "checkpoints: {}",
        serde_json::to_string_pretty(&threads.list_checkpoints(&chat)?)?
    );
    show(&root, "before the rewind")?;

    // Rewind to the end of turn 1, files included: a dry run first.
    let files = RewindOptions {
        files: Some(true),
        workspace: Some(ws.clone()),
        ..Default::default()
    };
    let plan = threads.rewind(
        &chat,
        &a1,
        &RewindOptions {
            dry_run: true,
            ..files.clone()
        },
    )?;
    println!("dry run: {}", serde_json::to_string_pretty(&plan)?);
    let report = threads.rewind(
        &chat,
        &a1,
        &RewindOptions {
            key: Some("undo-shout".into()),
            ..files.clone()
        },
    )?;
    println!("rewind: {}", serde_json::to_string_pretty(&report)?);
    show(&root, "after the rewind")?;
    print_branch(&threads, &chat)?;

    // The safety snapshot undoes the file part.
    if let Some(safety) = report.files.as_ref().and_then(|f| f.safety_snapshot_id) {
        ws.restore(
            &safety,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )?;
        show(&root, "after undoing the file part")?;
        let again = ws.restore(
            &u2.checkpoint.as_ref().ok_or("a checkpoint")?.snapshot_id,
            &Default::default(),
            &Default::default(),
            Default::default(),
        )?;
        println!(
            "back to the rewound files: {} restored",
            again.summary.restored.len()
        );
    }

    // Fork the thread from the end of turn 1 into a workspace of its own, with its files.
    let other_root = dir.path().join("project-try-2");
    std::fs::create_dir_all(&other_root)?;
    let other = Arc::new(Workspace::open(
        &other_root,
        WorkspaceOptions {
            id: Some("try-2".into()),
            ..Default::default()
        },
    )?);
    let fork = threads.fork(
        &chat,
        &a1,
        &ForkOptions {
            files: true,
            workspace: Some(other.clone()),
            source: Some(ws.clone()),
            new_thread_id: Some("chat-try-2".into()),
            ..Default::default()
        },
    )?;
    println!("fork: {}", serde_json::to_string_pretty(&fork)?);
    show(&other_root, "the fork's workspace")?;
    print_branch(&threads, &fork.thread_id)?;

    for event in threads.events_since(0, 1000)? {
        println!("event {:>3} {:?} {}", event.cursor, event.kind, event.data);
    }
    Ok(())
}

/// Runs a tool call, counted while it runs.
fn tool(
    threads: &Threads,
    run: &Run,
    name: &str,
    body: impl FnOnce() -> std::io::Result<()>,
) -> Result<(), Box<dyn Error>> {
    let call = threads.tool_start(run, name)?;
    let result = body();
    threads.tool_finish(&call)?;
    threads.append(
        run.thread_id(),
        NewEntry::new(
            cairn_rewind::EntryKind::Tool,
            format!("{name}: {}", if result.is_ok() { "ok" } else { "failed" }),
        ),
        &AppendOptions {
            run: Some(run.clone()),
            ..Default::default()
        },
    )?;
    Ok(result?)
}

fn shell(root: &Path, script: &str) -> std::io::Result<()> {
    let status = std::process::Command::new("sh")
        .args(["-c", script])
        .current_dir(root)
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "`{script}` failed: {status}"
        )))
    }
}

fn show(root: &Path, when: &str) -> std::io::Result<()> {
    println!("files {when}:");
    let mut names: Vec<_> = walk(root)?;
    names.sort();
    for name in names {
        let text = std::fs::read_to_string(root.join(&name)).unwrap_or_default();
        println!("  {name}: {}", text.trim_end());
    }
    Ok(())
}

fn walk(root: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let path = entry.path();
            if entry.file_name() == ".cairn" {
                continue;
            }
            if entry.file_type()?.is_dir() {
                stack.push(path);
            } else if let Ok(rel) = path.strip_prefix(root) {
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    Ok(out)
}

fn print_branch(threads: &Threads, thread: &ThreadId) -> Result<(), Box<dyn Error>> {
    println!("active branch of {thread}:");
    for e in threads.active_branch(thread)? {
        let files = if e.checkpoint.is_some() {
            " [files]"
        } else {
            ""
        };
        println!(
            "  {} {:?}{files}: {}",
            e.id,
            e.kind,
            String::from_utf8_lossy(&e.payload)
        );
    }
    let cut: Vec<EntryId> = threads
        .entries(thread, true)?
        .into_iter()
        .filter(|e| !e.on_active_branch)
        .map(|e| e.id)
        .collect();
    println!("  ({} entries on other branches)", cut.len());
    Ok(())
}
