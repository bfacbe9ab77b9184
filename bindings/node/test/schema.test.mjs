// The binding's TypeScript types against include/cairn.schema.json, field by field.
//
// The schema is made from the Rust types (crates/ffi/src/schema.rs), so a field a Rust report
// gains fails here until the interface that types it has the field (in camelCase: codec.ts
// turns the keys), and an option the C ABI gains fails until the options interface has it.
// The declarations are read from src/types.ts with a small parser of its shape: interfaces
// (with `extends`), their inline object types (`RewindReport.conversation`) and unions of
// object types (`Action`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const schema = JSON.parse(
  fs.readFileSync(path.join(here, '..', '..', '..', 'include', 'cairn.schema.json'), 'utf8'),
);
const source = fs.readFileSync(path.join(here, '..', 'src', 'types.ts'), 'utf8');

/** Each object of the schema's results: the type that declares it. */
const RESULTS = {
  Action: 'Action',
  Admission: 'Admission',
  Appended: 'Appended',
  Attribution: 'Attribution',
  BadCopy: 'BadCopy',
  BrokenIndex: 'BrokenIndex',
  CacheTrim: 'CacheTrim',
  CaptureSettings: 'CaptureSettings',
  Change: 'Change',
  Checkpoint: 'Checkpoint',
  CheckpointFailure: 'CheckpointFailure',
  CheckpointRef: 'CheckpointRef',
  ConversationReport: 'RewindReport.conversation',
  CopyReport: 'CopyReport',
  Delivery: 'Delivery',
  Entry: 'Entry',
  EntryInfo: 'EntryInfo',
  Event: 'ThreadEvent',
  FilesReport: 'FilesReport',
  ForkReport: 'ForkReport',
  GcPlan: 'GcPlan',
  GcReport: 'GcReport',
  KeptPath: 'KeptPath',
  MemoryItem: 'MemoryItem',
  MemoryReport: 'RewindReport.memory',
  PackPlan: 'PackPlan',
  Plan: 'Plan',
  PruneReport: 'PruneReport',
  Recovery: 'Recovery',
  RemoteGcDone: 'GcReport',
  RemoteGcReport: 'RemoteGcReport',
  RestoreReport: 'RestoreReport',
  RewindReport: 'RewindReport',
  RunInfo: 'RunInfo',
  RunsReport: 'RunsReport',
  Skipped: 'Skipped',
  SnapshotCheck: 'SnapshotCheck',
  SnapshotInfo: 'SnapshotInfo',
  SnapshotKept: 'ExcludedPath',
  SnapshotTaken: 'Snapshot',
  Stats: 'Stats',
  Thread: 'Thread',
  ThreadRuns: 'ThreadRuns',
  Unreadable: 'UnreadableSnapshot',
  Verified: 'VerifyReport',
  WalkInfo: 'WalkInfo',
  WatchStatus: 'WatchStatus',
  WorkspaceInfo: 'WorkspaceInfo',
};

/** Each object of the schema's options: the interface a caller fills. */
const OPTIONS = {
  CheckpointPolicy: 'CheckpointPolicy',
  Continuation: 'Continuation',
  DeliverOptions: 'DeliverOptions',
  DiffOptions: 'DiffOptions',
  ForkOptions: 'ForkOptions',
  GcOptions: 'GcOptions',
  NewEntry: 'NewEntry',
  NewMemory: 'NewMemory',
  Prompt: 'Prompt',
  RemoteOptions: 'RemoteOptions',
  RestoreOptions: 'RestoreOptions',
  Retention: 'Retention',
  RewindOptions: 'RewindOptions',
  RunOptions: 'RunOptions',
  SnapshotOptions: 'SnapshotOptions',
  ThreadOptions: 'CreateThreadOptions',
  ThreadsOptions: 'ThreadsOptions',
  WatchOptions: 'WatchOptions',
  WorkspaceOptions: 'WorkspaceOptions',
};

/** Objects of the schema that are an encoding, decoded to a plain value: a path that is not
 * UTF-8 (`{"hex": ...}`) becomes an escaped path string (paths.ts). */
const ENCODINGS = new Set(['Path']);

/** Options a binding offers under another name: `payload` (bytes) is sent as `payload_hex`. */
const RENAMED = { 'NewEntry.payload_hex': 'payload', 'Prompt.payload_hex': 'payload' };

const camel = (k) => k.replace(/_([a-z0-9])/g, (_m, c) => c.toUpperCase());

/** The text from the `{` at `open` to its matching `}` (both excluded), and where it ends. */
function braced(text, open) {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === '{') depth++;
    else if (text[i] === '}' && --depth === 0) return [text.slice(open + 1, i), i];
  }
  throw new Error(`unbalanced braces from ${open}`);
}

/** The members of an object type's body, each with the inline object type it has, if any. */
function members(body) {
  const out = new Map();
  let i = 0;
  while (i < body.length) {
    const m = /^\s*(?:readonly\s+)?([A-Za-z_]\w*)\??\s*:\s*/.exec(body.slice(i));
    if (!m) {
      const next = body.indexOf(';', i);
      i = next < 0 ? body.length : next + 1;
      continue;
    }
    i += m[0].length;
    let inline = null;
    if (body[i] === '{') {
      const [inner, end] = braced(body, i);
      inline = inner;
      i = end + 1;
    }
    // The rest of the member's type, up to the `;` at this depth.
    let depth = 0;
    for (; i < body.length; i++) {
      if ('{(<['.includes(body[i])) depth++;
      else if ('})>]'.includes(body[i])) depth--;
      else if (body[i] === ';' && depth === 0) break;
    }
    i++;
    out.set(m[1], inline);
  }
  return out;
}

/** `name -> Set of member names` of every declared object type, inline ones as `A.b`. */
function declarations() {
  const text = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const types = new Map();
  const bases = new Map();
  const add = (name, body) => {
    const ms = members(body);
    types.set(name, new Set([...(types.get(name) ?? []), ...ms.keys()]));
    for (const [m, inline] of ms) if (inline !== null) add(`${name}.${m}`, inline);
  };
  for (const m of text.matchAll(/export interface (\w+)(?:\s+extends\s+([\w\s,]+?))?\s*\{/g)) {
    add(m[1], braced(text, m.index + m[0].length - 1)[0]);
    bases.set(m[1], (m[2] ?? '').split(',').map((s) => s.trim()).filter(Boolean));
  }
  for (const m of text.matchAll(/export type (\w+)\s*=\s*(?=\|?\s*\{)/g)) {
    // A union of object types: every member of every variant.
    let i = m.index + m[0].length;
    while (i < text.length) {
      const rest = /^\s*\|?\s*/.exec(text.slice(i));
      i += rest[0].length;
      if (text[i] !== '{') break;
      const [body, end] = braced(text, i);
      add(m[1], body);
      i = end + 1;
    }
  }
  const all = (name) => {
    const own = new Set(types.get(name) ?? []);
    for (const b of bases.get(name) ?? []) for (const x of all(b)) own.add(x);
    return own;
  };
  return new Map([...types.keys()].map((n) => [n, all(n)]));
}

function properties(s) {
  const names = new Set(Object.keys(s.properties ?? {}));
  for (const key of ['oneOf', 'anyOf', 'allOf']) {
    for (const branch of s[key] ?? []) if (!branch.$ref) for (const p of properties(branch)) names.add(p);
  }
  return names;
}

function reached(roots) {
  const seen = new Set();
  const todo = [...roots];
  while (todo.length) {
    const s = todo.pop();
    if (Array.isArray(s)) todo.push(...s);
    else if (s && typeof s === 'object') {
      const ref = s.$ref;
      if (typeof ref === 'string' && ref.startsWith('#/$defs/')) {
        const name = ref.slice('#/$defs/'.length);
        if (!seen.has(name)) {
          seen.add(name);
          todo.push(schema.$defs[name]);
        }
      }
      todo.push(...Object.values(s));
    }
  }
  return seen;
}

/** The object `$defs` the results (or the JSON arguments) reach, with their properties; one a
 * result reaches too (a plan given back to apply) counts as a result. */
function objects(which) {
  const fns = Object.values(schema.functions);
  const results = reached(fns.filter((f) => f.result).map((f) => f.result));
  const inputs = reached(fns.flatMap((f) => Object.entries(f).filter(([k]) => k !== 'result').map(([, v]) => v)));
  const names = which === 'result' ? results : [...inputs].filter((n) => !results.has(n));
  const out = new Map();
  for (const n of names) {
    if (ENCODINGS.has(n)) continue;
    const p = properties(schema.$defs[n]);
    if (p.size) out.set(n, p);
  }
  return out;
}

function check(which, mapping) {
  const declared = declarations();
  const objs = objects(which);
  const unmapped = [...objs.keys()].filter((n) => !(n in mapping)).sort();
  assert.deepEqual(unmapped, [], `objects of include/cairn.schema.json no type declares (map them in schema.test.mjs)`);
  const stale = Object.keys(mapping).filter((n) => !objs.has(n)).sort();
  assert.deepEqual(stale, [], `the mapping names objects include/cairn.schema.json no longer has`);
  const missing = [];
  for (const [name, props] of [...objs].sort()) {
    const type = mapping[name];
    const fields = declared.get(type);
    assert.ok(fields, `src/types.ts declares no ${type} (for ${name})`);
    const field = (p) => RENAMED[`${name}.${p}`] ?? camel(p);
    for (const p of [...props].sort()) if (!fields.has(field(p))) missing.push(`${name}.${p} (${type}.${field(p)})`);
  }
  return missing;
}

test('every property of every result is a field of its TypeScript type', () => {
  assert.deepEqual(check('result', RESULTS), [], 'fields of the Rust reports the Node binding does not know');
});

test('every option of the C ABI is a field of its options interface', () => {
  assert.deepEqual(check('options', OPTIONS), [], 'options of the C ABI the Node binding does not offer');
});
