//! `cairn demo`: the whole story in a temporary directory, printed step by step. Every step runs
//! this very binary as a separate process, exactly as a person would type it.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use cairn_store::{ErrorKind, SnapshotId, Store, StoreOptions};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One step of the demo, as `cairn demo --json` reports it.
#[derive(Debug, Serialize)]
pub struct Step {
    /// What the step shows.
    pub title: String,
    /// The command line run (`cairn …` or `sh -c …`), if the step ran one.
    pub command: Option<String>,
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// What it printed (stdout, then stderr).
    pub output: String,
}

/// What `cairn demo --json` prints.
#[derive(Debug, Serialize)]
pub struct DemoJson {
    /// The directory the story ran in (removed unless `--keep`).
    pub directory: PathBuf,
    /// Whether it was kept.
    pub kept: bool,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

struct Demo {
    exe: PathBuf,
    project: PathBuf,
    json: bool,
    steps: Vec<Step>,
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}\n"))
        .collect::<String>()
}

impl Demo {
    fn say(&mut self, title: &str) {
        if !self.json {
            println!("\n{title}");
        }
        self.steps.push(Step {
            title: title.to_string(),
            command: None,
            exit_code: None,
            output: String::new(),
        });
    }

    fn record(&mut self, shown: String, code: i32, output: String) {
        if !self.json {
            println!("  $ {shown}");
            print!("{}", indent(&output));
        }
        if let Some(last) = self.steps.last_mut() {
            if last.command.is_none() {
                last.command = Some(shown);
                last.exit_code = Some(code);
                last.output = output;
                return;
            }
        }
        self.steps.push(Step {
            title: String::new(),
            command: Some(shown),
            exit_code: Some(code),
            output,
        });
    }

    /// Runs `cairn ARGS` in the project; fails unless it exits with `expect`.
    fn cairn(&mut self, args: &[&str], expect: i32) -> Result<String> {
        let out = Command::new(&self.exe)
            .arg("-C")
            .arg(&self.project)
            .args(args)
            .env_remove(crate::ctx::FORCE_PROMPT_ENV)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| {
                CliError::new(
                    ErrorKind::Io,
                    format!("cannot run {}: {e}", self.exe.display()),
                )
                .with_path(&self.exe)
            })?;
        let code = out.status.code().unwrap_or(-1);
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let shown = format!("cairn {}", args.join(" "));
        self.record(shown.clone(), code, text.clone());
        if code != expect {
            return Err(CliError::new(
                ErrorKind::Panic,
                format!("the demo step `{shown}` exited with {code}, not {expect}: {text}"),
            ));
        }
        Ok(text)
    }

    /// Runs a shell command in the project, as an agent's tool would.
    fn sh(&mut self, script: &str) -> Result<()> {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&self.project)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot run sh: {e}")))?;
        let code = out.status.code().unwrap_or(-1);
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let shown = if script.contains('\'') {
            format!("sh -c \"{script}\"")
        } else {
            format!("sh -c '{script}'")
        };
        self.record(shown, code, text.clone());
        if code != 0 {
            return Err(CliError::new(
                ErrorKind::Io,
                format!("the demo's shell step `{script}` exited with {code}: {text}"),
            ));
        }
        Ok(())
    }

    /// Writes a file, as an agent's `write_file` tool would.
    fn write(&mut self, rel: &str, content: &str) -> Result<()> {
        let path = self.project.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CliError::from_io("create", parent, e))?;
        }
        std::fs::write(&path, content).map_err(|e| CliError::from_io("write", &path, e))?;
        self.record(
            format!("write_file {rel}"),
            0,
            format!("({} bytes)\n", content.len()),
        );
        Ok(())
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.project.join(rel)).ok()
    }

    fn check(&self, what: &str, ok: bool) -> Result<()> {
        if ok {
            if !self.json {
                println!("  ok: {what}");
            }
            Ok(())
        } else {
            Err(CliError::new(
                ErrorKind::Panic,
                format!("the demo expected {what}, and it is not so"),
            ))
        }
    }

    /// The newest snapshot of the store.
    fn newest(&self) -> Result<SnapshotId> {
        let store = Store::open(
            self.project.join(".cairn"),
            StoreOptions {
                create: false,
                ..StoreOptions::default()
            },
        )?;
        let (list, _) = store.list_snapshots()?;
        list.last()
            .map(|e| e.id)
            .ok_or_else(|| CliError::new(ErrorKind::NotFound, "the demo's store has no snapshot"))
    }
}

impl CliError {
    fn from_io(action: &str, path: &Path, e: std::io::Error) -> Self {
        CliError::new(
            ErrorKind::of_io(&e),
            format!("cannot {action} {}: {e}", path.display()),
        )
        .with_path(path)
    }
}

const MAIN_V1: &str = "fn main() {\n    println!(\"hello\");\n}\n";
const MAIN_V2: &str = "fn main() {\n    let name = std::env::args().nth(1).unwrap_or_default();\n    println!(\"hello, {name}\");\n}\n";

pub(crate) fn demo(ctx: &Ctx, keep: bool) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot find the cairn binary: {e}")))?;
    let tmp = tempfile::Builder::new()
        .prefix("cairn-demo-")
        .tempdir()
        .map_err(|e| {
            CliError::new(
                ErrorKind::Io,
                format!("cannot make a temporary directory: {e}"),
            )
        })?;
    let project = tmp.path().join("project");
    std::fs::create_dir(&project).map_err(|e| CliError::from_io("create", &project, e))?;
    let mut d = Demo {
        exe,
        project: project.clone(),
        json: ctx.json,
        steps: Vec::new(),
    };
    if !d.json {
        println!("Cairn demo: a time machine for an agent's workspace.");
        println!(
            "Everything happens in {} ({}).",
            project.display(),
            if keep {
                "kept afterwards"
            } else {
                "removed at the end; --keep keeps it"
            }
        );
    }
    story(&mut d)?;
    if !d.json {
        println!(
            "\nThat is the whole story: every change was planned first, asked for, and undoable."
        );
        println!("Try it on your own project: `cairn snapshot`, edit, `cairn diff <id> --patch`, `cairn restore <id>`.");
    }
    let directory = tmp.path().to_path_buf();
    if keep {
        let _ = tmp.keep();
    }
    if ctx.json {
        let json = DemoJson {
            directory,
            kept: keep,
            steps: d.steps,
        };
        ctx.emit(&json, String::new)?;
    } else if keep {
        println!("The directory is kept: {}", directory.display());
    }
    Ok(())
}

fn story(d: &mut Demo) -> Result<()> {
    d.say("1. A workspace: a small project an agent is about to edit.");
    d.write("src/main.rs", MAIN_V1)?;
    d.write("README.md", "# hello\n\nSays hello.\n")?;
    d.write("notes.txt", "remember: keep it simple\n")?;

    d.say("2. A checkpoint before the agent's turn: only what changed is ever stored again.");
    d.cairn(&["snapshot", "--label", "start"], 0)?;

    d.say("3. The agent's turn: it edits a file, and its shell commands delete and create others.");
    d.write("src/main.rs", MAIN_V2)?;
    d.sh("rm notes.txt && mkdir -p build && printf 'binary\\000blob' > build/out.bin && echo 'Takes a name.' >> README.md")?;
    d.cairn(&["snapshot", "--label", "turn-1"], 0)?;

    d.say("4. What the turn changed, as a patch (binary files are named, not shown).");
    d.cairn(&["diff", "start", "turn-1", "--patch"], 0)?;
    d.cairn(&["list"], 0)?;

    d.say("5. Going back is planned first: a dry run lists every change and changes nothing.");
    d.cairn(&["restore", "start", "--dry-run"], 0)?;
    d.check(
        "the dry run left the files alone",
        d.read("notes.txt").is_none() && d.read("src/main.rs").as_deref() == Some(MAIN_V2),
    )?;

    d.say("6. Without a terminal to ask on, and without --yes, a restore refuses (exit code 2).");
    d.cairn(&["restore", "start"], crate::error::EXIT_USAGE)?;

    d.say("7. The restore, confirmed: a safety snapshot is taken first, so it can be undone.");
    d.cairn(&["restore", "start", "--yes"], 0)?;
    let safety = d.newest()?;
    d.check(
        "the files are back as they were at `start`",
        d.read("notes.txt").as_deref() == Some("remember: keep it simple\n")
            && d.read("src/main.rs").as_deref() == Some(MAIN_V1)
            && d.read("build/out.bin").is_none(),
    )?;

    d.say("8. Undo the restore from its safety snapshot: the agent's work comes back.");
    let short = safety.short();
    d.cairn(&["restore", &short, "--yes"], 0)?;
    d.check(
        "the agent's edits are back",
        d.read("src/main.rs").as_deref() == Some(MAIN_V2) && d.read("notes.txt").is_none(),
    )?;

    d.say("9. The store checks itself: every object re-hashed, every snapshot restorable.");
    d.cairn(&["verify"], 0)?;
    Ok(())
}
