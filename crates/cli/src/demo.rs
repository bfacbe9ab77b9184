//! `cairn demo`: the whole story in a temporary directory, printed step by step. Every step runs
//! this very binary as a separate process, exactly as a person would type it.

use crate::ctx::Ctx;
use crate::error::{CliError, Result};
use cairn_store::{ErrorKind, SnapshotId};
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
    #[serde(with = "cairn_store::relpath::os_path")]
    pub directory: PathBuf,
    /// Whether it was kept.
    pub kept: bool,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

struct Demo {
    exe: PathBuf,
    project: PathBuf,
    /// The data directory of the demo's stores (`$CAIRN_HOME` of every step).
    home: PathBuf,
    json: bool,
    steps: Vec<Step>,
    /// The plan a dry run showed: a later step whose output begins with it (the same rewind,
    /// refused or confirmed) says so in one line rather than print it again.
    plan: Option<String>,
}

/// `arg` as a shell would need it typed.
fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
    if plain {
        arg.to_string()
    } else if !arg.contains('\'') {
        format!("'{arg}'")
    } else if !arg.contains(['"', '$', '`']) && !arg.contains("\\\\") {
        format!("\"{arg}\"")
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
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

    /// `cairn -C PROJECT`, with the demo's data directory and none of the caller's settings.
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.arg("-C")
            .arg(&self.project)
            .env_remove(crate::ctx::FORCE_PROMPT_ENV)
            .env_remove(crate::ctx::THREADS_DB_ENV)
            .env_remove(crate::ctx::REMOTE_ENV)
            .env_remove(cairn_restore::home::STORE_ENV)
            .env(cairn_restore::home::HOME_ENV, &self.home)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs `cairn ARGS` in the project; fails unless it exits with `expect`.
    fn cairn(&mut self, args: &[&str], expect: i32) -> Result<String> {
        let out = self.command().args(args).output().map_err(|e| {
            CliError::new(
                ErrorKind::Io,
                format!("cannot run {}: {e}", self.exe.display()),
            )
            .with_path(&self.exe)
        })?;
        let code = out.status.code().unwrap_or(-1);
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let shown = format!(
            "cairn {}",
            args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
        );
        let told = match self.plan.as_deref().and_then(|p| text.strip_prefix(p)) {
            Some(rest) => format!("(the plan the dry run showed)\n{rest}"),
            None => text.clone(),
        };
        self.record(shown.clone(), code, told);
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
        let shown = format!("sh -c {}", quote(script));
        self.record(shown, code, text.clone());
        if code != 0 {
            return Err(CliError::new(
                ErrorKind::Io,
                format!("the demo's shell step `{script}` exited with {code}: {text}"),
            ));
        }
        Ok(())
    }

    /// Appends an entry to the thread `chat`.
    fn append(&mut self, kind: &str, text: &str) -> Result<()> {
        self.cairn(
            &["thread", "append", "chat", "--kind", kind, "--text", text],
            0,
        )
        .map(drop)
    }

    /// Runs a shell command as the agent's tool, and records it in the thread.
    fn tool_sh(&mut self, script: &str) -> Result<()> {
        self.sh(script)?;
        self.append("tool", &format!("sh: {script}"))
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

    /// Runs `cairn --json ARGS` in the project without showing it (to learn ids), and parses
    /// what it prints.
    fn quiet_json(&self, args: &[&str]) -> Result<serde_json::Value> {
        let out = self
            .command()
            .arg("--json")
            .args(args)
            .output()
            .map_err(|e| CliError::new(ErrorKind::Io, format!("cannot run cairn: {e}")))?;
        serde_json::from_slice(&out.stdout).map_err(|e| {
            CliError::new(
                ErrorKind::Panic,
                format!(
                    "the demo step `cairn --json {}` printed no JSON ({e}): {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr)
                ),
            )
        })
    }

    /// The newest snapshot of the store.
    fn newest(&self) -> Result<SnapshotId> {
        let v = self.quiet_json(&["list"])?;
        v["snapshots"]
            .as_array()
            .and_then(|a| a.last())
            .and_then(|s| s["id"].as_str())
            .and_then(|id| SnapshotId::from_hex(id).ok())
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
        home: tmp.path().join("cairn-home"),
        project: project.clone(),
        json: ctx.json,
        steps: Vec::new(),
        plan: None,
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
        println!(
            "Its checkpoints live outside the project, in {} (for your own projects: \
             ~/.local/share/cairn, or $CAIRN_HOME), where cleaning the project cannot reach them.",
            d.home.display()
        );
    }
    story(&mut d)?;
    if !d.json {
        println!(
            "\nThat is the whole story: every change was planned first, asked for, and undoable."
        );
        println!("Try it on your own project: `cairn snapshot`, edit, `cairn diff <id> --patch`, `cairn restore <id>`;");
        println!("or keep a thread: `cairn thread new`, `cairn thread append`, `cairn rewind THREAD ENTRY --files`.");
        if let Ok(exe) = std::env::current_exe() {
            println!(
                "The `cairn` that ran this demo is {}; `cargo install --path crates/cli` from a \
                 checkout puts it on your PATH.",
                exe.display()
            );
        }
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

/// The ids of a thread's entries on its active branch, in order, by kind.
fn entry_ids(d: &Demo, thread: &str, kind: &str) -> Result<Vec<String>> {
    let v = d.quiet_json(&["thread", "log", thread])?;
    Ok(v["entries"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|e| e["kind"] == kind)
                .filter_map(|e| e["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default())
}

const TURN_1_SHELL: &str = "rm notes.txt && mkdir -p build && printf 'binary\\000blob' > build/out.bin && echo 'Takes a name.' >> README.md";
const TURN_2_SHELL: &str = "printf 'all:\\n\\tcargo build\\n' > Makefile && rm README.md";

fn story(d: &mut Demo) -> Result<()> {
    d.say("1. A workspace: a small project an agent is about to edit.");
    d.write("src/main.rs", MAIN_V1)?;
    d.write("README.md", "# hello\n\nSays hello.\n")?;
    d.write("notes.txt", "remember: keep it simple\n")?;

    d.say("2. A thread: the conversation. Before every user message, Cairn checkpoints the files.");
    d.cairn(&["thread", "new", "--id", "chat"], 0)?;
    d.append("user", "Make main greet by name.")?;

    d.say("3. The agent's first turn: it edits a file, and its shell commands delete and create others.");
    d.write("src/main.rs", MAIN_V2)?;
    d.append("tool", "write_file src/main.rs")?;
    d.tool_sh(TURN_1_SHELL)?;
    d.append("assistant", "Done: main greets by name.")?;

    d.say("4. The second turn: the checkpoint before this message holds the first turn's work.");
    d.append("user", "Now add a Makefile and drop the README.")?;
    d.tool_sh(TURN_2_SHELL)?;
    d.append("assistant", "Added a Makefile, dropped the README.")?;

    d.say("5. The thread: the entries whose checkpoint holds the files before them are marked [files].");
    d.cairn(&["thread", "log", "chat"], 0)?;
    let users = entry_ids(d, "chat", "user")?;
    let answers = entry_ids(d, "chat", "assistant")?;
    let (Some(user1), Some(user2), Some(end1)) = (users.first(), users.get(1), answers.first())
    else {
        return Err(CliError::new(
            ErrorKind::Panic,
            "the demo's thread does not hold the entries it appended",
        ));
    };
    let (user1, user2, end1) = (user1.clone(), user2.clone(), end1.clone());

    d.say("6. What the first turn changed, checkpoint to checkpoint (a checkpoint is labelled with its entry's id).");
    d.cairn(&["diff", &user1, &user2, "--patch"], 0)?;

    d.say("7. The second turn went wrong: rewind to the end of the first. A dry run first; it changes nothing.");
    let dry_run = d.cairn(&["rewind", "chat", &end1, "--files", "--dry-run"], 0)?;
    // The refused and the confirmed rewind below begin with the same plan: shown once, here.
    d.plan = dry_run
        .find("dry run: nothing was changed")
        .map(|at| dry_run[..at].to_string());
    d.check(
        "the dry run left the files alone",
        d.read("Makefile").is_some() && d.read("README.md").is_none(),
    )?;

    d.say("8. Without a terminal to ask on, and without --yes, the rewind refuses (exit code 2).");
    d.cairn(
        &["rewind", "chat", &end1, "--files"],
        crate::error::EXIT_USAGE,
    )?;

    d.say("9. The rewind, confirmed: the files and the conversation go back together, after a safety snapshot.");
    d.cairn(&["rewind", "chat", &end1, "--files", "--yes"], 0)?;
    d.plan = None;
    let safety = d.newest()?;
    d.check(
        "the files are as the first turn left them",
        d.read("Makefile").is_none()
            && d.read("README.md")
                .is_some_and(|r| r.contains("Takes a name."))
            && d.read("src/main.rs").as_deref() == Some(MAIN_V2),
    )?;
    d.cairn(&["thread", "log", "chat", "--all"], 0)?;

    d.say("10. A fork: a new thread from the first message, with the files as they were then, in a directory of its own.");
    d.cairn(
        &[
            "fork", "chat", &user1, "--files", "--into", "../fork", "--new-id", "chat-b", "--yes",
        ],
        0,
    )?;
    let fork = d.project.with_file_name("fork");
    d.check(
        "the fork's directory holds the files from before the first turn",
        std::fs::read_to_string(fork.join("src/main.rs"))
            .ok()
            .as_deref()
            == Some(MAIN_V1)
            && fork.join("notes.txt").is_file(),
    )?;
    d.cairn(&["thread", "log", "chat-b"], 0)?;

    d.say("11. The rewind went too far after all? Its safety snapshot undoes the file part.");
    d.cairn(&["restore", &safety.short(), "--yes"], 0)?;
    d.check(
        "the second turn's files are back",
        d.read("Makefile").is_some() && d.read("README.md").is_none(),
    )?;

    d.say("12. An agent's clean-up wipes the project. The checkpoints are not in it: the last one brings everything back.");
    d.cairn(&["snapshot", "--label", "before-cleanup"], 0)?;
    d.sh("find . -mindepth 1 -delete && ls -A | wc -l")?;
    d.cairn(&["restore", "before-cleanup", "--yes"], 0)?;
    d.check(
        "the wiped files are back",
        d.read("Makefile").is_some() && d.read("src/main.rs").as_deref() == Some(MAIN_V2),
    )?;

    d.say("13. Where the checkpoints are, and what they hold.");
    d.cairn(&["info"], 0)?;

    d.say("14. The store checks itself: every object re-hashed, every snapshot restorable.");
    d.cairn(&["verify"], 0)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn arguments_are_shown_as_a_shell_would_need_them() {
        assert_eq!(quote("--files"), "--files");
        assert_eq!(quote("two words"), "'two words'");
        assert_eq!(quote("printf 'a\\n'"), "\"printf 'a\\n'\"");
        assert_eq!(quote("it's $HOME"), "'it'\\''s $HOME'");
    }
}
