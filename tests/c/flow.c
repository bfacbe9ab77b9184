/* The whole flow through the C ABI, every error path, a callback that aborts and a cancel from
 * another thread. Built statically against libcairn.a and run under AddressSanitizer and
 * valgrind by scripts/test-c. Exits non-zero on the first failed check. */
#define _GNU_SOURCE
#include "cairn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                          \
        }                                                                        \
    } while (0)

#define S(str) (const uint8_t *)(str), strlen(str)

static void write_file(const char *dir, const char *rel, const char *content) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    char *slash = strrchr(path, '/');
    if (slash) {
        *slash = 0;
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
        if (system(cmd) != 0) abort();
        *slash = '/';
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fputs(content, f);
    fclose(f);
}

static char *read_file(const char *dir, const char *rel) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Copies a buffer's JSON into a NUL-terminated string (caller frees) and frees the buffer. */
static char *take_json(cairn_buf *buf) {
    cairn_bytes b = cairn_buf_bytes(buf);
    char *s = malloc(b.len + 1);
    memcpy(s, b.data, b.len);
    s[b.len] = 0;
    cairn_buf_free(buf);
    return s;
}

/* Extracts the string value of "key" in a flat JSON document (good enough for ids). */
static void json_str(const char *json, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(json, pat);
    out[0] = 0;
    if (!p) return;
    p += strlen(pat);
    size_t i = 0;
    while (*p && *p != '"' && i + 1 < cap) out[i++] = *p++;
    out[i] = 0;
}

/* Checks a status and frees the error it left in *errp (read after the call has returned). */
static cairn_status expect_error(cairn_status got, cairn_status want, cairn_error **errp) {
    cairn_error *err = *errp;
    *errp = NULL;
    CHECK(got == want);
    if (got != want) {
        fprintf(stderr, "  wanted %s, got %s\n", cairn_status_name(want), cairn_status_name(got));
    }
    if (err) {
        CHECK(cairn_error_status(err) == got);
        cairn_bytes m = cairn_error_message(err);
        CHECK(m.len > 0);
        cairn_error_free(err);
    }
    return got;
}

static int progress_calls = 0;
static int32_t abort_at_once(void *userdata, const cairn_progress *p) {
    (void)p;
    CHECK(userdata == (void *)&progress_calls);
    progress_calls++;
    return 1;
}
static int32_t count_progress(void *userdata, const cairn_progress *p) {
    (void)p;
    (*(int *)userdata)++;
    return 0;
}

static void *cancel_soon(void *arg) {
    usleep(2000);
    cairn_cancel_cancel((const cairn_cancel *)arg);
    return NULL;
}

int main(void) {
    char tmpl[] = "/tmp/cairn-c-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL);
    char root[4096], store[4096], other_root[4096];
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(store, sizeof store, "%s/store", dir);
    snprintf(other_root, sizeof other_root, "%s/other", dir);
    mkdir(root, 0755);
    mkdir(other_root, 0755);

    /* Version and ABI. */
    CHECK(cairn_abi_version() == CAIRN_ABI_VERSION);
    CHECK(strcmp(cairn_version(), CAIRN_VERSION_STRING) == 0);
    CHECK(strcmp(cairn_status_name(CAIRN_ERR_NOT_FOUND), "NOT_FOUND") == 0);
    CHECK(strcmp(cairn_status_str(CAIRN_OK), "ok") == 0);

    /* Open. */
    char opts[4200];
    snprintf(opts, sizeof opts, "{\"store\":\"%s\"}", store);
    cairn_workspace *ws = NULL;
    cairn_error *err = NULL;
    CHECK(cairn_workspace_open(S(root), S(opts), &ws, &err) == CAIRN_OK);
    CHECK(ws != NULL);

    /* Files with a non-UTF-8 name. */
    write_file(root, "src/main.c", "int main(void) { return 0; }\n");
    write_file(root, "README", "hello\n");
    write_file(root, "caf\xe9.txt", "latin-1 name\n");

    /* Snapshot with a progress callback that lets it run. */
    int calls = 0;
    cairn_buf *buf = NULL;
    CHECK(cairn_workspace_snapshot(ws, S("{\"label\":\"first\"}"), count_progress, &calls, NULL, &buf, &err) == CAIRN_OK);
    char *snap_json = take_json(buf);
    char snap_id[80];
    json_str(snap_json, "id", snap_id, sizeof snap_id);
    CHECK(strlen(snap_id) == 64);
    CHECK(strstr(snap_json, "\"files\":3") != NULL);
    CHECK(calls >= 1);
    free(snap_json);

    /* Change, diff against the live workspace, plan (dry run), apply. */
    write_file(root, "src/main.c", "int main(void) { return 1; }\n");
    write_file(root, "new.txt", "made later\n");
    CHECK(cairn_workspace_diff(ws, S(snap_id), NULL, 0, &buf, &err) == CAIRN_OK);
    char *diff = take_json(buf);
    CHECK(strstr(diff, "\"path\":\"src/main.c\"") != NULL);
    CHECK(strstr(diff, "\"kind\":\"added\"") != NULL);
    free(diff);
    /* The same with attribution: each change names the interval "first" opened. */
    CHECK(cairn_workspace_diff_with(ws, S(snap_id), NULL, 0, S("{\"attribute\":true}"), &buf, &err) == CAIRN_OK);
    diff = take_json(buf);
    CHECK(strstr(diff, "\"attribution\":[{\"from\":\"") != NULL);
    CHECK(strstr(diff, "\"label\":\"first\"") != NULL);
    free(diff);
    CHECK(cairn_workspace_diff_with(ws, S(snap_id), NULL, 0, S("{\"atribute\":true}"), &buf, &err) == CAIRN_ERR_INVALID_ARGUMENT);
    cairn_error_free(err);
    err = NULL;

    CHECK(cairn_workspace_plan(ws, S("first"), NULL, 0, NULL, &buf, &err) == CAIRN_OK);
    cairn_bytes pb = cairn_buf_bytes(buf);
    CHECK(strstr(read_file(root, "src/main.c"), "return 1") != NULL);
    cairn_buf *report = NULL;
    CHECK(cairn_workspace_apply(ws, pb.data, pb.len, NULL, 0, NULL, &report, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    char *rep = take_json(report);
    CHECK(strstr(rep, "\"deleted\":[\"new.txt\"]") != NULL);
    char safety[80];
    json_str(rep, "safety_snapshot_id", safety, sizeof safety);
    CHECK(strlen(safety) == 64);
    free(rep);
    CHECK(strstr(read_file(root, "src/main.c"), "return 0") != NULL);
    CHECK(read_file(root, "new.txt") == NULL);
    CHECK(read_file(root, "caf\xe9.txt") != NULL);

    /* Undo through the safety snapshot. */
    CHECK(cairn_workspace_restore(ws, S(safety), NULL, 0, NULL, &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(strstr(read_file(root, "new.txt"), "made later") != NULL);

    /* List, show, verify, copy, gc, prune. */
    CHECK(cairn_workspace_list(ws, &buf, &err) == CAIRN_OK);
    char *list = take_json(buf);
    CHECK(strstr(list, snap_id) != NULL);
    free(list);
    CHECK(cairn_workspace_show(ws, S("first"), &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(cairn_workspace_verify(ws, &buf, &err) == CAIRN_OK);
    char *ver = take_json(buf);
    CHECK(strstr(ver, "\"ok\":true") != NULL);
    free(ver);
    cairn_workspace *other = NULL;
    CHECK(cairn_workspace_open(S(other_root), NULL, 0, &other, &err) == CAIRN_OK);
    CHECK(cairn_workspace_copy(ws, S(snap_id), other, &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(cairn_workspace_restore(other, S(snap_id), NULL, 0, NULL, &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(strstr(read_file(other_root, "src/main.c"), "return 0") != NULL);
    cairn_workspace_free(other);

    /* A remote store (file://): one workspace snapshots into it through its cache, another with
     * its own cache restores from it; gc runs the remote's collector; trim_cache empties a cache. */
    {
        char remote_dir[4200], cache_a[4200], cache_b[4200], remote_root[4200], ropts[13000];
        snprintf(remote_dir, sizeof remote_dir, "%s/remote", dir);
        snprintf(cache_a, sizeof cache_a, "%s/cache-a", dir);
        snprintf(cache_b, sizeof cache_b, "%s/cache-b", dir);
        snprintf(remote_root, sizeof remote_root, "%s/remote-b", dir);
        mkdir(remote_dir, 0755);
        mkdir(remote_root, 0755);
        cairn_workspace *ra = NULL, *rb = NULL;
        snprintf(ropts, sizeof ropts, "{\"store\":\"%s\",\"remote\":\"file://%s\"}", cache_a, remote_dir);
        CHECK(cairn_workspace_open(S(root), S(ropts), &ra, &err) == CAIRN_OK);
        CHECK(cairn_workspace_snapshot(ra, S("{\"label\":\"remote\"}"), NULL, NULL, NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        snprintf(ropts, sizeof ropts, "{\"store\":\"%s\",\"remote\":\"file://%s\"}", cache_b, remote_dir);
        CHECK(cairn_workspace_open(S(remote_root), S(ropts), &rb, &err) == CAIRN_OK);
        CHECK(cairn_workspace_info(rb, &buf, &err) == CAIRN_OK);
        char *rinfo = take_json(buf);
        CHECK(strstr(rinfo, "\"remote\":\"file://") != NULL);
        free(rinfo);
        CHECK(cairn_workspace_restore(rb, S("remote"), NULL, 0, NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        const char *files[] = {"src/main.c", "README", "new.txt"};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            const char *live = read_file(root, files[i]);
            char *want = live ? strdup(live) : NULL;
            const char *got = read_file(remote_root, files[i]);
            CHECK((want == NULL) == (got == NULL) && (want == NULL || strcmp(want, got) == 0));
            free(want);
        }
        CHECK(cairn_workspace_gc(rb, S("{\"dry_run\":true}"), &buf, &err) == CAIRN_OK);
        char *rgc = take_json(buf);
        CHECK(strstr(rgc, "\"remote\":{") != NULL);
        free(rgc);
        CHECK(cairn_workspace_trim_cache(rb, 0, &buf, &err) == CAIRN_OK);
        char *trim = take_json(buf);
        CHECK(strstr(trim, "\"cached_bytes\":0") != NULL);
        free(trim);
        cairn_workspace_free(rb);
        cairn_workspace_free(ra);
        /* Without a remote: trim_cache is UNSUPPORTED, remote_options alone INVALID_ARGUMENT. */
        expect_error(cairn_workspace_trim_cache(ws, 0, &buf, &err), CAIRN_ERR_UNSUPPORTED, &err);
        snprintf(ropts, sizeof ropts, "{\"store\":\"%s\",\"remote_options\":{\"region\":\"x\"}}", cache_b);
        expect_error(cairn_workspace_open(S(remote_root), S(ropts), &rb, &err), CAIRN_ERR_INVALID_ARGUMENT, &err);
    }

    CHECK(cairn_workspace_gc(ws, S("{\"dry_run\":true}"), &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(cairn_workspace_gc(ws, S("{\"grace_ms\":0}"), &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(cairn_workspace_prune(ws, S("{\"count\":100}"), &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(cairn_workspace_info(ws, &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);
    CHECK(cairn_workspace_recover(ws, &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);

    /* Holds make a restore BUSY. */
    write_file(root, "README", "changed\n");
    cairn_hold *hold = NULL;
    CHECK(cairn_workspace_hold(ws, S("make test"), -1, &hold, &err) == CAIRN_OK);
    expect_error(cairn_workspace_restore(ws, S(snap_id), NULL, 0, NULL, &buf, &err), CAIRN_ERR_BUSY, &err);
    cairn_hold_free(hold);
    CHECK(cairn_workspace_restore(ws, S(snap_id), NULL, 0, NULL, &buf, &err) == CAIRN_OK);
    cairn_buf_free(buf);

    /* Error paths. */
    buf = NULL;
    expect_error(cairn_workspace_list(NULL, &buf, &err), CAIRN_ERR_NULL_ARGUMENT, &err);
    CHECK(buf == NULL); /* outputs are written only on success */
    expect_error(cairn_workspace_list(ws, NULL, &err), CAIRN_ERR_NULL_ARGUMENT, &err);
    expect_error(cairn_workspace_show(ws, S("ffffffff"), &buf, &err), CAIRN_ERR_NOT_FOUND, &err);
    expect_error(cairn_workspace_show(ws, S("x!"), &buf, &err), CAIRN_ERR_NOT_FOUND, &err);
    expect_error(cairn_workspace_snapshot(ws, S("{\"labl\":1}"), NULL, NULL, NULL, &buf, &err), CAIRN_ERR_INVALID_ARGUMENT, &err);
    expect_error(cairn_workspace_apply(ws, S("not json"), NULL, 0, NULL, &buf, &err), CAIRN_ERR_INVALID_ARGUMENT, &err);
    char missing[4200];
    snprintf(missing, sizeof missing, "%s/does-not-exist", dir);
    cairn_workspace *none = NULL;
    expect_error(cairn_workspace_open(S(missing), NULL, 0, &none, &err), CAIRN_ERR_NOT_FOUND, &err);
    CHECK(none == NULL);
    /* An error's path names what it concerns. */
    CHECK(cairn_workspace_open(S(missing), NULL, 0, &none, &err) == CAIRN_ERR_NOT_FOUND);
    cairn_bytes ep = cairn_error_path(err);
    CHECK(ep.len > 0 && memmem(ep.data, ep.len, "does-not-exist", 14) != NULL);
    cairn_error_free(err);
    err = NULL;
    /* err_out may be NULL. */
    CHECK(cairn_workspace_show(ws, S("ffffffff"), &buf, NULL) == CAIRN_ERR_NOT_FOUND);
    /* A panic becomes CAIRN_ERR_PANIC, never an unwind into C. */
    expect_error(cairn_debug_panic(&err), CAIRN_ERR_PANIC, &err);

    /* A callback that aborts stops the snapshot and records nothing. */
    for (int i = 0; i < 200; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "bulk/f%03d.txt", i);
        write_file(root, rel, "some content that takes a moment to hash\n");
    }
    CHECK(cairn_workspace_list(ws, &buf, &err) == CAIRN_OK);
    char *before = take_json(buf);
    expect_error(cairn_workspace_snapshot(ws, NULL, 0, abort_at_once, &progress_calls, NULL, &buf, &err),
                 CAIRN_ERR_ABORTED_BY_CALLBACK, &err);
    CHECK(progress_calls >= 1);
    CHECK(cairn_workspace_list(ws, &buf, &err) == CAIRN_OK);
    char *after = take_json(buf);
    CHECK(strcmp(before, after) == 0);
    free(before);
    free(after);

    /* A cancel from another thread. */
    cairn_cancel *cancel = NULL;
    CHECK(cairn_cancel_new(&cancel, &err) == CAIRN_OK);
    cairn_cancel_cancel(cancel); /* cancelled before: the call stops at once */
    expect_error(cairn_workspace_snapshot(ws, S("{\"use_stat_cache\":false}"), NULL, NULL, cancel, &buf, &err),
                 CAIRN_ERR_CANCELLED, &err);
    cairn_cancel_free(cancel);
    CHECK(cairn_cancel_new(&cancel, &err) == CAIRN_OK);
    for (int i = 0; i < 2000; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "many/d%02d/f%04d.txt", i % 40, i);
        write_file(root, rel, "content to hash, content to hash, content to hash\n");
    }
    pthread_t t;
    pthread_create(&t, NULL, cancel_soon, cancel);
    cairn_status st = cairn_workspace_snapshot(ws, S("{\"use_stat_cache\":false}"), NULL, NULL, cancel, &buf, &err);
    pthread_join(t, NULL);
    /* Either it finished before the cancel landed, or it was cancelled. */
    CHECK(st == CAIRN_OK || st == CAIRN_ERR_CANCELLED);
    if (st == CAIRN_OK) cairn_buf_free(buf);
    if (err) cairn_error_free(err);
    err = NULL;
    cairn_cancel_free(cancel);

    /* Threads: checkpoints bound to messages, a run with a tool call, rewind, fork, events. */
    {
        cairn_threads *th = NULL;
        CHECK(cairn_threads_open(NULL, 0, S("{\"checkpoints\":{\"enabled\":true}}"), ws, &th, &err) == CAIRN_OK);
        CHECK(cairn_threads_create(th, S("{\"id\":\"chat\"}"), &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        expect_error(cairn_threads_create(th, S("{\"id\":\"chat\"}"), &buf, &err), CAIRN_ERR_VALIDATION, &err);
        cairn_run *run = NULL;
        CHECK(cairn_threads_begin_run(th, S("chat"), NULL, 0, NULL, &run, &err) == CAIRN_OK);
        CHECK(cairn_run_id(run).len > 0);
        write_file(root, "notes.txt", "turn one\n");
        CHECK(cairn_threads_append(th, S("chat"), S("{\"kind\":\"user\",\"text\":\"first\"}"), run, NULL, &buf, &err) == CAIRN_OK);
        char *a1 = take_json(buf);
        CHECK(strstr(a1, "\"checkpoint\":{") != NULL);
        free(a1);
        cairn_buf *call = NULL;
        CHECK(cairn_threads_tool_start(th, run, S("write_file"), &call, &err) == CAIRN_OK);
        write_file(root, "notes.txt", "edited by the tool\n");
        cairn_bytes cb = cairn_buf_bytes(call);
        CHECK(cairn_threads_tool_finish(th, cb.data, cb.len, &err) == CAIRN_OK);
        cairn_buf_free(call);
        CHECK(cairn_threads_append(th, S("chat"), S("{\"kind\":\"assistant\",\"text\":\"done\"}"), run, NULL, &buf, &err) == CAIRN_OK);
        char *a2 = take_json(buf);
        char *entry_obj = strstr(a2, "\"entry\":{");
        char assistant_id[128];
        json_str(entry_obj ? entry_obj : a2, "id", assistant_id, sizeof assistant_id);
        free(a2);
        CHECK(strlen(assistant_id) > 0);
        CHECK(cairn_threads_append(th, S("chat"), S("{\"kind\":\"user\",\"text\":\"second\",\"key\":\"k2\"}"), run, NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(cairn_threads_append(th, S("chat"), S("{\"kind\":\"user\",\"text\":\"second\",\"key\":\"k2\"}"), run, NULL, &buf, &err) == CAIRN_OK);
        char *rep2 = take_json(buf);
        CHECK(strstr(rep2, "\"repeated\":true") != NULL);
        free(rep2);
        write_file(root, "notes.txt", "turn two\n");
        /* A going run of the thread refuses the rewind. */
        expect_error(cairn_threads_rewind(th, S("chat"), S(assistant_id), S("{\"files\":true}"), NULL, &buf, &err),
                     CAIRN_ERR_THREAD_BUSY, &err);
        CHECK(cairn_threads_end_run(th, run, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        cairn_run_free(run);
        CHECK(cairn_threads_rewind(th, S("chat"), S(assistant_id), S("{\"files\":true,\"dry_run\":true}"), NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(strstr(read_file(root, "notes.txt"), "turn two") != NULL);
        CHECK(cairn_threads_rewind(th, S("chat"), S(assistant_id), S("{\"files\":true}"), NULL, &buf, &err) == CAIRN_OK);
        char *rw = take_json(buf);
        CHECK(strstr(rw, "\"exact\":true") != NULL);
        /* The rewind's "Before rewind" checkpoint, passed where an entry goes, undoes it
           (files and conversation); rewinding again puts it back for what follows. */
        char before_cp[128];
        json_str(rw, "before_rewind_checkpoint_id", before_cp, sizeof before_cp);
        free(rw);
        CHECK(strncmp(before_cp, "cp_", 3) == 0);
        CHECK(strstr(read_file(root, "notes.txt"), "edited by the tool") != NULL);
        CHECK(cairn_threads_rewind(th, S("chat"), S(before_cp), S("{\"files\":true}"), NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(strstr(read_file(root, "notes.txt"), "turn two") != NULL);
        CHECK(cairn_threads_log(th, S("chat"), false, &buf, &err) == CAIRN_OK);
        char *undone = take_json(buf);
        CHECK(strstr(undone, "\"payload\":\"second\"") != NULL);
        free(undone);
        CHECK(cairn_threads_rewind(th, S("chat"), S(assistant_id), S("{\"files\":true}"), NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(strstr(read_file(root, "notes.txt"), "edited by the tool") != NULL);
        CHECK(cairn_threads_log(th, S("chat"), false, &buf, &err) == CAIRN_OK);
        char *log = take_json(buf);
        CHECK(strstr(log, "\"payload\":\"second\"") == NULL);
        free(log);
        CHECK(cairn_threads_log(th, S("chat"), true, &buf, &err) == CAIRN_OK);
        log = take_json(buf);
        CHECK(strstr(log, "\"payload\":\"second\"") != NULL);
        free(log);
        CHECK(cairn_threads_list_checkpoints(th, S("chat"), &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(cairn_threads_add_memory(th, S("chat"), S("{\"kind\":\"item\",\"text\":\"likes tests\"}"), &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(cairn_threads_memory(th, S("chat"), &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(cairn_threads_runs(th, S("chat"), &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        /* Fork with files into another workspace. */
        char fork_root[4200];
        snprintf(fork_root, sizeof fork_root, "%s/fork", dir);
        mkdir(fork_root, 0755);
        cairn_workspace *fws = NULL;
        CHECK(cairn_workspace_open(S(fork_root), NULL, 0, &fws, &err) == CAIRN_OK);
        CHECK(cairn_threads_fork(th, S("chat"), S(assistant_id), S("{\"files\":true,\"new_thread_id\":\"chat-fork\"}"), fws, NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(strstr(read_file(fork_root, "notes.txt"), "edited by the tool") != NULL);
        cairn_workspace_free(fws);

        /* A fork or restore never destroys what it is pointed at (issue 27). The directory
         * holding the source workspace, sharing its store: the fork and a plain restore of
         * a snapshot taken of the root inside it are DENIED, and nothing is deleted. */
        cairn_workspace *pws = NULL;
        CHECK(cairn_workspace_open(S(dir), S(opts), &pws, &err) == CAIRN_OK);
        expect_error(cairn_threads_fork(th, S("chat"), S(assistant_id), S("{\"files\":true}"), pws, NULL, &buf, &err),
                     CAIRN_ERR_DENIED, &err);
        expect_error(cairn_workspace_restore(pws, S(snap_id), NULL, 0, NULL, &buf, &err), CAIRN_ERR_DENIED, &err);
        expect_error(cairn_workspace_plan(pws, S(snap_id), NULL, 0, NULL, &buf, &err), CAIRN_ERR_DENIED, &err);
        cairn_workspace_free(pws);
        CHECK(read_file(root, "notes.txt") != NULL);
        CHECK(read_file(fork_root, "notes.txt") != NULL);
        /* A directory inside the store cannot be a workspace at all. */
        char in_store[4200];
        snprintf(in_store, sizeof in_store, "%s/objects", store);
        cairn_workspace *sws = NULL;
        expect_error(cairn_workspace_open(S(in_store), NULL, 0, &sws, &err), CAIRN_ERR_DENIED, &err);
        CHECK(sws == NULL);
        /* An unrelated directory that holds files: DENIED unless "replace" says so. */
        char busy_root[4200];
        snprintf(busy_root, sizeof busy_root, "%s/experiment", dir);
        write_file(busy_root, "keep.txt", "someone's work\n");
        cairn_workspace *ews = NULL;
        CHECK(cairn_workspace_open(S(busy_root), NULL, 0, &ews, &err) == CAIRN_OK);
        expect_error(cairn_threads_fork(th, S("chat"), S(assistant_id), S("{\"files\":true,\"dry_run\":true}"), ews, NULL, &buf, &err),
                     CAIRN_ERR_DENIED, &err);
        expect_error(cairn_threads_fork(th, S("chat"), S(assistant_id), S("{\"files\":true}"), ews, NULL, &buf, &err),
                     CAIRN_ERR_DENIED, &err);
        CHECK(read_file(busy_root, "keep.txt") != NULL);
        CHECK(cairn_threads_fork(th, S("chat"), S(assistant_id), S("{\"files\":true,\"replace\":true}"), ews, NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(read_file(busy_root, "keep.txt") == NULL);
        CHECK(read_file(busy_root, "notes.txt") != NULL);
        cairn_workspace_free(ews);

        CHECK(cairn_threads_events(th, 0, 0, &buf, &err) == CAIRN_OK);
        char *ev = take_json(buf);
        CHECK(strstr(ev, "fork") != NULL);
        free(ev);
        expect_error(cairn_threads_rewind(th, S("chat"), S("no-such-entry"), NULL, 0, NULL, &buf, &err),
                     CAIRN_ERR_NOT_FOUND, &err);
        expect_error(cairn_threads_append(th, S("chat"), S("{\"kind\":\"nonsense\"}"), NULL, NULL, &buf, &err),
                     CAIRN_ERR_INVALID_ARGUMENT, &err);

        /* The inbox (issue 59): a prompt queued while a run is under way waits; at the boundary
           it is delivered with its checkpoint; a rewind cancels the one still queued, and its
           old key answers with the cancelled admission. */
        CHECK(cairn_threads_create(th, S("{\"id\":\"inbox\"}"), &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(cairn_threads_append(th, S("inbox"), S("{\"kind\":\"user\",\"text\":\"start\"}"), NULL, NULL, &buf, &err) == CAIRN_OK);
        char *start = take_json(buf);
        char *start_obj = strstr(start, "\"entry\":{");
        char start_id[128];
        json_str(start_obj ? start_obj : start, "id", start_id, sizeof start_id);
        free(start);
        cairn_run *irun = NULL;
        CHECK(cairn_threads_begin_run(th, S("inbox"), NULL, 0, NULL, &irun, &err) == CAIRN_OK);
        CHECK(cairn_threads_enqueue(th, S("inbox"), S("q1"), S("{\"text\":\"queued one\"}"), &buf, &err) == CAIRN_OK);
        char *q = take_json(buf);
        CHECK(strstr(q, "\"state\":\"queued\"") != NULL);
        CHECK(strstr(q, "\"payload\":\"queued one\"") != NULL);
        free(q);
        CHECK(cairn_threads_deliver(th, S("inbox"), NULL, 0, NULL, NULL, &buf, &err) == CAIRN_OK);
        char *waiting = take_json(buf);
        CHECK(strstr(waiting, "\"delivered\":null") != NULL);
        CHECK(strstr(waiting, "\"waiting\":\"run ") != NULL);
        free(waiting);
        CHECK(cairn_threads_end_run(th, irun, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        cairn_run_free(irun);
        write_file(root, "notes.txt", "at delivery\n");
        CHECK(cairn_threads_deliver(th, S("inbox"), S("{}"), NULL, NULL, &buf, &err) == CAIRN_OK);
        char *delivered = take_json(buf);
        CHECK(strstr(delivered, "\"state\":\"delivered\"") != NULL);
        CHECK(strstr(delivered, "\"checkpoint\":{") != NULL);
        CHECK(strstr(delivered, "\"waiting\":null") != NULL);
        free(delivered);
        CHECK(cairn_threads_enqueue(th, S("inbox"), S("q2"), S("{\"text\":\"queued two\"}"), &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(cairn_threads_rewind(th, S("inbox"), S(start_id), NULL, 0, NULL, &buf, &err) == CAIRN_OK);
        cairn_buf_free(buf);
        CHECK(cairn_threads_enqueue(th, S("inbox"), S("q2"), S("{\"text\":\"queued two\"}"), &buf, &err) == CAIRN_OK);
        char *again = take_json(buf);
        CHECK(strstr(again, "\"state\":\"cancelled\"") != NULL);
        CHECK(strstr(again, "\"repeated\":true") != NULL);
        CHECK(strstr(again, "\"rewind_id\":\"rw_") != NULL);
        free(again);
        CHECK(cairn_threads_inbox(th, S("inbox"), &buf, &err) == CAIRN_OK);
        char *inbox = take_json(buf);
        CHECK(strstr(inbox, "\"key\":\"q1\"") != NULL && strstr(inbox, "\"key\":\"q2\"") != NULL);
        free(inbox);
        expect_error(cairn_threads_enqueue(th, S("inbox"), NULL, 0, S("{\"text\":\"x\"}"), &buf, &err),
                     CAIRN_ERR_INVALID_ARGUMENT, &err);
        cairn_threads_free(th);
        cairn_threads_free(NULL);
        cairn_run_free(NULL);
    }

    /* NULL is accepted by every _free. */
    cairn_workspace_free(NULL);
    cairn_buf_free(NULL);
    cairn_error_free(NULL);
    cairn_cancel_free(NULL);
    cairn_hold_free(NULL);

    cairn_workspace_free(ws);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) failures++;
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("c flow: all checks passed\n");
    return 0;
}
