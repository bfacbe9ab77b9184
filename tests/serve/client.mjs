// A Node client of `cairn serve` (issue 59), started by tests/serve/test_serve.py beside the
// Python one: it makes one call through a generic OpenAPI client (openapi-client-axios, which
// knows the API only from /v1/openapi.json), then follows the feed (/v1/events) until a rewind
// completes. One JSON line on stdout per step: {"generic": ...}, {"ready": CURSOR},
// {"completed": {"rewind_id", "cursor"}}.
// Env: CAIRN_SERVE_URL, CAIRN_SERVE_TOKEN, SERVE_NODE_DIR (where openapi-client-axios is).
import { createRequire } from "node:module";

const url = process.env.CAIRN_SERVE_URL;
const token = process.env.CAIRN_SERVE_TOKEN;
const require = createRequire(process.env.SERVE_NODE_DIR + "/package.json");
const { OpenAPIClientAxios } = require("openapi-client-axios");
const headers = { Authorization: "Bearer " + token };
const say = (v) => process.stdout.write(JSON.stringify(v) + "\n");
const deadline = setTimeout(() => { console.error("no rewind_completed within 60 s"); process.exit(1); }, 60000);

// The generic client: operations by their operationId, from the served document.
const definition = await (await fetch(url + "/v1/openapi.json", { headers })).json();
const api = new OpenAPIClientAxios({ definition, axiosConfigDefaults: { baseURL: url, headers } });
const client = await api.init();
const threads = await client.list_threads();
const view = await client.thread_view({ id: "chat" });
say({ generic: { threads: threads.data.threads.map((t) => t.id), active: view.data.active_branch.length } });

// The feed, read as a stream of server-sent events.
const res = await fetch(url + "/v1/events", { headers: { ...headers, Accept: "text/event-stream" } });
if (res.status !== 200) { console.error("the feed answered " + res.status); process.exit(1); }
const decoder = new TextDecoder();
let buffer = "";
for await (const chunk of res.body) {
  buffer += decoder.decode(chunk, { stream: true });
  let end;
  while ((end = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, end);
    buffer = buffer.slice(end + 2);
    const field = (name) => block.split("\n").filter((l) => l.startsWith(name + ":")).map((l) => l.slice(name.length + 1).trim()).join("");
    const kind = field("event");
    if (kind === "ready") say({ ready: JSON.parse(field("data")).cursor });
    if (kind !== "cairn") continue;
    const event = JSON.parse(field("data"));
    if (event.kind === "rewind_completed") {
      say({ completed: { rewind_id: event.data.rewind_id, cursor: Number(field("id")) } });
      clearTimeout(deadline);
      process.exit(0);
    }
  }
}
console.error("the feed ended");
process.exit(1);
