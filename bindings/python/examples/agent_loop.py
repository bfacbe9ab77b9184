#!/usr/bin/env python3
"""An agent loop with Cairn: a checkpoint before each user message, edits, and a rewind.

A toy "agent" answers each user message by editing files in its workspace. Before it
handles a message, the loop takes a snapshot labelled with the turn. When the user says
"undo", the loop restores the checkpoint taken before the previous turn: the files are put
back as they were, and the restore's safety snapshot can undo the undo.

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


def run(root: Path, store: Path) -> list[dict[str, str]]:
    """Runs the conversation; returns the workspace's files (path -> content) after each turn."""
    root.mkdir(parents=True, exist_ok=True)
    history: list[cairn.SnapshotInfo] = []  # the checkpoint taken before each handled turn
    states: list[dict[str, str]] = []
    with cairn.Workspace(root, store=store) as ws:
        for turn, (message, edits) in enumerate(CONVERSATION, start=1):
            print(f"\nuser[{turn}]: {message}")
            if message == "undo":
                if not history:
                    print("  nothing to undo")
                    continue
                checkpoint = history.pop()
                report = ws.restore(checkpoint)
                print(
                    f"  rewound the files to {checkpoint.label!r}: restored {report.restored}, "
                    f"deleted {report.deleted} (undo this with {report.safety_snapshot_id[:12]})"
                )
            else:
                # Checkpoint before the agent acts on the message.
                checkpoint = ws.snapshot(f"before turn {turn}", metadata={"turn": turn, "message": message})
                history.append(checkpoint)
                agent_edits(root, edits)
                for change in ws.diff(checkpoint):
                    print(f"  agent: {change.kind:<9} {change.path}")
            states.append({p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()})
            print(f"  workspace: {' '.join(states[-1])}")
        print(f"\n{len(ws.list())} snapshots in the store (checkpoints and safety snapshots)")
    return states


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        root = Path(argv[1])
        return 0 if run(root, root.parent / f".{root.name}-cairn-store") else 1
    with tempfile.TemporaryDirectory() as tmp:
        states = run(Path(tmp) / "workspace", Path(tmp) / "store")
    # After the undo (turn 4) the workspace is exactly as it was before turn 3.
    assert states[3] == states[1], states
    print("ok: the undo rewound the files to the checkpoint before turn 3")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
