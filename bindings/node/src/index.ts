/**
 * Cairn for Node: snapshots of an AI agent's workspace, restored safely, over libcairn's C ABI
 * (through koffi; no compiled addon). See README.md.
 */
export { Workspace, Hold, version, abiVersion, statusDescription, STATUS } from './workspace.js';
export { CancelToken } from './cancel.js';
export { CairnError, UseAfterCloseError, ERROR_CODES, STATUS_BY_CODE, type ErrorCode } from './errors.js';
export { CairnLoadError, ABI_VERSION, defaultLibraryPath, load as loadLibrary, type LoadErrorCode } from './ffi.js';
export { pathFromBuffer, pathToBuffer, isEscapedPath } from './paths.js';
export { handleStats } from './handle.js';
export type * from './types.js';
export { Threads, Run } from './threads.js';
