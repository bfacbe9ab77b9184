#!/usr/bin/env node
// Scripted fake of the Anthropic Messages API, used to drive the real Claude
// Code CLI in scripts/test-claude-code. Dependency-free (Node >= 18).
//
// Usage: node fake-model.mjs [PORT|0] [PROJECT_DIR] [LOG_FILE] [REQUESTS_FILE]
// Prints the chosen port as the first line of stdout. REQUESTS_FILE gets one
// JSON line per request of the main agent (one that carries the Write and Bash
// tools): {"n", "kind", "prompt", "body"}, body being the request as sent.
//
// Script (decided statelessly from the conversation in each request; the turn
// is the last user message that is not a tool result):
//   prompt containing "FIRST":  tool_use Write notes.txt -> tool_use Bash
//                               `rm README.md` -> text "done" (end_turn)
//   prompt containing "SECOND": tool_use Bash `rm notes.txt hello.txt &&
//                               echo changed >> keep.txt` -> text (end_turn)
//   any other prompt:           text only
//   requests without the Write and Bash tools (titles, --bare, ...): short text
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';

const port = Number(process.argv[2] || 0);
const projectDir = process.argv[3] || process.cwd();
const logFile = process.argv[4] || null;
const requestsFile = process.argv[5] || null;

export const WRITE_ID = 'toolu_01CairnFakeWrite0001';
export const BASH_ID = 'toolu_01CairnFakeBash00001';
export const BASH2_ID = 'toolu_01CairnFakeBash00002';

let counter = 0;
let lastPrompt = '';

function log(line) {
  const msg = `${new Date().toISOString()} ${line}\n`;
  if (logFile) fs.appendFileSync(logFile, msg);
  else process.stderr.write(msg);
}

function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((b) => b && b.type === 'text')
    .map((b) => b.text)
    .join('\n');
}

function hasToolResult(msg) {
  return (
    Array.isArray(msg.content) &&
    msg.content.some((b) => b && b.type === 'tool_result')
  );
}

// Decide the reply: a list of content blocks and a stop_reason.
function decide(body) {
  const tools = Array.isArray(body.tools) ? body.tools.map((t) => t.name) : [];
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const text = (t) => ({ blocks: [{ type: 'text', text: t }], stop: 'end_turn' });

  if (!tools.includes('Write') || !tools.includes('Bash')) {
    return { kind: 'side', ...text('ok') };
  }
  // The current turn starts at the last user message that is not a tool result.
  let start = -1;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === 'user' && !hasToolResult(messages[i])) {
      start = i;
      break;
    }
  }
  if (start < 0) return { kind: 'main?', ...text('done') };
  const prompt = textOf(messages[start].content);
  lastPrompt = prompt;
  const results = messages
    .slice(start + 1)
    .filter((m) => m.role === 'user' && hasToolResult(m)).length;

  const bash = (id, command, description) => ({
    blocks: [{ type: 'tool_use', id, name: 'Bash', input: { command, description } }],
    stop: 'tool_use',
  });

  if (/\bFIRST\b/.test(prompt)) {
    if (results === 0) {
      return {
        kind: 'first/write',
        blocks: [
          { type: 'text', text: 'Creating notes.txt.' },
          {
            type: 'tool_use',
            id: WRITE_ID,
            name: 'Write',
            input: {
              file_path: path.join(projectDir, 'notes.txt'),
              content: 'hello from the fake model\n',
            },
          },
        ],
        stop: 'tool_use',
      };
    }
    if (results === 1) {
      return { kind: 'first/bash', ...bash(BASH_ID, 'rm README.md', 'Remove README.md') };
    }
    return { kind: 'first/done', ...text('done') };
  }
  if (/\bSECOND\b/.test(prompt)) {
    if (results === 0) {
      return {
        kind: 'second/bash',
        ...bash(
          BASH2_ID,
          'rm notes.txt hello.txt && echo changed >> keep.txt',
          'Delete two files, edit keep.txt',
        ),
      };
    }
    return { kind: 'second/done', ...text('deleted notes.txt and hello.txt, edited keep.txt') };
  }
  return { kind: 'other', ...text('answer, no tools') };
}

function usage() {
  return {
    input_tokens: 10,
    output_tokens: 5,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  };
}

function sendJson(res, status, obj) {
  const data = JSON.stringify(obj);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(data),
    'request-id': `req_fake_${counter}`,
  });
  res.end(data);
}

function sendStream(res, id, model, blocks, stop) {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'request-id': `req_fake_${counter}`,
  });
  const ev = (type, data) =>
    res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev('message_start', {
    message: {
      id,
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...usage(), output_tokens: 1 },
    },
  });
  ev('ping', {});
  blocks.forEach((b, index) => {
    if (b.type === 'text') {
      ev('content_block_start', { index, content_block: { type: 'text', text: '' } });
      ev('content_block_delta', { index, delta: { type: 'text_delta', text: b.text } });
    } else {
      ev('content_block_start', {
        index,
        content_block: { type: 'tool_use', id: b.id, name: b.name, input: {} },
      });
      ev('content_block_delta', {
        index,
        delta: { type: 'input_json_delta', partial_json: JSON.stringify(b.input) },
      });
    }
    ev('content_block_stop', { index });
  });
  ev('message_delta', {
    delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: 5 },
  });
  ev('message_stop', {});
  res.end();
}

const server = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    counter++;
    let body = {};
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      body = {};
    }
    const url = new URL(req.url, 'http://localhost');
    const p = url.pathname;

    if (req.method === 'POST' && p === '/v1/messages') {
      lastPrompt = '';
      const d = decide(body);
      const id = `msg_fake_${String(counter).padStart(4, '0')}`;
      const model = body.model || 'claude-fake';
      log(
        `#${counter} POST ${p} model=${model} stream=${!!body.stream} ` +
          `msgs=${(body.messages || []).length} tools=${(body.tools || []).length} ` +
          `-> ${d.kind} stop=${d.stop}` +
          (lastPrompt ? ` prompt=${JSON.stringify(lastPrompt.slice(-300))}` : ''),
      );
      if (requestsFile && d.kind !== 'side') {
        const line = { n: counter, kind: d.kind, prompt: lastPrompt, body };
        fs.appendFileSync(requestsFile, `${JSON.stringify(line)}\n`);
      }
      if (body.stream) return sendStream(res, id, model, d.blocks, d.stop);
      return sendJson(res, 200, {
        id,
        type: 'message',
        role: 'assistant',
        model,
        content: d.blocks,
        stop_reason: d.stop,
        stop_sequence: null,
        usage: usage(),
      });
    }
    if (req.method === 'POST' && p === '/v1/messages/count_tokens') {
      log(`#${counter} POST ${p}`);
      return sendJson(res, 200, { input_tokens: 100 });
    }
    if (req.method === 'GET' && p.startsWith('/v1/models')) {
      log(`#${counter} GET ${p}`);
      return sendJson(res, 200, {
        data: [
          {
            type: 'model',
            id: 'claude-sonnet-4-5',
            display_name: 'Claude Sonnet 4.5',
            created_at: '2025-01-01T00:00:00Z',
          },
        ],
        has_more: false,
        first_id: 'claude-sonnet-4-5',
        last_id: 'claude-sonnet-4-5',
      });
    }
    log(`#${counter} ${req.method} ${url.pathname}${url.search} (other, body ${raw.length} bytes) -> {}`);
    return sendJson(res, 200, {});
  });
});

server.listen(port, '127.0.0.1', () => {
  process.stdout.write(`${server.address().port}\n`);
});
