#!/usr/bin/env node
// Scripted fake of the Gemini API (generativelanguage v1beta), used to drive the real
// Gemini CLI in scripts/test-gemini (issue 55). Dependency-free (Node >= 18).
//
// Usage: node fake-gemini.mjs [PORT|0] [LOG_FILE] [REQUESTS_FILE]
// Prints the chosen port as the first line of stdout. REQUESTS_FILE gets one JSON line per
// request of the main agent (one that offers the write_file and run_shell_command tools):
// {"n", "kind", "prompt", "body"}, body being the request as sent.
//
// Script (decided statelessly from the conversation in each request; the turn is the last
// user content that is not a function response):
//   prompt containing "FIRST":  functionCall write_file notes.txt -> text "done"
//   prompt containing "SECOND": functionCall run_shell_command
//                               `rm notes.txt hello.txt && echo changed >> keep.txt` -> text
//   any other prompt:           text only
//   other requests (routing, titles, next-speaker checks): a short JSON or text answer
import http from 'node:http';
import fs from 'node:fs';

const port = Number(process.argv[2] || 0);
const logFile = process.argv[3] || null;
const requestsFile = process.argv[4] || null;
let counter = 0;

function log(line) {
  const msg = `${new Date().toISOString()} ${line}\n`;
  if (logFile) fs.appendFileSync(logFile, msg);
  else process.stderr.write(msg);
}

const textOf = (c) => (c.parts || []).filter((p) => typeof p.text === 'string').map((p) => p.text).join('\n');
const isResponse = (c) => (c.parts || []).some((p) => p.functionResponse);

function decide(body) {
  const tools = (body.tools || []).flatMap((t) => (t.functionDeclarations || []).map((f) => f.name));
  const contents = body.contents || [];
  const text = (t) => ({ parts: [{ text: t }] });
  if (!tools.includes('write_file') || !tools.includes('run_shell_command')) {
    // Side requests: a router or checker asking for JSON gets a plausible JSON.
    const schema = body.generationConfig && body.generationConfig.responseJsonSchema;
    if (schema || (body.generationConfig && body.generationConfig.responseMimeType === 'application/json')) {
      return { kind: 'side-json', ...text(JSON.stringify({ reasoning: 'fake', model_choice: 'flash', next_speaker: 'user' })) };
    }
    return { kind: 'side', ...text('ok') };
  }
  let start = -1;
  for (let i = contents.length - 1; i >= 0; i--) {
    if (contents[i].role === 'user' && !isResponse(contents[i])) { start = i; break; }
  }
  if (start < 0) return { kind: 'main?', ...text('done') };
  const prompt = textOf(contents[start]);
  const results = contents.slice(start + 1).filter(isResponse).length;
  const call = (name, args) => ({ parts: [{ functionCall: { name, args } }] });
  if (prompt.includes('FIRST') && results === 0) {
    return { kind: 'main', prompt, ...call('write_file', { file_path: 'notes.txt', content: 'notes of turn 1\n' }) };
  }
  if (prompt.includes('SECOND') && results === 0) {
    return { kind: 'main', prompt, ...call('run_shell_command', { command: 'rm notes.txt hello.txt && echo changed >> keep.txt', description: 'delete and edit' }) };
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
    if (req.url.includes(':countTokens')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ totalTokens: 10 }));
      return;
    }
    if (!req.url.includes(':generateContent') && !req.url.includes(':streamGenerateContent')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: 404, message: `fake: no ${req.url}`, status: 'NOT_FOUND' } }));
      return;
    }
    const d = decide(body);
    log(`#${n} -> ${d.kind} ${JSON.stringify(d.parts)}`);
    if (requestsFile && d.kind.startsWith('main')) {
      fs.appendFileSync(requestsFile, JSON.stringify({ n, kind: d.kind, prompt: d.prompt || '', body }) + '\n');
    }
    const reply = {
      candidates: [{ content: { role: 'model', parts: d.parts }, finishReason: 'STOP', index: 0 }],
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
      modelVersion: 'fake',
    };
    if (req.url.includes(':streamGenerateContent')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end(`data: ${JSON.stringify(reply)}\r\n\r\n`);
    } else {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(reply));
    }
  });
});
server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
