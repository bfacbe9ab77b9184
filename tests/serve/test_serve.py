"""`cairn serve` end to end (issue 59), run by scripts/test-serve.

- The OpenAPI document (docs/openapi.json, and the one served at /v1/openapi.json, which must
  be the same) passes a standard validator (openapi-spec-validator).
- Two clients in two processes, this Python one and a Node one (tests/serve/client.mjs), follow
  the feed at once; the Node one first makes calls through a generic OpenAPI client that knows
  the API only from the served document. A rewind with a request key is sent twice: it runs
  once, and both clients see the same completed rewind (its id and cursor) through the feed.

Env: CAIRN_BIN (the cairn binary), SERVE_NODE_DIR (openapi-client-axios installed there),
SERVE_KEEP=1 keeps the temporary directory.
"""

import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

ROOT = Path(__file__).resolve().parents[2]
CAIRN = os.environ["CAIRN_BIN"]


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


def main():
    spec, _ = read_from_filename(str(ROOT / "docs/openapi.json"))
    validate(spec)
    print("docs/openapi.json: valid", spec["openapi"])

    tmp = tempfile.mkdtemp(prefix="cairn-serve-")
    env = {k: v for k, v in os.environ.items() if k not in ("CAIRN_STORE", "CAIRN_THREADS_DB", "CAIRN_REMOTE")}
    env["CAIRN_HOME"] = os.path.join(tmp, "home")
    ws = Path(tmp, "ws")
    ws.mkdir()
    (ws / "README.md").write_text("# demo\n")

    def cairn(*args):
        out = subprocess.run([CAIRN, "-C", str(ws), "--json", *args], env=env, check=True, capture_output=True)
        return json.loads(out.stdout)

    def append(kind, text):
        return cairn("thread", "append", "chat", "--kind", kind, "--text", text)["entry"]["id"]

    cairn("thread", "new", "--id", "chat")
    append("user", "turn one")
    (ws / "turn1.txt").write_text("1\n")
    end1 = append("assistant", "did one")
    append("user", "turn two")
    (ws / "turn2.txt").write_text("2\n")
    append("assistant", "did two")

    server = subprocess.Popen([CAIRN, "-C", str(ws), "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    node = None
    try:
        first = json.loads(server.stdout.readline())
        url, token = first["url"], first["token"]
        host, port = url.removeprefix("http://").split(":")
        headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json"}

        def call(method, path, body=None):
            c = http.client.HTTPConnection(host, int(port), timeout=60)
            c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            r = c.getresponse()
            data = r.read()
            c.close()
            return r.status, json.loads(data)

        status, served = call("GET", "/v1/openapi.json")
        check(status == 200, "the document is served")
        check(served == json.loads((ROOT / "docs/openapi.json").read_text()), "the served document is docs/openapi.json")
        validate(served)
        print("/v1/openapi.json: valid, the committed one")

        # The Python client's feed, on a thread of its own.
        ready = threading.Event()
        seen = {}

        def follow():
            c = http.client.HTTPConnection(host, int(port), timeout=60)
            c.request("GET", "/v1/events", headers={**headers, "Accept": "text/event-stream"})
            r = c.getresponse()
            kind, ident, data = None, None, ""
            while True:
                line = r.readline().decode()
                if not line:
                    return
                line = line.rstrip("\r\n")
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("id:"):
                    ident = int(line[3:].strip())
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif line == "":
                    if kind == "ready":
                        ready.set()
                    elif kind == "cairn":
                        event = json.loads(data)
                        if event["kind"] == "rewind_completed":
                            seen.update(rewind_id=event["data"]["rewind_id"], cursor=ident)
                            return
                    kind, ident, data = None, None, ""

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()

        node_env = {**env, "CAIRN_SERVE_URL": url, "CAIRN_SERVE_TOKEN": token}
        node = subprocess.Popen(["node", str(ROOT / "tests/serve/client.mjs")], env=node_env, stdout=subprocess.PIPE)
        generic = json.loads(node.stdout.readline())["generic"]
        check(generic == {"threads": ["chat"], "active": 4}, f"the generic OpenAPI client's calls: {generic}")
        print("node: a generic OpenAPI client (openapi-client-axios) called list_threads and thread_view")
        check("ready" in json.loads(node.stdout.readline()), "the Node client's feed is open")
        check(ready.wait(60), "the Python client's feed is open")

        body = {"entry": end1, "files": True, "key": "k-e2e"}
        status, done = call("POST", "/v1/threads/chat/rewind", body)
        check(status == 200 and done["state"] == "completed", f"the rewind: {status} {done}")
        check(not (ws / "turn2.txt").exists(), "the files went back")
        status, again = call("POST", "/v1/threads/chat/rewind", body)
        check(status == 200 and again["repeated"] and again["rewind_id"] == done["rewind_id"], f"the same key: {again}")

        theirs = json.loads(node.stdout.readline())["completed"]
        follower.join(60)
        check(seen.get("rewind_id") == done["rewind_id"], f"python saw the rewind: {seen}")
        check(theirs == seen, f"node and python saw the same completed rewind: {theirs} {seen}")
        check(node.wait(30) == 0, "the Node client ended well")
        status, log = call("GET", "/v1/events/log?cursor=0")
        started = [e for e in log["events"] if e["kind"] == "rewind_started"]
        check(len(started) == 1, f"one rewind ran: {started}")
        print(f"python and node both saw rewind {seen['rewind_id']} complete at cursor {seen['cursor']}; the key ran it once")
    finally:
        for p in (node, server):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        if os.environ.get("SERVE_KEEP") != "1":
            subprocess.run(["rm", "-rf", tmp], check=False)
        else:
            print("kept", tmp)
    print("PASS")


if __name__ == "__main__":
    main()
