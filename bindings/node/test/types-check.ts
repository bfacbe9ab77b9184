// Compile-time checks of the typings (`npm run typecheck`; never run). Each `@ts-expect-error`
// must stay an error, and each assignment must keep compiling.
import {
  CairnError,
  CancelToken,
  Workspace,
  pathToBuffer,
  Run,
  Threads,
  type Appended,
  type Entry,
  type ForkReport,
  type RewindReport,
  type RunStatus,
  type Thread,
  type ThreadEvent,
  type Change,
  type ErrorCode,
  type GcPlan,
  type GcReport,
  type Plan,
  type Progress,
  type RestoreReport,
  type Snapshot,
  type Walked,
  type WatchStatus,
} from 'cairn';

export async function typings(ws: Workspace, other: Workspace): Promise<void> {
  const snap: Snapshot = await ws.snapshot({ label: 'x', metadata: { turn: 1 }, onProgress: (p: Progress) => p.files < 10 });
  const changes: Change[] = await ws.diff(snap.id);
  const plan: Plan = await ws.plan(snap.id, { onDrift: 'skip', signal: AbortSignal.timeout(10) });
  const report: RestoreReport = await ws.apply(plan, { cancel: new CancelToken() });
  const gcPlan: GcPlan = await ws.gc({ dryRun: true });
  const gcReport: GcReport = await ws.gc({ graceMs: 0 });
  await ws.copy(snap.id, other);
  const bytes: Buffer = pathToBuffer(changes[0]!.path);
  const watching: WatchStatus = await ws.watch({ maxWatches: 10_000 });
  const walked: Walked = (await ws.snapshot()).walk.walked;
  const reason: string | null = snap.walk.reason;
  await ws.unwatch();
  // @ts-expect-error a typo in a watch option
  await ws.watch({ maxWatch: 1 });
  // @ts-expect-error not a walk
  const notWalked: Walked = 'some';
  // @ts-expect-error a typo in an option name
  await ws.snapshot({ lable: 'x' });
  // @ts-expect-error not a drift policy
  await ws.restore(snap.id, { onDrift: 'sideways' });
  // @ts-expect-error a dry run gives a plan, not a report
  const wrong: GcReport = await ws.gc({ dryRun: true });
  try {
    ws.show('nope');
  } catch (e) {
    if (e instanceof CairnError) {
      const code: ErrorCode = e.code;
      const status: number = e.status;
      const path: string | undefined = e.path;
      void [code, status, path];
    }
  }
  // @ts-expect-error not a status name
  const bad: ErrorCode = 'NOPE';
  {
    using hold = ws.hold('npm test');
    await using scoped = await Workspace.open('/tmp');
    void [hold, scoped];
  }
  void [report, gcPlan, gcReport, bytes, wrong, bad, watching, walked, reason, notWalked];
}

export async function threadTypings(ws: Workspace): Promise<void> {
  const threads = await Threads.open(null, { workspace: ws, checkpoints: { enabled: true } });
  const thread: Thread = await threads.create({ metadata: { model: 'x' } });
  const run: Run = await threads.beginRun(thread.id, { leaseMs: 30_000, rejectIfBusy: true });
  const appended: Appended = await run.append({ kind: 'user', text: 'hi' });
  const entries: Entry[] = threads.log(thread.id, { all: true });
  const report: RewindReport = await threads.restoreBefore(thread.id, appended.entry.id, { files: true });
  const fork: ForkReport = await threads.fork(thread.id, appended.entry.id, { files: true, workspace: ws });
  const events: ThreadEvent[] = threads.events({ cursor: 0, limit: 10 });
  const status: RunStatus = await run.end();
  // @ts-expect-error not an entry kind
  await run.append({ kind: 'shout', text: 'x' });
  void [entries, report, fork, events, status];
}
