// A scripted fake of the OpenAI Responses API for the real Codex CLI (issue 55).
// Dependency-free node. Decides statelessly from each request: the newest user message
// names the turn (FIRST, SECOND, anything else), and whether a tool's output follows it says
// whether the turn's tool already ran. Logs each /responses request body as a JSON line.
// Usage: node fake-responses.mjs PORT LOG REQUESTS_JSONL   (PORT 0: any; prints the port)
import http from "node:http";
import fs from "node:fs";

const [port = "0", logPath = "/dev/null", requestsPath = "/dev/null"] = process.argv.slice(2);
const log = (msg) => fs.appendFileSync(logPath, `${new Date().toISOString()} ${msg}\n`);

// Turn 1's patch and turn 2's shell command (the test checks their effects).
export const PATCH = [
  "*** Begin Patch",
  "*** Add File: notes.txt",
  "+notes from turn one",
  "*** Update File: keep.txt",
  "@@",
  "-keep",
  "+keep (turn one)",
  "*** End Patch",
].join("\n");
export const SHELL = "rm notes.txt hello.txt && echo changed >> keep.txt";

function textOf(item) {
  if (typeof item.content === "string") return item.content;
  return (item.content || []).map((c) => c.text || "").join("");
}

// The newest user message that is a prompt (not Codex's own context messages), its index.
function lastPrompt(input) {
  for (let i = input.length - 1; i >= 0; i--) {
    const it = input[i];
    if (it.type === "message" && it.role === "user") {
      const t = textOf(it);
      if (!t.startsWith("<") && !t.startsWith("#")) return [i, t];
    }
  }
  return [-1, ""];
}

function toolNames(body) {
  return (body.tools || []).map((t) => t.name || (t.function && t.function.name) || t.type);
}

function applyPatchItem(body, id) {
  const tool = (body.tools || []).find((t) => t.name === "apply_patch");
  if (tool && tool.type === "custom") {
    return { type: "custom_tool_call", name: "apply_patch", input: PATCH, call_id: id, status: "completed" };
  }
  return { type: "function_call", name: "apply_patch", arguments: JSON.stringify({ input: PATCH }), call_id: id };
}

function shellItem(body, id) {
  const names = toolNames(body);
  if (names.includes("shell_command")) {
    return { type: "function_call", name: "shell_command", arguments: JSON.stringify({ command: SHELL }), call_id: id };
  }
  if (names.includes("exec_command")) {
    return { type: "function_call", name: "exec_command", arguments: JSON.stringify({ cmd: SHELL }), call_id: id };
  }
  return { type: "function_call", name: "shell", arguments: JSON.stringify({ command: ["bash", "-lc", SHELL] }), call_id: id };
}

function message(text, id) {
  return { type: "message", role: "assistant", id, content: [{ type: "output_text", text, annotations: [] }] };
}

function decide(body) {
  const input = body.input || [];
  const [at, prompt] = lastPrompt(input);
  const toolDone = input.slice(at + 1).some((it) => /_call_output$/.test(it.type || ""));
  if (prompt.includes("FIRST")) return toolDone ? [message("done: patched", "msg_1")] : [applyPatchItem(body, "call_patch_1")];
  if (prompt.includes("SECOND")) return toolDone ? [message("deleted notes.txt and hello.txt", "msg_2")] : [shellItem(body, "call_shell_2")];
  return [message(`ok: ${prompt.slice(0, 40)}`, "msg_3")];
}

function sse(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const ev of events) res.write(`event: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`);
  res.end();
}

let n = 0;
const server = http.createServer((req, res) => {
  let chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks).toString("utf8");
    log(`${req.method} ${req.url} ${raw.length} bytes`);
    if (req.method === "POST" && /\/responses$/.test(req.url.split("?")[0])) {
      let body;
      try {
        body = JSON.parse(raw);
      } catch (e) {
        res.writeHead(400).end(`not JSON: ${e}`);
        return;
      }
      const [, prompt] = lastPrompt(body.input || []);
      fs.appendFileSync(requestsPath, JSON.stringify({ prompt, tools: toolNames(body), body }) + "\n");
      const items = decide(body);
      const id = `resp_${++n}`;
      const events = [{ type: "response.created", response: { id } }];
      for (const item of items) events.push({ type: "response.output_item.done", item });
      events.push({
        type: "response.completed",
        response: { id, usage: { input_tokens: 1, input_tokens_details: null, output_tokens: 1, output_tokens_details: null, total_tokens: 2 } },
      });
      log(`  -> ${items.map((i) => i.type + ":" + (i.name || "")).join(", ")}`);
      sse(res, events);
      return;
    }
    if (req.method === "GET" && /\/models/.test(req.url)) {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ models: [], data: [] }));
      return;
    }
    res.writeHead(404, { "content-type": "application/json" }).end(JSON.stringify({ error: { message: "not here" } }));
  });
});
server.listen(Number(port), "127.0.0.1", () => {
  process.stdout.write(`${server.address().port}\n`);
});
