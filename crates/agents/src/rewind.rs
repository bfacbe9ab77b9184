//! The agent's half of a rewind of Cairn's thread, shared by every caller of a rewind (the
//! command line, its MCP server and Studio, the C ABI): prepared from the rewind's plan before
//! anything changes, kept in the rewind's journal, and settled with the agent once the rewind
//! is done (issue 54).

use crate::{Agent, Continue};
use cairn_rewind::{Continuation, RewindReport, ThreadId, Threads};

/// What becomes of the agent's own conversation in a rewind.
#[derive(Default)]
pub struct Half {
    /// The agent whose thread it is (`None`: no agent Cairn knows wrote it).
    pub agent: Option<&'static dyn Agent>,
    /// What the rewind's journal keeps, before any file changes.
    pub continuation: Option<Continuation>,
    /// Why the conversation could not be prepared, when it could not (the rewind of the files
    /// and of Cairn's thread goes on).
    pub not_prepared: Option<String>,
}

impl std::fmt::Debug for Half {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Half")
            .field("agent", &self.agent.map(|a| a.name()))
            .field("continuation", &self.continuation)
            .field("not_prepared", &self.not_prepared)
            .finish()
    }
}

/// Prepares the agent's half of the rewind `plan` (a dry run's report) of `thread`: nothing
/// for a thread no agent Cairn knows wrote, or (`memory` false) a rewind of the files alone.
pub fn prepare_rewind(
    threads: &Threads,
    thread: &ThreadId,
    plan: &RewindReport,
    memory: bool,
) -> cairn_rewind::Result<Half> {
    let Some(agent) = crate::of_thread(&threads.thread(thread)?.metadata) else {
        return Ok(Half::default());
    };
    let mut half = Half {
        agent: Some(agent),
        ..Half::default()
    };
    if !memory {
        return Ok(half);
    }
    let cut = plan
        .conversation
        .cut
        .iter()
        .map(|id| threads.entry(id))
        .collect::<cairn_rewind::Result<Vec<_>>>()?;
    let kept: Vec<_> = threads
        .entries(thread, false)?
        .into_iter()
        .filter(|e| !plan.conversation.cut.contains(&e.id))
        .collect();
    match crate::prepare(agent, &cut, &kept) {
        Ok(Some((cont, names))) => match serde_json::to_value(&cont) {
            Ok(data) => half.continuation = Some(Continuation { data, names }),
            Err(e) => half.not_prepared = Some(format!("cannot encode the continuation: {e}")),
        },
        Ok(None) => {
            half.not_prepared = Some(
                "no entry of the thread says where it sits in the agent's conversation \
                 (recorded before Cairn kept it)"
                    .into(),
            )
        }
        Err(e) => half.not_prepared = Some(e.to_string()),
    }
    Ok(half)
}

/// The continuation a rewind's report gives back, read.
pub fn continuation_of(report: &RewindReport) -> Option<Continue> {
    serde_json::from_value(report.continuation.clone()?).ok()
}

/// Takes the agent's own conversation to the point `report`'s rewind kept, for an agent that
/// keeps one history ([`Agent::settle`]); nothing for the others or a dry run.
pub fn settle(report: &RewindReport) -> crate::Result<()> {
    if report.dry_run {
        return Ok(());
    }
    let Some(cont) = continuation_of(report) else {
        return Ok(());
    };
    match crate::by_name(&cont.agent) {
        Some(agent) => agent.settle(&cont),
        None => Ok(()),
    }
}
