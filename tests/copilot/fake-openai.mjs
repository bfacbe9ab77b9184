#!/usr/bin/env node
// Scripted fake of the OpenAI Chat Completions API, used to drive the real GitHub Copilot CLI
// (BYOK: COPILOT_PROVIDER_BASE_URL, COPILOT_OFFLINE=true) in scripts/test-copilot (issue 55).
// Dependency-free (Node >= 18).
//
// Usage: node fake-openai.mjs [PORT|0] [LOG_FILE] [REQUESTS_FILE]
// Prints the chosen port as the first line of stdout. REQUESTS_FILE gets one JSON line per
// request of the main agent (one that offers the create and bash tools):
// {"n", "kind", "prompt", "body"}.
//
// Script (decided statelessly from the conversation in each request; the turn is the last
// user message):
//   prompt containing "FIRST":  tool call create notes.txt -> text "done"
//   prompt containing "SECOND": tool call bash `rm notes.txt hello.txt && echo changed >> keep.txt`
//                               -> text "deleted notes.txt and hello.txt"
//   any other prompt, or a request without those tools: text only
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const port = Number(process.argv[2] || 0);
const logFile = process.argv[3] || null;
const requestsFile = process.argv[4] || null;
let counter = 0;

function log(line) {
  const msg = `${new Date().toISOString()} ${line}\n`;
  if (logFile) fs.appendFileSync(logFile, msg);
  else process.stderr.write(msg);
}

const textOf = (c) =>
  typeof c === 'string' ? c : Array.isArray(c) ? c.map((p) => p.text || '').join('\n') : '';

function decide(body) {
  const tools = (body.tools || []).map((t) => t.function && t.function.name);
  const messages = body.messages || [];
  const text = (t) => ({ text: t });
  if (!tools.includes('create') || !tools.includes('bash')) return { kind: 'side', ...text('ok') };
  let start = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === 'user') { start = i; break; }
  }
  if (start < 0) return { kind: 'main?', ...text('done') };
  const prompt = textOf(messages[start].content);
  const results = messages.slice(start + 1).filter((m) => m.role === 'tool').length;
  const call = (id, name, args) => ({ call: { id, name, args } });
  // The project directory, from the system prompt's current working directory line.
  const system = messages.filter((m) => m.role === 'system').map((m) => textOf(m.content)).join('\n');
  const cwd = (system.match(/working directory[^/]*(\/[^\s`'"]+)/i) || [])[1] || process.cwd();
  if (prompt.includes('FIRST') && results === 0) {
    return { kind: 'main', prompt, ...call('call_cairn_create_1', 'create', { path: path.join(cwd, 'notes.txt'), file_text: 'notes of turn 1\n' }) };
  }
  if (prompt.includes('SECOND') && results === 0) {
    return { kind: 'main', prompt, ...call('call_cairn_bash_2', 'bash', { command: 'rm notes.txt hello.txt && echo changed >> keep.txt', description: 'delete and edit' }) };
  }
  if (prompt.includes('SECOND')) return { kind: 'main', prompt, ...text('deleted notes.txt and hello.txt') };
  return { kind: 'main', prompt, ...text('done') };
}

const server = http.createServer((req, res) => {
  let data = '';
  req.on('data', (c) => (data += c));
  req.on('end', () => {
    const n = ++counter;
    let body = {};
    try { body = data ? JSON.parse(data) : {}; } catch { body = {}; }
    log(`#${n} ${req.method} ${req.url} ${data.length}b`);
    if (!req.url.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `fake: no ${req.url}` } }));
      return;
    }
    const d = decide(body);
    log(`#${n} -> ${d.kind} ${JSON.stringify(d.call || d.text)}`);
    if (requestsFile && d.kind.startsWith('main')) {
      fs.appendFileSync(requestsFile, JSON.stringify({ n, kind: d.kind, prompt: d.prompt || '', body }) + '\n');
    }
    const id = `chatcmpl-fake-${n}`;
    const delta = d.call
      ? { role: 'assistant', tool_calls: [{ index: 0, id: d.call.id, type: 'function', function: { name: d.call.name, arguments: JSON.stringify(d.call.args) } }] }
      : { role: 'assistant', content: d.text };
    const finish = d.call ? 'tool_calls' : 'stop';
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (choice, extra = {}) =>
        res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: body.model, choices: [choice], ...extra })}\n\n`);
      chunk({ index: 0, delta, finish_reason: null });
      chunk({ index: 0, delta: {}, finish_reason: finish }, { usage });
      res.end('data: [DONE]\n\n');
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      const message = d.call ? { role: 'assistant', content: null, tool_calls: delta.tool_calls.map(({ index, ...c }) => c) } : { role: 'assistant', content: d.text };
      res.end(JSON.stringify({ id, object: 'chat.completion', created: 0, model: body.model, choices: [{ index: 0, message, finish_reason: finish }], usage }));
    }
  });
});
server.listen(port, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
