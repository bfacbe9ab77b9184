//! The checks of Cairn's hooks in the settings Claude Code reads: installed for each event
//! Cairn needs, not turned off, and each command starting a program that is there.

use super::{claude_config_dir, home, Finding, Settings, SettingsFile};
use crate::ctx::Ctx;
use cairn_agents::claude;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The hook events `cairn init claude-code` installs that Cairn cannot do without (not
/// `SessionStart`, which only runs the notice of [`session_start_notice`]; settings written by
/// an earlier `cairn init` lack it).
fn needed_events() -> Vec<&'static str> {
    claude::wanted()
        .into_iter()
        .map(|w| w.event)
        .filter(|e| *e != "SessionStart")
        .collect()
}

/// `hooks-installed`: each event Cairn needs has its hook in a settings file Claude Code reads.
pub(super) fn hooks_installed(settings: &Settings, root: &Path) -> Finding {
    let needed = needed_events();
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|e| !settings.hooks.iter().any(|(ev, _, _)| ev == e))
        .collect();
    let unreadable: Vec<String> = settings
        .files
        .iter()
        .filter_map(|f| {
            f.error
                .as_ref()
                .map(|e| format!("{} {e}", f.path.display()))
        })
        .collect();
    if missing.is_empty() {
        let files: Vec<String> = settings
            .files_with_hooks()
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        return Finding::pass(
            "hooks-installed",
            format!(
                "Cairn's hooks are installed for {} (in {})",
                needed.join(", "),
                files.join(", ")
            ),
        );
    }
    let mut message = format!(
        "Cairn's hook is missing for {} in the settings Claude Code reads for {}, so {}",
        missing.join(", "),
        root.display(),
        if missing.contains(&"UserPromptSubmit") {
            "prompts get no checkpoint"
        } else {
            "some changes get no checkpoint"
        }
    );
    if !unreadable.is_empty() {
        message.push_str(&format!(
            " (Claude Code skips a settings file it cannot parse: {})",
            unreadable.join("; ")
        ));
    }
    Finding::fail(
        "hooks-installed",
        message,
        "run `cairn init claude-code` in the project (or `cairn init claude-code --user` for \
         every project)",
        Some(
            settings
                .files
                .iter()
                .find(|f| f.error.is_some())
                .map_or_else(|| settings.project.clone(), |f| f.path.clone()),
        ),
    )
}

/// `hooks-disabled`: `"disableAllHooks": true` in a settings file Claude Code reads.
pub(super) fn hooks_disabled(settings: &Settings) -> Finding {
    let disabling: Vec<&SettingsFile> = settings
        .files
        .iter()
        .filter(|f| {
            f.json
                .as_ref()
                .is_some_and(|j| j["disableAllHooks"] == true)
        })
        .collect();
    let Some(first) = disabling.first() else {
        return Finding::pass(
            "hooks-disabled",
            "no settings file turns Claude Code's hooks off (disableAllHooks)",
        );
    };
    let names: Vec<String> = disabling
        .iter()
        .map(|f| f.path.display().to_string())
        .collect();
    Finding::fail(
        "hooks-disabled",
        format!(
            "\"disableAllHooks\": true in {} turns off every hook, Cairn's too: no prompt or \
             tool call gets a checkpoint",
            names.join(" and ")
        ),
        format!("remove \"disableAllHooks\" from {}", names.join(" and ")),
        Some(first.path.clone()),
    )
}

/// `hooks-command`: each hook command of Cairn's starts an executable file.
pub(super) fn hooks_command(settings: &Settings, ctx: &Ctx) -> Finding {
    let root = ctx.canonical_root();
    let mut seen = HashSet::new();
    let mut broken: Vec<(String, PathBuf)> = Vec::new();
    let mut programs: Vec<String> = Vec::new();
    for (_, command, file) in &settings.hooks {
        if !seen.insert((command.clone(), file.clone())) {
            continue;
        }
        match program_of(command, &root) {
            Ok(p) => {
                let shown = p.display().to_string();
                if !programs.contains(&shown) {
                    programs.push(shown);
                }
            }
            Err(why) => {
                let what = format!("`{command}` in {}: {why}", file.display());
                if !broken.iter().any(|(w, _)| *w == what) {
                    broken.push((what, file.clone()));
                }
            }
        }
    }
    let Some((_, file)) = broken.first() else {
        return Finding::pass(
            "hooks-command",
            format!("Cairn's hooks run {}", programs.join(", ")),
        );
    };
    let whats: Vec<&str> = broken.iter().map(|(w, _)| w.as_str()).collect();
    let user = claude_config_dir().is_some_and(|d| *file == d.join("settings.json"));
    Finding::fail(
        "hooks-command",
        format!(
            "Cairn's hook cannot start, so Claude Code runs without checkpoints: {}",
            whats.join("; ")
        ),
        format!(
            "run `cairn init claude-code{}` again with the cairn you use (it rewrites the \
             command)",
            if user { " --user" } else { "" }
        ),
        Some(file.clone()),
    )
}

/// The executable a hook command starts: its first word (after `NAME=value` assignments), shell
/// quoting undone, `~`, `$HOME` and `$CLAUDE_PROJECT_DIR` expanded, looked up on `PATH` when it
/// names no directory; or why there is none.
fn program_of(command: &str, root: &Path) -> std::result::Result<PathBuf, String> {
    let words = shell_words(command).ok_or("its quotes are not closed")?;
    let word = words
        .into_iter()
        .find(|w| !is_assignment(w))
        .ok_or("it names no program")?;
    let word = expand(&word, root)?;
    let candidates: Vec<PathBuf> = if word.contains('/') {
        let p = PathBuf::from(&word);
        vec![if p.is_absolute() { p } else { root.join(p) }]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|d| d.join(&word))
            .collect()
    };
    if let Some(found) = candidates.iter().find(|p| is_executable(p)) {
        return Ok(found.clone());
    }
    match candidates.as_slice() {
        [one] if one.exists() => Err(format!("{} is not an executable file", one.display())),
        [one] => Err(format!("{} does not exist", one.display())),
        _ => Err(format!("no executable {word} on PATH")),
    }
}

/// `~/…`, `$HOME/…`, `${HOME}/…`, `$CLAUDE_PROJECT_DIR/…` expanded; other variables are not
/// known here.
fn expand(word: &str, root: &Path) -> std::result::Result<String, String> {
    let home = home().map(|h| h.display().to_string());
    let root = root.display().to_string();
    for (prefix, value) in [
        ("~", home.as_deref()),
        ("$HOME", home.as_deref()),
        ("${HOME}", home.as_deref()),
        ("$CLAUDE_PROJECT_DIR", Some(root.as_str())),
        ("${CLAUDE_PROJECT_DIR}", Some(root.as_str())),
    ] {
        if let Some(rest) = word.strip_prefix(prefix) {
            if rest.is_empty() || rest.starts_with('/') {
                let value = value.ok_or("HOME is not set")?;
                return Ok(format!("{value}{rest}"));
            }
        }
    }
    if word.contains('$') {
        return Err(format!(
            "{word} names a variable this check cannot expand; give the path itself"
        ));
    }
    Ok(word.to_string())
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file())
        && rustix::fs::access(p, rustix::fs::Access::EXEC_OK).is_ok()
}

/// `NAME=value`: an assignment before the command, not the program.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The words of a command as a POSIX shell splits them (single and double quotes, backslashes;
/// no expansion); `None` when a quote is not closed.
pub(super) fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            c @ ('"' | '\\' | '$' | '`') => word.push(c),
                            '\n' => {}
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') | None => {}
                    Some(c) => word.push(c),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 54.
    #[test]
    fn a_hook_command_is_split_as_a_shell_splits_it() {
        assert_eq!(
            shell_words("'/opt/my tools/cairn' hook claude-code --watch"),
            Some(vec![
                "/opt/my tools/cairn".to_string(),
                "hook".into(),
                "claude-code".into(),
                "--watch".into()
            ])
        );
        assert_eq!(
            shell_words(r#"'it'\''s/cairn' x"#).map(|w| w[0].clone()),
            Some("it's/cairn".to_string())
        );
        assert_eq!(
            shell_words(r#""a\"b" c\ d"#),
            Some(vec!["a\"b".to_string(), "c d".into()])
        );
        assert_eq!(shell_words("'open"), None);
        assert!(is_assignment("CAIRN_HOME=/x"));
        assert!(!is_assignment("/usr/bin/cairn"));
    }
}
