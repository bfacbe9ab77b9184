/* Derived from include/cairn.h by bindings/python/tools/gen_cdef.py. Do not edit:
   run `python3 bindings/python/tools/gen_cdef.py` after the header changes. */

#define CAIRN_VERSION_MAJOR 0
#define CAIRN_VERSION_MINOR 1
#define CAIRN_VERSION_PATCH 0
#define CAIRN_ABI_VERSION 1
enum cairn_status
 {
  CAIRN_OK = 0,
  CAIRN_ERR_INVALID_ARGUMENT = 1,
  CAIRN_ERR_NOT_FOUND = 2,
  CAIRN_ERR_VALIDATION = 3,
  CAIRN_ERR_BUSY = 4,
  CAIRN_ERR_WORKSPACE_BUSY = 5,
  CAIRN_ERR_THREAD_BUSY = 6,
  CAIRN_ERR_DENIED = 7,
  CAIRN_ERR_IO = 8,
  CAIRN_ERR_CORRUPT = 9,
  CAIRN_ERR_CONFLICT = 10,
  CAIRN_ERR_CANCELLED = 11,
  CAIRN_ERR_RUN_INTERRUPTED = 12,
  CAIRN_ERR_UNSUPPORTED = 13,
  CAIRN_ERR_NULL_ARGUMENT = 14,
  CAIRN_ERR_PANIC = 15,
  CAIRN_ERR_ABORTED_BY_CALLBACK = 16,
};
typedef uint32_t cairn_status;
typedef struct cairn_buf cairn_buf;
typedef struct cairn_cancel cairn_cancel;
typedef struct cairn_error cairn_error;
typedef struct cairn_hold cairn_hold;
typedef struct cairn_run cairn_run;
typedef struct cairn_threads cairn_threads;
typedef struct cairn_workspace cairn_workspace;
typedef struct cairn_bytes {
  const uint8_t *data;
  size_t len;
} cairn_bytes;
typedef struct cairn_progress {
  uint64_t files;
  uint64_t dirs;
  uint64_t hashed;
  uint64_t hashed_bytes;
} cairn_progress;
typedef int32_t (*cairn_progress_cb)(void *userdata, const struct cairn_progress *progress);
cairn_status cairn_error_status(const struct cairn_error *err);
struct cairn_bytes cairn_error_message(const struct cairn_error *err);
struct cairn_bytes cairn_error_path(const struct cairn_error *err);
void cairn_error_free(struct cairn_error *err);
struct cairn_bytes cairn_buf_bytes(const struct cairn_buf *buf);
void cairn_buf_free(struct cairn_buf *buf);
const char *cairn_status_str(uint32_t status);
const char *cairn_status_name(uint32_t status);
const char *cairn_version(void);
uint32_t cairn_abi_version(void);
cairn_status cairn_cancel_new(struct cairn_cancel **out, struct cairn_error **err_out);
cairn_status cairn_cancel_cancel(const struct cairn_cancel *cancel);
void cairn_cancel_free(struct cairn_cancel *cancel);
cairn_status cairn_debug_panic(struct cairn_error **err_out);
cairn_status cairn_threads_open(const uint8_t *path,
                                size_t path_len,
                                const uint8_t *options_json,
                                size_t options_len,
                                const struct cairn_workspace *workspace,
                                struct cairn_threads **out,
                                struct cairn_error **err_out);
void cairn_threads_free(struct cairn_threads *t);
cairn_status cairn_threads_create(const struct cairn_threads *t,
                                  const uint8_t *options_json,
                                  size_t options_len,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_threads_list(const struct cairn_threads *t,
                                struct cairn_buf **out,
                                struct cairn_error **err_out);
cairn_status cairn_threads_log(const struct cairn_threads *t,
                               const uint8_t *thread,
                               size_t thread_len,
                               bool all,
                               struct cairn_buf **out,
                               struct cairn_error **err_out);
cairn_status cairn_threads_append(const struct cairn_threads *t,
                                  const uint8_t *thread,
                                  size_t thread_len,
                                  const uint8_t *entry_json,
                                  size_t entry_len,
                                  const struct cairn_run *run,
                                  const struct cairn_workspace *workspace,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_threads_checkpoint(const struct cairn_threads *t,
                                      const uint8_t *thread,
                                      size_t thread_len,
                                      const uint8_t *label,
                                      size_t label_len,
                                      const struct cairn_run *run,
                                      const struct cairn_workspace *workspace,
                                      struct cairn_buf **out,
                                      struct cairn_error **err_out);
cairn_status cairn_threads_list_checkpoints(const struct cairn_threads *t,
                                            const uint8_t *thread,
                                            size_t thread_len,
                                            struct cairn_buf **out,
                                            struct cairn_error **err_out);
cairn_status cairn_threads_add_memory(const struct cairn_threads *t,
                                      const uint8_t *thread,
                                      size_t thread_len,
                                      const uint8_t *memory_json,
                                      size_t memory_len,
                                      struct cairn_buf **out,
                                      struct cairn_error **err_out);
cairn_status cairn_threads_memory(const struct cairn_threads *t,
                                  const uint8_t *thread,
                                  size_t thread_len,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_threads_begin_run(const struct cairn_threads *t,
                                     const uint8_t *thread,
                                     size_t thread_len,
                                     const uint8_t *options_json,
                                     size_t options_len,
                                     const struct cairn_workspace *workspace,
                                     struct cairn_run **out,
                                     struct cairn_error **err_out);
struct cairn_bytes cairn_run_id(const struct cairn_run *run);
void cairn_run_free(struct cairn_run *run);
cairn_status cairn_threads_heartbeat(const struct cairn_threads *t,
                                     const struct cairn_run *run,
                                     struct cairn_error **err_out);
cairn_status cairn_threads_tool_start(const struct cairn_threads *t,
                                      const struct cairn_run *run,
                                      const uint8_t *name,
                                      size_t name_len,
                                      struct cairn_buf **out,
                                      struct cairn_error **err_out);
cairn_status cairn_threads_tool_finish(const struct cairn_threads *t,
                                       const uint8_t *call,
                                       size_t call_len,
                                       struct cairn_error **err_out);
cairn_status cairn_threads_end_run(const struct cairn_threads *t,
                                   const struct cairn_run *run,
                                   struct cairn_buf **out,
                                   struct cairn_error **err_out);
cairn_status cairn_threads_runs(const struct cairn_threads *t,
                                const uint8_t *thread,
                                size_t thread_len,
                                struct cairn_buf **out,
                                struct cairn_error **err_out);
cairn_status cairn_threads_rewind(const struct cairn_threads *t,
                                  const uint8_t *thread,
                                  size_t thread_len,
                                  const uint8_t *entry,
                                  size_t entry_len,
                                  const uint8_t *options_json,
                                  size_t options_len,
                                  const struct cairn_workspace *workspace,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_threads_restore_before(const struct cairn_threads *t,
                                          const uint8_t *thread,
                                          size_t thread_len,
                                          const uint8_t *entry,
                                          size_t entry_len,
                                          const uint8_t *options_json,
                                          size_t options_len,
                                          const struct cairn_workspace *workspace,
                                          struct cairn_buf **out,
                                          struct cairn_error **err_out);
cairn_status cairn_threads_fork(const struct cairn_threads *t,
                                const uint8_t *thread,
                                size_t thread_len,
                                const uint8_t *entry,
                                size_t entry_len,
                                const uint8_t *options_json,
                                size_t options_len,
                                const struct cairn_workspace *workspace,
                                const struct cairn_workspace *source,
                                struct cairn_buf **out,
                                struct cairn_error **err_out);
cairn_status cairn_threads_events(const struct cairn_threads *t,
                                  int64_t cursor,
                                  size_t limit,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_threads_enqueue(const struct cairn_threads *t,
                                   const uint8_t *thread,
                                   size_t thread_len,
                                   const uint8_t *key,
                                   size_t key_len,
                                   const uint8_t *prompt_json,
                                   size_t prompt_len,
                                   struct cairn_buf **out,
                                   struct cairn_error **err_out);
cairn_status cairn_threads_deliver(const struct cairn_threads *t,
                                   const uint8_t *thread,
                                   size_t thread_len,
                                   const uint8_t *options_json,
                                   size_t options_len,
                                   const struct cairn_run *run,
                                   const struct cairn_workspace *workspace,
                                   struct cairn_buf **out,
                                   struct cairn_error **err_out);
cairn_status cairn_threads_inbox(const struct cairn_threads *t,
                                 const uint8_t *thread,
                                 size_t thread_len,
                                 struct cairn_buf **out,
                                 struct cairn_error **err_out);
cairn_status cairn_workspace_open(const uint8_t *root,
                                  size_t root_len,
                                  const uint8_t *options_json,
                                  size_t options_len,
                                  struct cairn_workspace **out,
                                  struct cairn_error **err_out);
void cairn_workspace_free(struct cairn_workspace *ws);
cairn_status cairn_workspace_watch(const struct cairn_workspace *ws,
                                   const uint8_t *options_json,
                                   size_t options_len,
                                   struct cairn_buf **out,
                                   struct cairn_error **err_out);
cairn_status cairn_workspace_unwatch(const struct cairn_workspace *ws,
                                     struct cairn_error **err_out);
cairn_status cairn_workspace_info(const struct cairn_workspace *ws,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_workspace_snapshot(const struct cairn_workspace *ws,
                                      const uint8_t *options_json,
                                      size_t options_len,
                                      cairn_progress_cb progress,
                                      void *userdata,
                                      const struct cairn_cancel *cancel,
                                      struct cairn_buf **out,
                                      struct cairn_error **err_out);
cairn_status cairn_workspace_list(const struct cairn_workspace *ws,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_workspace_show(const struct cairn_workspace *ws,
                                  const uint8_t *name,
                                  size_t name_len,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_workspace_diff(const struct cairn_workspace *ws,
                                  const uint8_t *a,
                                  size_t a_len,
                                  const uint8_t *b,
                                  size_t b_len,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_workspace_diff_with(const struct cairn_workspace *ws,
                                       const uint8_t *a,
                                       size_t a_len,
                                       const uint8_t *b,
                                       size_t b_len,
                                       const uint8_t *options_json,
                                       size_t options_len,
                                       struct cairn_buf **out,
                                       struct cairn_error **err_out);
cairn_status cairn_workspace_delete(const struct cairn_workspace *ws,
                                    const uint8_t *name,
                                    size_t name_len,
                                    struct cairn_buf **out,
                                    struct cairn_error **err_out);
cairn_status cairn_workspace_prune(const struct cairn_workspace *ws,
                                   const uint8_t *retain_json,
                                   size_t retain_len,
                                   struct cairn_buf **out,
                                   struct cairn_error **err_out);
cairn_status cairn_workspace_gc(const struct cairn_workspace *ws,
                                const uint8_t *options_json,
                                size_t options_len,
                                struct cairn_buf **out,
                                struct cairn_error **err_out);
cairn_status cairn_workspace_trim_cache(const struct cairn_workspace *ws,
                                        uint64_t max_bytes,
                                        struct cairn_buf **out,
                                        struct cairn_error **err_out);
cairn_status cairn_workspace_verify(const struct cairn_workspace *ws,
                                    struct cairn_buf **out,
                                    struct cairn_error **err_out);
cairn_status cairn_workspace_copy(const struct cairn_workspace *ws,
                                  const uint8_t *name,
                                  size_t name_len,
                                  const struct cairn_workspace *to,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_workspace_plan(const struct cairn_workspace *ws,
                                  const uint8_t *name,
                                  size_t name_len,
                                  const uint8_t *options_json,
                                  size_t options_len,
                                  const struct cairn_cancel *cancel,
                                  struct cairn_buf **out,
                                  struct cairn_error **err_out);
cairn_status cairn_workspace_apply(const struct cairn_workspace *ws,
                                   const uint8_t *plan_json,
                                   size_t plan_len,
                                   const uint8_t *options_json,
                                   size_t options_len,
                                   const struct cairn_cancel *cancel,
                                   struct cairn_buf **out,
                                   struct cairn_error **err_out);
cairn_status cairn_workspace_restore(const struct cairn_workspace *ws,
                                     const uint8_t *name,
                                     size_t name_len,
                                     const uint8_t *options_json,
                                     size_t options_len,
                                     const struct cairn_cancel *cancel,
                                     struct cairn_buf **out,
                                     struct cairn_error **err_out);
cairn_status cairn_workspace_recover(const struct cairn_workspace *ws,
                                     struct cairn_buf **out,
                                     struct cairn_error **err_out);
cairn_status cairn_workspace_give_up(const struct cairn_workspace *ws,
                                     struct cairn_buf **out,
                                     struct cairn_error **err_out);
cairn_status cairn_workspace_hold(const struct cairn_workspace *ws,
                                  const uint8_t *what,
                                  size_t what_len,
                                  int64_t pid,
                                  struct cairn_hold **out,
                                  struct cairn_error **err_out);
void cairn_hold_free(struct cairn_hold *hold);
