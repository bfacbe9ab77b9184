// The installed package finds libcairn in its platform package (@cairn/linux-x64-gnu), and
// says which package to install when there is none. The compiled package is laid out as npm
// installs it (node_modules/cairn, node_modules/@cairn/linux-x64-gnu) in a temporary project;
// scripts/test-packages does the same with the real `npm pack` files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PLATFORM_PACKAGES, platformKey, defaultLibraryPath } from 'cairn/ffi';
import { tempDir } from './helpers.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const pkgDir = path.join(here, '..');

/** A project with `cairn` installed in node_modules (version 9.8.7), without a platform package. */
function installedProject(t) {
  const project = tempDir(t, 'cairn-node-installed-');
  const mod = path.join(project, 'node_modules');
  const cairn = path.join(mod, 'cairn');
  fs.mkdirSync(cairn, { recursive: true });
  fs.cpSync(path.join(pkgDir, 'dist'), path.join(cairn, 'dist'), { recursive: true });
  const json = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8'));
  fs.writeFileSync(path.join(cairn, 'package.json'), JSON.stringify({ ...json, version: '9.8.7' }));
  fs.symlinkSync(path.join(pkgDir, 'node_modules', 'koffi'), path.join(mod, 'koffi'));
  return project;
}

/** Loads the library in `project` in a child process; its path, or its CairnLoadError. */
function loadIn(project) {
  const script =
    "const c = require('cairn/ffi'); try { console.log(JSON.stringify({ path: c.load().path })); } " +
    'catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message })); }';
  const env = { ...process.env };
  delete env.CAIRN_LIB;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: project, env, encoding: 'utf8' }));
}

test('this machine is named as the platform packages name it', () => {
  assert.match(platformKey(), /^[a-z0-9]+-[a-z0-9]+(-(gnu|musl))?$/);
  if (process.platform === 'linux' && process.arch === 'x64') {
    assert.equal(PLATFORM_PACKAGES[platformKey()] ?? null, platformKey() === 'linux-x64-gnu' ? '@cairn/linux-x64-gnu' : null);
  }
});

test('in the checkout the library is the Cargo workspace build', () => {
  const saved = process.env.CAIRN_LIB;
  delete process.env.CAIRN_LIB;
  try {
    assert.equal(defaultLibraryPath(), path.resolve(pkgDir, '..', '..', process.env.CARGO_TARGET_DIR ?? 'target', 'release', 'libcairn.so'));
  } finally {
    if (saved !== undefined) process.env.CAIRN_LIB = saved;
  }
});

test('an installed cairn without its platform package says which package to install', (t) => {
  if (platformKey() !== 'linux-x64-gnu') return t.skip(`no platform package for ${platformKey()}`);
  const e = loadIn(installedProject(t));
  assert.equal(e.code, 'ERR_CAIRN_LIBRARY_MISSING');
  assert.match(e.message, /npm install @cairn\/linux-x64-gnu@9\.8\.7/);
  assert.match(e.message, /--omit=optional/);
});

test('an installed cairn loads libcairn from its platform package', (t) => {
  if (platformKey() !== 'linux-x64-gnu') return t.skip(`no platform package for ${platformKey()}`);
  const project = installedProject(t);
  const plat = path.join(project, 'node_modules', '@cairn', 'linux-x64-gnu');
  fs.mkdirSync(plat, { recursive: true });
  fs.writeFileSync(path.join(plat, 'package.json'), JSON.stringify({ name: '@cairn/linux-x64-gnu', version: '9.8.7' }));
  const built = path.resolve(pkgDir, '..', '..', process.env.CARGO_TARGET_DIR ?? 'target', 'release', 'libcairn.so');
  fs.copyFileSync(process.env.CAIRN_LIB ?? built, path.join(plat, 'libcairn.so'));
  assert.deepEqual(loadIn(project), { path: path.join(fs.realpathSync(plat), 'libcairn.so') });
});
