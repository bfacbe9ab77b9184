//! The check that every prompt of Claude Code's recent transcripts of the project has a user
//! entry in a thread: prompts the hooks did not record.

use super::{claude_config_dir, Finding, Settings};
use crate::ctx::Ctx;
use crate::error::Result;
use crate::parse::count;
use cairn_agents::claude::transcript::{shortened, Transcript};
use cairn_agents::Place;
use cairn_rewind::{EntryKind, Threads, ThreadsOptions};
use cairn_store::ErrorKind;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Transcripts modified longer ago than this are not read.
const TRANSCRIPT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 3600);

/// At most this many transcripts (the newest) are read.
const TRANSCRIPT_MAX_COUNT: usize = 20;

/// `transcript-prompts`: every prompt of Claude Code's recent transcripts of the project has a
/// user entry in a thread of the workspace (prompts typed before Cairn's hooks were installed
/// are not counted: the settings file holding them is younger).
pub(super) fn transcript_prompts(ctx: &Ctx, settings: &Settings) -> Finding {
    const CHECK: &str = "transcript-prompts";
    let root = ctx.canonical_root();
    let Some(config) = claude_config_dir() else {
        return Finding::pass(
            CHECK,
            "HOME is not set: Claude Code's transcripts cannot be found",
        );
    };
    let dir = config.join("projects").join(project_dir_name(&root));
    let transcripts = recent_transcripts(&dir);
    if transcripts.is_empty() {
        return Finding::pass(
            CHECK,
            format!(
                "no transcript of Claude Code for {} in {} from the last 30 days",
                root.display(),
                dir.display()
            ),
        );
    }
    let recorded = match Recorded::read(ctx) {
        Ok(r) => r,
        Err(e) => {
            return Finding::fail(
                CHECK,
                format!("cannot read the thread database: {}", e.line()),
                "run `cairn verify` to see more",
                e.path,
            )
        }
    };
    // Prompts older than the hooks were not theirs to record.
    let since_ms = settings
        .files_with_hooks()
        .iter()
        .filter_map(|f| f.modified)
        .min()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(i64::MIN, |d| d.as_millis() as i64);
    let mut missing: Vec<(String, PathBuf, usize)> = Vec::new();
    let mut checked = 0usize;
    for path in &transcripts {
        let prompts = prompts_of(path);
        checked += prompts.len();
        let n = prompts
            .iter()
            .filter(|p| p.at_ms.is_none_or(|t| t >= since_ms) && !recorded.has(p))
            .count();
        if n > 0 {
            let session = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            missing.push((session, path.clone(), n));
        }
    }
    let Some((session, path, n)) = missing.first().cloned() else {
        return Finding::pass(
            CHECK,
            format!(
                "every prompt of Claude Code's {} of {} has a checkpoint ({} read)",
                count(
                    transcripts.len() as u64,
                    "recent transcript",
                    "recent transcripts"
                ),
                root.display(),
                count(checked as u64, "prompt", "prompts")
            ),
        );
    };
    let mut message = format!(
        "{} of Claude Code session {session} (transcript {}) {} no checkpoint: Cairn's hooks \
         did not run (`claude --bare` and `--settings` files that are not loaded skip them)",
        count(n as u64, "prompt", "prompts"),
        path.display(),
        if n == 1 { "has" } else { "have" }
    );
    if missing.len() > 1 {
        let others: Vec<String> = missing[1..]
            .iter()
            .map(|(s, _, n)| format!("{s} ({n})"))
            .collect();
        message.push_str(&format!(
            "; prompts of {} have none either: {}",
            count(others.len() as u64, "other session", "other sessions"),
            others.join(", ")
        ));
    }
    Finding::fail(
        CHECK,
        message,
        "run Claude Code without `--bare`, with Cairn's hooks in a settings file it loads \
         (`cairn init claude-code`; the other findings say whether they are installed and can \
         run); the prompts already missed have no checkpoint to go back to",
        Some(path),
    )
}

/// The directory Claude Code keeps a project's transcripts in, under `~/.claude/projects`: the
/// project's path with every character but ASCII letters and digits turned into `-` (each
/// UTF-16 unit, as Claude Code counts them), and past 200 of them cut, with a hash of the path
/// after a `-` (Claude Code 2.1).
fn project_dir_name(root: &Path) -> String {
    const MAX: usize = 200;
    let path = root.to_string_lossy();
    let units: Vec<u16> = path.encode_utf16().collect();
    let name: String = units
        .iter()
        .map(|&u| match char::from_u32(u32::from(u)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if name.len() <= MAX {
        return name;
    }
    // JavaScript's `(h << 5) - h + unit | 0` over the path, then `Math.abs(h).toString(36)`.
    let mut h: i32 = 0;
    for &u in &units {
        h = h.wrapping_shl(5).wrapping_sub(h).wrapping_add(i32::from(u));
    }
    let mut n = i64::from(h).unsigned_abs();
    let mut digits = Vec::new();
    loop {
        digits.push(char::from_digit((n % 36) as u32, 36).unwrap_or('0'));
        n /= 36;
        if n == 0 {
            break;
        }
    }
    let hash: String = digits.into_iter().rev().collect();
    format!("{}-{hash}", &name[..MAX])
}

/// The transcripts (`*.jsonl`) in `dir` modified in the last 30 days, newest first, at most 20.
fn recent_transcripts(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let oldest = SystemTime::now()
        .checked_sub(TRANSCRIPT_MAX_AGE)
        .unwrap_or(UNIX_EPOCH);
    let mut found: Vec<(SystemTime, PathBuf)> = read
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|p| {
            let m = std::fs::metadata(&p).ok().filter(|m| m.is_file())?;
            Some((m.modified().ok()?, p))
        })
        .filter(|(t, _)| *t >= oldest)
        .collect();
    found.sort_by_key(|(t, _)| std::cmp::Reverse(*t));
    found.truncate(TRANSCRIPT_MAX_COUNT);
    found.into_iter().map(|(_, p)| p).collect()
}

/// A prompt the user typed, as a transcript keeps it.
#[derive(Debug)]
struct Prompt {
    /// Its text (text blocks joined by newlines), and each text block on its own.
    texts: Vec<String>,
    /// Claude Code's id of the prompt (`promptId`).
    prompt_id: Option<String>,
    /// When it was typed (ms since the epoch), when the line says.
    at_ms: Option<i64>,
    /// Whether the texts are [`shortened`], as a `last-prompt` line holds a prompt whose own
    /// line the transcript lost.
    shortened: bool,
}

/// The prompts of a transcript (as `cairn_agents` reads them: not meta, not a tool's result,
/// not a compaction's summary nor a subagent's, not Claude's own notes), each once, and the
/// prompts it lost, as its `last-prompt` lines name them (typed when the model answered).
fn prompts_of(path: &Path) -> Vec<Prompt> {
    let Ok(t) = Transcript::read(path) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    let lost: Vec<Prompt> = t
        .lost_prompts()
        .into_iter()
        .map(|p| Prompt {
            texts: vec![p.text.clone()],
            prompt_id: None,
            at_ms: p
                .leaf
                .as_deref()
                .and_then(|leaf| t.get(leaf))
                .and_then(|l| l.timestamp.as_deref())
                .and_then(iso_ms),
            shortened: true,
        })
        .collect();
    t.lines
        .into_iter()
        .filter(|l| l.is_prompt && seen.insert(l.uuid.clone()))
        .map(|l| Prompt {
            texts: l.text.into_iter().collect(),
            prompt_id: l.prompt_id,
            at_ms: l.timestamp.as_deref().and_then(iso_ms),
            shortened: false,
        })
        .chain(lost)
        .collect()
}

/// Milliseconds since the epoch of a UTC time as Claude Code writes it
/// (`2026-12-07T04:40:43.993Z`).
fn iso_ms(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z')?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let ms: i64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hh) * 60 + mm) * 60_000 + ss * 1000 + ms)
}

/// The user entries of the workspace's threads: the prompt ids their metadata carries
/// (`conversation.prompt_id`), and their texts, apart for the entries that carry no id, and
/// [`shortened`].
#[derive(Debug, Default)]
struct Recorded {
    ids: HashSet<String>,
    texts: HashSet<String>,
    texts_without_id: HashSet<String>,
    shortened: HashSet<String>,
}

impl Recorded {
    /// Reads them from the thread database (none when it was never made).
    fn read(ctx: &Ctx) -> Result<Recorded> {
        let mut r = Recorded::default();
        if ctx.threads_db.is_none()
            && ctx
                .store_path()
                .is_ok_and(|s| std::fs::symlink_metadata(s).is_err())
        {
            // No store yet: no thread either.
            return Ok(r);
        }
        let db = match ctx.threads_db() {
            Ok(db) => db,
            // No store yet: no thread either.
            Err(e) if e.kind == Some(ErrorKind::NotFound) => return Ok(r),
            Err(e) => return Err(e),
        };
        let is_url = db.to_str().is_some_and(cairn_rewind::is_pg_url);
        if !is_url && std::fs::symlink_metadata(&db).is_err() {
            return Ok(r);
        }
        let threads = Threads::open(
            &db,
            ThreadsOptions {
                recover: false,
                ..ThreadsOptions::default()
            },
        )?;
        for t in threads.threads()? {
            for e in threads.entries(&t.id, true)? {
                if e.kind != EntryKind::User {
                    continue;
                }
                let text = String::from_utf8_lossy(&e.payload).into_owned();
                match Place::of(&e).and_then(|p| p.prompt_id) {
                    Some(id) => {
                        r.ids.insert(id);
                    }
                    None => {
                        r.texts_without_id.insert(text.clone());
                    }
                }
                r.shortened.insert(shortened(&text));
                r.texts.insert(text);
            }
        }
        Ok(r)
    }

    /// Whether a thread recorded the prompt: by its id when the entries carry one, else by its
    /// text (a forked session's transcript repeats the earlier session's prompts under the new
    /// session's id: they count as recorded wherever they were); a prompt the transcript lost
    /// by its shortened text.
    fn has(&self, p: &Prompt) -> bool {
        if p.shortened {
            return p.texts.iter().any(|t| self.shortened.contains(t));
        }
        match &p.prompt_id {
            Some(id) if self.ids.contains(id) => true,
            Some(_) => p.texts.iter().any(|t| self.texts_without_id.contains(t)),
            None => p.texts.iter().any(|t| self.texts.contains(t)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Issue 54: the name Claude Code 2.1.197 gave /work/exp/w/project's directory, and its rule.
    #[test]
    fn a_project_directory_is_named_as_claude_code_names_it() {
        assert_eq!(
            project_dir_name(Path::new("/work/exp/w/project")),
            "-work-exp-w-project"
        );
        assert_eq!(
            project_dir_name(Path::new("/home/me/my.app_2/é")),
            "-home-me-my-app-2--"
        );
        let long = format!("/{}", "a".repeat(300));
        let name = project_dir_name(Path::new(&long));
        // As Claude Code's own code names it (node: `Math.abs(h).toString(36)`).
        assert_eq!(name, format!("-{}-vtkmfl", "a".repeat(199)));
    }

    // Issue 54.
    #[test]
    fn claude_codes_timestamps_are_read_to_the_millisecond() {
        assert_eq!(iso_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(iso_ms("2026-12-07T04:40:43.993Z"), Some(1_796_618_443_993));
        assert_eq!(iso_ms("2000-03-01T00:00:01Z"), Some(951_868_801_000));
        assert_eq!(iso_ms("yesterday"), None);
    }
}
