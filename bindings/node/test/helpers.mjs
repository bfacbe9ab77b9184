// Fixtures shared by the tests: temporary workspaces with files, cleaned up after each test.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Workspace } from 'cairn';

/** The bytes `caf\xe9.txt`: a Latin-1 name that is not UTF-8. */
export const CAFE_BYTES = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x2e, 0x74, 0x78, 0x74]);
/** The same name as the binding spells it (the byte 0xE9 escaped as U+DCE9). */
export const CAFE = 'caf\udce9.txt';

/** A temporary directory removed when the test ends. */
export function tempDir(t, prefix = 'cairn-node-') {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes `files` (relative path -> content) under `root`. */
export function writeTree(root, files) {
  for (const [rel, content] of Object.entries(files)) {
    const p = path.join(root, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
  }
}

/** A root with a few files and a workspace on it (closed when the test ends). */
export async function fixture(t, files = { 'src/main.c': 'int main(void) { return 0; }\n', README: 'hello\n' }) {
  const dir = tempDir(t);
  const root = path.join(dir, 'root');
  const store = path.join(dir, 'store');
  fs.mkdirSync(root);
  writeTree(root, files);
  const ws = await Workspace.open(root, { store });
  t.after(() => ws.close());
  return { dir, root, store, ws };
}

/** Writes `count` files of `size` distinct bytes each under `root/many/`. */
export function writeMany(root, count, size) {
  const block = Buffer.alloc(size);
  for (let i = 0; i < count; i++) {
    const dir = path.join(root, 'many', `d${i % 40}`);
    if (i < 40) fs.mkdirSync(dir, { recursive: true });
    block.fill(i % 251);
    block.writeUInt32LE(i, 0);
    block.writeUInt32LE(i * 2654435761 >>> 0, size - 4);
    fs.writeFileSync(path.join(dir, `f${i}.bin`), block);
  }
}

export const read = (root, rel) => fs.readFileSync(path.join(root, rel), 'utf8');
