#!/usr/bin/env python3
"""An agent loop with Cairn: a checkpoint before each user message, edits, and a rewind.

A toy "agent" answers each user message by editing files in its workspace. Each message is
appended to a thread whose checkpoint policy is on, so Cairn snapshots the workspace right
before it. When the user says "undo", the loop rewinds the thread to just before the
previous message: the conversation *and* the files go back together (nothing is deleted:
the cut entries stay on another branch, and the rewind's safety snapshot can undo the undo).

    python3 examples/agent_loop.py [WORKSPACE_DIR]

Without a directory it works in a temporary one. The store lives outside the workspace.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import cairn

# What the user says, and what the toy agent does for each message (path -> new content,
# None to delete).
CONVERSATION: list[tuple[str, dict[str, str | None]]] = [
    ("create a hello-world app", {"app.py": "print('hello')\n", "README.md": "# app\n"}),
    ("greet the world by name", {"app.py": "name = 'world'\nprint(f'hello {name}')\n"}),
    ("add tests and drop the README", {"test_app.py": "def test_app():\n    assert True\n", "README.md": None}),
    ("undo", {}),
    ("make it shout", {"app.py": "print('HELLO')\n"}),
]


def agent_edits(root: Path, edits: dict[str, str | None]) -> None:
    """The toy agent: writes and deletes files."""
    for rel, content in edits.items():
        path = root / rel
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)


def files_of(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def run(root: Path, store: Path) -> list[dict[str, str]]:
    """Runs the conversation; returns the workspace's files (path -> content) after each turn."""
    root.mkdir(parents=True, exist_ok=True)
    states: list[dict[str, str]] = []
    with cairn.Workspace(root, store=store) as ws, cairn.Threads(workspace=ws, checkpoints=True) as threads:
        chat = threads.create("chat")
        asked: list[cairn.Entry] = []  # the user messages the agent acted on, newest last
        for turn, (message, edits) in enumerate(CONVERSATION, start=1):
            print(f"\nuser[{turn}]: {message}")
            if message == "undo":
                if not asked:
                    print("  nothing to undo")
                    continue
                last = asked.pop()
                report = threads.restore_before(chat, last, files=True)
                assert report.files is not None and report.files.restore is not None
                print(
                    f"  rewound to before {last.text!r}: cut {len(report.conversation.cut)} entries, "
                    f"restored {report.files.restore.restored}, deleted {report.files.restore.deleted} "
                    f"(undo this with snapshot {str(report.files.safety_snapshot_id)[:12]})"
                )
            else:
                # Appending the user message takes the checkpoint before the agent acts.
                appended = threads.append(chat, "user", message, metadata={"turn": turn})
                assert appended.checkpoint is not None, appended.checkpoint_error
                asked.append(appended.entry)
                agent_edits(root, edits)
                changes = ws.diff(appended.checkpoint.snapshot_id)
                for change in changes:
                    print(f"  agent: {change.kind:<9} {change.path}")
                threads.append(chat, "assistant", f"done: {len(changes)} files changed")
            states.append(files_of(root))
            print(f"  workspace: {' '.join(states[-1])}")
            print(f"  thread:    {' / '.join(e.text for e in threads.log(chat))}")
        print(f"\n{len(threads.log(chat, all=True))} entries kept in the thread, {len(ws.list())} snapshots in the store")
    return states


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        root = Path(argv[1])
        run(root, root.parent / f".{root.name}-cairn-store")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        states = run(Path(tmp) / "workspace", Path(tmp) / "store")
    # After the undo (turn 4) the workspace is exactly as it was before turn 3.
    assert states[3] == states[1], states
    print("ok: the undo rewound the files and the conversation to before turn 3")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
