"""Cairn Studio in headless Chromium (issue 22), run by scripts/test-studio.

Makes a workspace with a thread of two turns (each user message checkpointed by the real
`cairn thread append`), starts the real `cairn studio --no-open`, and drives its page through
Selenium and chromedriver. Each check is a step of one story; later ones stand on earlier ones.
Env: CAIRN_BIN (the cairn binary), CAIRN_STUDIO_SCREENSHOTS (a directory for screenshots),
STUDIO_KEEP=1 (keep the temporary directory).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

CAIRN = os.environ["CAIRN_BIN"]
SHOTS = os.environ.get("CAIRN_STUDIO_SCREENSHOTS")
TMP = Path(tempfile.mkdtemp(prefix="cairn-studio-test-"))
WS = TMP / "project"
ENV = dict(os.environ, CAIRN_HOME=str(TMP / "home"))
ENV.pop("CAIRN_STORE", None)
ENV.pop("CAIRN_THREADS_DB", None)


def cairn(*args):
    r = subprocess.run([CAIRN, "-C", str(WS), *args], env=ENV, capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"cairn {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def append(kind, text):
    return json.loads(cairn("--json", "thread", "append", "demo", "--kind", kind, "--text", text))


def make_story():
    """Two turns: the first writes app.py and a binary logo.png, the second edits app.py,
    adds notes.md and removes old.txt."""
    WS.mkdir(parents=True)
    (WS / "app.py").write_text("def main():\n    print('hello')\n")
    (WS / "old.txt").write_text("an old file\n")
    cairn("thread", "new", "--id", "demo")
    u1 = append("user", "Add a logo and say hello properly")
    (WS / "app.py").write_text("def main():\n    print('hello, world')\n\n\nmain()\n")
    # A snapshot in the middle of the turn, as an agent takes before a tool call: the turn's
    # diff attributes logo.png to it and app.py to the turn's own checkpoint.
    cairn("snapshot", "--label", "toolu_logo")
    (WS / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    a1 = append("assistant", "Done: app.py greets the world; logo.png added.")
    u2 = append("user", "Now write notes and drop old.txt")
    (WS / "app.py").write_text("def main():\n    print('hello, world')\n    print('bye')\n\n\nmain()\n")
    (WS / "notes.md").write_text("# Notes\n\n- the second turn\n")
    (WS / "old.txt").unlink()
    a2 = append("assistant", "Notes written, old.txt removed.")
    return {"u1": u1["entry"]["id"], "a1": a1["entry"]["id"], "u2": u2["entry"]["id"], "a2": a2["entry"]["id"],
            "cp1": u1["checkpoint"]["snapshot_id"], "cp2": u2["checkpoint"]["snapshot_id"]}


def start_studio():
    p = subprocess.Popen([CAIRN, "-C", str(WS), "studio", "--no-open"], env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = p.stdout.readline().strip()
    if not url.startswith("http://127.0.0.1:"):
        p.kill()
        raise AssertionError(f"studio printed {url!r} first; stderr: {p.stderr.read()}")
    return p, url


def http(url, *, method="GET", headers=None, body=None):
    """(status, json) of a request, without following anything."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def browser():
    o = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1500,950", "--no-first-run", "--no-default-browser-check"):
        o.add_argument(a)
    o.binary_location = shutil.which("chromium")
    # Chromium keeps its profile, crash reports and temporary files under the run's own
    # directory, not in the home directory or /tmp of whoever runs the tests.
    o.add_argument(f"--user-data-dir={TMP / 'chromium'}")
    env = dict(os.environ, HOME=str(TMP), XDG_CONFIG_HOME=str(TMP / "config"),
               XDG_CACHE_HOME=str(TMP / "cache"), TMPDIR=str(TMP))
    return webdriver.Chrome(service=Service(shutil.which("chromedriver"), env=env), options=o)


def shot(driver, name):
    if SHOTS:
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


class Story:
    def __init__(self):
        self.ids = make_story()
        self.proc, self.url = start_studio()
        self.base = self.url.split("/?")[0]
        self.token = self.url.split("token=")[1]
        self.port = self.base.rsplit(":", 1)[1]
        self.driver = browser()
        # A live refresh may replace any element between finding and reading it: every wait
        # tries again on a stale element rather than failing (the page re-renders on events).
        self.wait = WebDriverWait(self.driver, 20,
                                  ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))

    def close(self):
        self.driver.quit()
        self.proc.terminate()
        self.proc.wait(timeout=10)

    def auth(self, extra=None):
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    def entries(self, active=None):
        sel = "#tree .entry" if active is None else f"#tree .entry[data-active='{1 if active else 0}']"
        return self.driver.find_elements(By.CSS_SELECTOR, sel)

    def title(self):
        """The plan's title, or "" while the page is replacing it."""
        try:
            return self.driver.find_element(By.ID, "plan-title").text
        except (NoSuchElementException, StaleElementReferenceException):
            return ""

    def click(self, css):
        """Clicks the element, waiting for it (and again if a live refresh replaced it)."""
        def attempt(d):
            try:
                e = EC.element_to_be_clickable((By.CSS_SELECTOR, css))(d)
                if e:
                    e.click()
                return e
            except StaleElementReferenceException:
                return False
        return self.wait.until(attempt)

    # ---- the checks, in order ----

    def test_the_url_is_the_first_line_and_the_page_loads_without_its_token_in_the_address(self):
        assert "token=" in self.url and len(self.token) == 32, self.url
        self.driver.get(self.url)
        self.wait.until(lambda d: len(self.entries()) == 4)
        assert "token" not in self.driver.current_url, self.driver.current_url

    def test_the_thread_tree_renders_with_checkpoints_marked(self):
        d = self.driver
        assert d.find_element(By.CSS_SELECTOR, "#threads li[data-thread='demo']")
        # Read in one wait each: a live refresh may replace the tree between find and read.
        rows = self.wait.until(lambda d: [r.get_attribute("data-entry") for r in self.entries(active=True)])
        assert rows == [self.ids[k] for k in ("u1", "a1", "u2", "a2")], rows
        chips = self.wait.until(lambda d: [(c.get_attribute("data-snapshot"), c.text)
                                           for c in d.find_elements(By.CSS_SELECTOR, "#tree .cp")])
        assert {c for c, _ in chips} == {self.ids["cp1"], self.ids["cp2"]}, chips
        assert "files" in chips[0][1], chips
        self.wait.until(lambda d: d.find_element(By.ID, "live").text == "live")
        shot(d, "thread")

    def test_a_turn_diff_opens_with_a_unified_diff_and_the_binary_file_named(self):
        d = self.driver
        self.click(f"#tree .cp[data-snapshot='{self.ids['cp1']}']")
        self.click("#show-turn")
        self.wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#diff-files li"))
        paths = [li.get_attribute("data-path") for li in d.find_elements(By.CSS_SELECTOR, "#diff-files li")]
        assert paths == ["app.py", "logo.png"], paths
        # Who changed what: each row names the checkpoint interval it changed in.
        who = self.wait.until(lambda d: {li.get_attribute("data-path"): li.find_element(By.CSS_SELECTOR, ".who").text
                                         for li in d.find_elements(By.CSS_SELECTOR, "#diff-files li")})
        assert who["logo.png"] == "by toolu_logo", who
        assert "toolu_logo" not in who["app.py"] and who["app.py"].startswith("by "), who
        self.click("#diff-files li[data-path='logo.png']")
        self.wait.until(lambda d: "Binary file logo.png" in d.find_element(By.ID, "patch").text)
        self.click("#diff-files li[data-path='app.py']")
        self.wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#patch pre.patch span.add"))
        added = [s.text for s in d.find_elements(By.CSS_SELECTOR, "#patch span.add")]
        removed = [s.text for s in d.find_elements(By.CSS_SELECTOR, "#patch span.del")]
        assert "+    print('hello, world')" in added and "-    print('hello')" in removed, (added, removed)
        shot(d, "diff")

    def test_what_changed_since_compares_with_the_files_now(self):
        d = self.driver
        self.click(f"#tree .cp[data-snapshot='{self.ids['cp2']}']")
        self.click("#show-since")
        self.wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#diff-files li"))
        paths = [li.get_attribute("data-path") for li in d.find_elements(By.CSS_SELECTOR, "#diff-files li")]
        assert paths == ["app.py", "notes.md", "old.txt"], paths

    def test_a_rewind_shows_its_plan_and_once_confirmed_changes_the_files_and_the_tree(self):
        d = self.driver
        self.click(f"#tree .entry[data-entry='{self.ids['a1']}'] button.rewind")
        self.wait.until(lambda d: self.title().startswith("Plan: rewind thread demo"))
        plan = d.find_element(By.ID, "plan").text
        # The exact dry run: notes.md goes, old.txt and app.py come back, two entries cut.
        assert "Files to restore (2)" in plan and "Files to delete (1)" in plan, plan
        assert "notes.md" in plan and "old.txt" in plan, plan
        assert "Conversation entries to cut (kept as earlier history) (2)" in plan, plan
        assert "plan digest" in plan
        assert (WS / "notes.md").exists(), "the plan changed nothing"
        shot(d, "rewind-plan")
        self.click("#plan-confirm")
        self.wait.until(lambda d: d.find_elements(By.ID, "result"))
        assert d.find_element(By.ID, "safety").text, "the safety snapshot is named"
        assert not (WS / "notes.md").exists() and (WS / "old.txt").exists()
        assert "bye" not in (WS / "app.py").read_text()
        shot(d, "rewind-done")
        self.click("#plan-cancel")
        self.wait.until(lambda d: len(self.entries(active=True)) == 2)
        history = self.wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#tree details.history").text)
        assert "2 entries" in history, history
        self.click("#tree details.history summary")
        self.wait.until(lambda d: len(self.entries(active=False)) == 2)
        shot(d, "earlier-history")

    def test_undo_plans_the_safety_snapshot_and_brings_the_files_back(self):
        d = self.driver
        # The rewind's result holds the undo: rewind again from the page to reach it.
        self.click(f"#tree .entry[data-entry='{self.ids['u1']}'] button.rewind")
        self.wait.until(lambda d: self.title().startswith("Plan: rewind"))
        self.click("#plan-confirm")
        self.click("#undo")
        self.wait.until(lambda d: self.title().startswith("Plan: restore snapshot"))
        self.click("#plan-confirm")
        self.wait.until(lambda d: d.find_elements(By.ID, "result"))
        # Back to the files after the first turn, as before this second rewind.
        assert (WS / "logo.png").exists() and "hello, world" in (WS / "app.py").read_text()
        self.click("#plan-cancel")

    def test_a_stale_plan_is_refused_with_conflict_and_nothing_changes(self):
        status, plan = http(self.base + "/v1/plans", method="POST", headers=self.auth(),
                            body={"op": "restore", "snapshot": self.ids["cp2"]})
        assert status == 200, plan
        (WS / "app.py").write_text("changed after the plan was shown\n")
        status, err = http(self.base + "/v1/plans/apply", method="POST", headers=self.auth(),
                           body={"request": plan["request"], "digest": plan["digest"]})
        assert status == 409 and err["error"]["kind"] == "CONFLICT", (status, err)
        assert "CONFLICT" in err["error"]["meaning"]
        assert (WS / "app.py").read_text() == "changed after the plan was shown\n"
        status, err = http(self.base + "/v1/plans/apply", method="POST", headers=self.auth(),
                           body={"request": plan["request"]})
        assert status in (400, 422), (status, err)

    def test_api_calls_without_the_token_or_from_a_foreign_origin_or_host_are_refused(self):
        ok, _ = http(self.base + "/v1/threads", headers=self.auth())
        assert ok == 200
        s, e = http(self.base + "/v1/threads")
        assert s == 401 and e["error"]["kind"] == "DENIED", (s, e)
        s, e = http(self.base + "/v1/threads", headers={"Authorization": "Bearer " + "0" * 32})
        assert s == 401, s
        s, e = http(self.base + "/v1/threads", headers=self.auth({"Origin": "http://evil.example"}))
        assert s == 403 and "origin" in e["error"]["message"], (s, e)
        s, e = http(self.base + "/v1/threads", headers=self.auth({"Host": f"evil.example:{self.port}"}))
        assert s == 403 and "host" in e["error"]["message"], (s, e)
        s, e = http(self.base + "/v1/plans", method="POST", body={"op": "restore", "snapshot": self.ids["cp1"]},
                    headers=self.auth({"Origin": "http://attacker.test"}))
        assert s == 403, s
        # The same from inside a page of another origin: the browser's own fetch is refused.
        d = self.driver
        d.get("data:text/html,<p>elsewhere</p>")
        got = d.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"fetch('{self.base}/v1/threads', {{headers: {{Authorization: 'Bearer {self.token}'}}}})"
            ".then(r => done('status ' + r.status)).catch(e => done('failed ' + e));")
        assert got != "status 200", got
        d.get(self.base + "/?token=" + self.token)
        self.wait.until(lambda d: len(self.entries()) >= 1)

    def test_another_process_s_append_appears_within_a_second(self):
        d = self.driver
        self.wait.until(lambda d: d.find_element(By.ID, "live").text == "live")
        before = len(self.entries())
        append("note", "written by another process")
        t0 = time.monotonic()
        self.wait.until(lambda d: len(self.entries()) == before + 1)
        took = time.monotonic() - t0
        print(f"    live update shown {took * 1000:.0f} ms after the other process's append returned")
        assert took < 1.0, took
        self.wait.until(lambda d: "written by another process" in d.find_element(By.ID, "tree").text)

    def test_a_rewind_over_a_hand_edit_is_refused_until_the_drift_choice_says_overwrite(self):
        d = self.driver
        # Two more turns, each checkpointed; then someone edits app.py by hand. A rewind to
        # before the third turn restores the files its checkpoint holds, and would overwrite
        # that edit (the newest checkpoint, the files being left, does not have it): refused
        # by default, as `cairn rewind --files` does.
        before = len(self.entries())
        (WS / "app.py").write_text("before the third turn\n")
        mark = append("note", "before the third turn")["entry"]["id"]
        append("user", "a third turn")
        (WS / "app.py").write_text("the third turn's edit\n")
        append("user", "a fourth turn")
        self.wait.until(lambda d: len(self.entries()) == before + 3)
        (WS / "app.py").write_text("edited by hand\n")
        self.click(f"#tree .entry[data-entry='{mark}'] button.rewind")
        self.wait.until(lambda d: self.title() == "Refused: rewind")
        refusal = d.find_element(By.CSS_SELECTOR, "#plan .error")
        assert refusal.get_attribute("data-kind") == "CONFLICT", refusal.text
        assert "app.py" in refusal.text, refusal.text
        assert (WS / "app.py").read_text() == "edited by hand\n"
        # The choice is on the page: overwrite plans again, naming the edited file as drift.
        Select(self.wait.until(lambda d: d.find_element(By.ID, "plan-drift"))).select_by_value("overwrite")
        self.wait.until(lambda d: self.title().startswith("Plan: rewind thread demo"))
        self.wait.until(lambda d: "Edited by someone else since (drift) (1)" in d.find_element(By.ID, "plan").text)
        assert "app.py" in d.find_element(By.CSS_SELECTOR, "#plan .drifted").text
        shot(d, "drift")
        self.click("#plan-confirm")
        self.wait.until(lambda d: d.find_elements(By.ID, "result"))
        assert (WS / "app.py").read_text() == "before the third turn\n"
        self.click("#plan-cancel")

    def test_a_fork_is_planned_confirmed_and_linked_from_its_entry(self):
        d = self.driver
        self.click(f"#tree .entry[data-entry='{self.ids['u1']}'] button.fork-btn")
        self.wait.until(lambda d: self.title().startswith("Plan: fork thread demo"))
        # Into the directory that holds the workspace, with files: DENIED, shown as what it means.
        d.find_element(By.ID, "plan-into").send_keys(str(TMP))
        self.click("#plan-fork-files")
        self.wait.until(lambda d: self.title() == "Refused: fork")
        refusal = d.find_element(By.CSS_SELECTOR, "#plan .error")
        assert refusal.get_attribute("data-kind") == "DENIED", refusal.text
        assert "would lose data" in refusal.text and "Nothing was changed" in refusal.text, refusal.text
        assert not d.find_element(By.ID, "plan-confirm").is_displayed()
        shot(d, "refused")
        d.find_element(By.ID, "plan-into").clear()
        self.click("#plan-fork-files")
        self.wait.until(lambda d: self.title().startswith("Plan: fork thread demo"))
        self.click("#plan-confirm")
        self.wait.until(lambda d: d.find_elements(By.ID, "result"))
        self.click("#plan-cancel")
        fork = self.wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#tree a[data-fork]").get_attribute("data-fork"))
        self.click(f"#tree a[data-fork='{fork}']")
        self.wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#thread h3").text == f"Thread {fork}")
        self.wait.until(lambda d: "Forked from demo" in d.find_element(By.CSS_SELECTOR, "#thread .forked-from").text)
        self.wait.until(lambda d: len(self.entries(active=True)) == 1)

    def test_the_browser_the_studio_opens_gets_in_through_an_owner_only_file_once(self):
        # Issue 53: `cairn studio` starts the browser on an owner-only file holding a one-time
        # code, never on a URL with a secret (its command line is for every local user to
        # read). A fake xdg-open keeps what it was given; Chromium opens that.
        fake = TMP / "fake-bin"
        fake.mkdir()
        given = TMP / "xdg-open-args"
        (fake / "xdg-open").write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > '{given}.part' && mv '{given}.part' '{given}'\n")
        (fake / "xdg-open").chmod(0o755)
        run = TMP / "run"
        run.mkdir(mode=0o700)
        env = dict(ENV, PATH=f"{fake}:{os.environ['PATH']}", XDG_RUNTIME_DIR=str(run))
        p = subprocess.Popen([CAIRN, "-C", str(WS), "studio"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            url = p.stdout.readline().strip()
            base, token = url.split("/?")[0], url.split("token=")[1]
            deadline = time.monotonic() + 30
            while not given.exists():
                assert time.monotonic() < deadline, "xdg-open was not run within 30 s"
                time.sleep(0.05)
            args = given.read_text().splitlines()
            assert len(args) == 1 and token not in args[0] and "code=" not in args[0], args
            page = Path(args[0])
            assert page.stat().st_mode & 0o777 == 0o600, oct(page.stat().st_mode)
            code = page.read_text().split("code=")[1].split('"')[0]
            d = self.driver
            d.get(page.as_uri())
            self.wait.until(lambda d: len(self.entries()) >= 1)
            assert d.current_url.startswith(base) and "code" not in d.current_url, d.current_url
            s, e = http(base + "/api/session", method="POST", body={"code": code})
            assert s == 401 and e["error"]["kind"] == "DENIED", (s, e)
            assert not page.exists(), page
        finally:
            p.terminate()
            p.wait(timeout=10)


def main():
    story = None
    passed = failed = 0
    try:
        story = Story()
        tests = [getattr(story, n) for n in Story.__dict__ if n.startswith("test_")]
        for t in tests:
            start = time.monotonic()
            try:
                t()
                passed += 1
                print(f"ok   {t.__name__} ({time.monotonic() - start:.1f} s)")
            except Exception:
                failed += 1
                print(f"FAIL {t.__name__}")
                traceback.print_exc()
                if story is not None and SHOTS is None:
                    story.driver.save_screenshot(str(TMP / f"{t.__name__}.png"))
    finally:
        if story is not None:
            story.close()
        if os.environ.get("STUDIO_KEEP") == "1" or failed:
            print(f"(kept {TMP})")
        else:
            shutil.rmtree(TMP, ignore_errors=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
