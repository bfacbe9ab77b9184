"""Cairn Studio at scale (issue 22), run by `CAIRN_LONG=1 scripts/test-studio`: a thread of
1,000 entries whose first turn changed all of 60,000 files, timed through the API and in
headless Chromium. Prints the figures; fails when the page or a diff page takes over 5 s.
"""

import os
import shutil
import subprocess
import sys
import time

import test_studio as t
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

FILES = int(os.environ.get("STUDIO_SCALE_FILES", "60000"))
ENTRIES = int(os.environ.get("STUDIO_SCALE_ENTRIES", "1000"))
LIMIT_S = 5.0


def write_files(version):
    for i in range(FILES):
        d = t.WS / f"d{i // 100:03d}"
        d.mkdir(exist_ok=True)
        (d / f"f{i % 100:02d}.txt").write_text(f"file {i} version {version}\n")


def timed(what, f):
    start = time.monotonic()
    out = f()
    took = time.monotonic() - start
    print(f"    {what}: {took * 1000:.0f} ms")
    assert took < LIMIT_S, f"{what} took {took:.1f} s"
    return out


def main():
    t.WS.mkdir(parents=True)
    write_files(1)
    t.cairn("thread", "new", "--id", "demo")
    cp1 = t.append("user", "change every file")["checkpoint"]["snapshot_id"]
    write_files(2)
    t.append("user", "and now talk")
    # The rest of the entries in one process: `thread append` per entry would cost a process each.
    notes = t.TMP / "notes.sh"
    notes.write_text("".join(f"{t.CAIRN} -C {t.WS} thread append demo --kind note --text 'note {i}' >/dev/null\n"
                             for i in range(ENTRIES - 2)))
    subprocess.run(["bash", str(notes)], env=t.ENV, check=True)
    proc, url = t.start_studio()
    base, token = url.split("/?")[0], url.split("token=")[1]
    auth = {"Authorization": f"Bearer {token}"}
    try:
        _, page = timed("first page of the thread (500 entries)", lambda: t.http(base + "/v1/threads/demo", headers=auth))
        assert page["total"] == ENTRIES and len(page["entries"]) == min(500, ENTRIES), page["total"]
        q = f"/v1/diff?from={cp1}&to=live"
        _, diff = timed(f"first page of a diff of {FILES} changed files (computed)", lambda: t.http(base + q, headers=auth))
        assert diff["total"] == FILES and len(diff["changes"]) == min(1000, FILES), diff["total"]
        timed("a later page of it (kept)", lambda: t.http(base + q + "&offset=30000", headers=auth))
        path_hex = diff["changes"][0]["path_hex"]
        _, p = timed("one file's patch", lambda: t.http(base + q.replace("/v1/diff", "/v1/patch") + "&path_hex=" + path_hex, headers=auth))
        assert "version 2" in p["patch"], p
        d = t.browser()
        try:
            start = time.monotonic()
            d.get(url)
            WebDriverWait(d, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#tree .entry")) == ENTRIES)
            took = time.monotonic() - start
            print(f"    the page with its {ENTRIES} entries rendered: {took * 1000:.0f} ms")
            assert took < LIMIT_S, took
        finally:
            d.quit()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(t.TMP, ignore_errors=True)
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
