//! The checkpoint policy, set at three levels: the runtime ([`crate::ThreadsOptions`]), an agent
//! and a run ([`crate::RunOptions`]).
//!
//! # Precedence
//!
//! - The most specific level that is set (`Some`) turns checkpoints on or off: a run's own wins
//!   over its agent's, which wins over the runtime's. No level set: checkpoints are off.
//! - `exclude` globs of every level that is set add up (runtime first, then agent, then run).
//! - `max_file_bytes`, `before_tools` and `before_compaction`: the most specific level that sets
//!   them wins; unset everywhere, the workspace's own limit (10 MiB by default), off and off.
//! - A run started from another run's tool call (a subagent) takes no automatic checkpoints:
//!   its caller's checkpoint covers the turn.

use serde::{Deserialize, Serialize};

/// One level of the checkpoint policy. `Checkpoints::default()` turns checkpoints on with the
/// defaults, as setting the level at all does; [`Checkpoints::off`] turns them off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoints {
    /// Whether checkpoints are on at this level. Default `true`.
    pub enabled: bool,
    /// Globs the snapshots leave out, on top of the workspace's defaults; they add up across
    /// levels.
    pub exclude: Vec<String>,
    /// Files larger than this are skipped (listed in the snapshot's `skipped`).
    pub max_file_bytes: Option<u64>,
    /// Take a checkpoint before every `tool` entry as well.
    pub before_tools: Option<bool>,
    /// Take a checkpoint before every `compaction` entry, which names it.
    pub before_compaction: Option<bool>,
}

impl Default for Checkpoints {
    fn default() -> Self {
        Checkpoints {
            enabled: true,
            exclude: Vec::new(),
            max_file_bytes: None,
            before_tools: None,
            before_compaction: None,
        }
    }
}

impl Checkpoints {
    /// A level that turns checkpoints off.
    pub fn off() -> Self {
        Checkpoints {
            enabled: false,
            ..Checkpoints::default()
        }
    }
}

/// The policy a run takes checkpoints with, resolved from the three levels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectivePolicy {
    /// Whether automatic checkpoints are taken.
    pub enabled: bool,
    /// The exclude globs of every level, in order, without repeats.
    pub exclude: Vec<String>,
    /// The size limit for files; `None`: the workspace's own (10 MiB unless it says otherwise).
    pub max_file_bytes: Option<u64>,
    /// Checkpoints before tool entries.
    pub before_tools: bool,
    /// Checkpoints before compaction entries.
    pub before_compaction: bool,
}

impl EffectivePolicy {
    /// Resolves the levels, most general first; see the module docs for the precedence.
    pub fn resolve(
        runtime: Option<&Checkpoints>,
        agent: Option<&Checkpoints>,
        run: Option<&Checkpoints>,
    ) -> EffectivePolicy {
        let levels: Vec<&Checkpoints> = [runtime, agent, run].into_iter().flatten().collect();
        let mut exclude: Vec<String> = Vec::new();
        for level in &levels {
            for glob in &level.exclude {
                if !exclude.contains(glob) {
                    exclude.push(glob.clone());
                }
            }
        }
        EffectivePolicy {
            enabled: levels.last().map(|l| l.enabled).unwrap_or(false),
            exclude,
            max_file_bytes: most_specific(&levels, |l| l.max_file_bytes),
            before_tools: most_specific(&levels, |l| l.before_tools).unwrap_or(false),
            before_compaction: most_specific(&levels, |l| l.before_compaction).unwrap_or(false),
        }
    }

    /// The policy with checkpoints off (a subagent's, or no level set).
    pub fn off() -> EffectivePolicy {
        EffectivePolicy::resolve(None, None, None)
    }

    /// Whether an automatic checkpoint is taken before an entry of `kind`.
    pub fn takes_before(&self, kind: crate::EntryKind) -> bool {
        use crate::EntryKind as K;
        self.enabled
            && match kind {
                K::User => true,
                K::Tool => self.before_tools,
                K::Compaction => self.before_compaction,
                K::Assistant | K::Note | K::Event => false,
            }
    }
}

/// The value of the most specific level that sets it.
fn most_specific<T>(levels: &[&Checkpoints], f: impl Fn(&Checkpoints) -> Option<T>) -> Option<T> {
    levels.iter().rev().find_map(|l| f(l))
}
