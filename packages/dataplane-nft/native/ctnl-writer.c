/*
 * ctnl-writer.node: `lbd-ctnl write` inside the agent's process, for the thread that applies a peer's connections
 * (connection sync's thread on a standby). The same code as the helper (lbd-ctnl.c, included below): the same
 * request lines in, the same `R` line out, parsed by the same functions in ctnetlink.ts.
 *
 * Why: each batch through the helper is a pipe write that wakes it and an answer that wakes the agent, for every
 * message at sync's rate. On this kind of machine (a virtual one, where a wake-up across CPUs traps) that was
 * about half of a standby's sync thread and most of the helper's own time at 5 000 new connections/s
 * (docs/kernel-io.md, "A standby's injects in its own thread"). Here a batch is a sendto and a recvmmsg or two
 * on the calling thread, which waits for the kernel's acks (at most 5 s a chunk, SO_RCVTIMEO).
 *
 * The addon speaks Node-API, whose C ABI is stable across Node versions: its few functions are declared here,
 * so that it builds where Node's headers are not installed. lbd-ctnl's batch state is one per thread here
 * (THREAD_LOCAL), so threads' batches never mix and nothing is shared to lock: a worker thread that is
 * terminated mid-batch leaves nothing behind that another waits for. A thread's own batches never overlap, as
 * JavaScript calls begin, write and end in one run.
 *
 *   open(netnsPath, bytes) -> fd     a write socket in that network namespace ('' for the thread's own)
 *   begin()                          a batch starts
 *   write(fd, text)                  request lines, each ending in '\n'; sent as chunks fill
 *   end(fd) -> 'R ...'               the batch's answer (as `lbd-ctnl write` prints it, without the newline)
 *   abort()                          drops a batch that was begun and not ended (its requests may have been sent)
 *   close(fd)
 */
#define LBD_CTNL_IN_PROCESS 1
#define THREAD_LOCAL _Thread_local
#include "lbd-ctnl.c"

#include <fcntl.h>
#include <sched.h>

/* Node-API (js_native_api.h, node_api.h): the declarations this file uses. */
typedef struct napi_env__ *napi_env;
typedef struct napi_value__ *napi_value;
typedef struct napi_callback_info__ *napi_callback_info;
typedef int napi_status; /* an enum in C: 0 is napi_ok */
typedef napi_value (*napi_callback)(napi_env, napi_callback_info);
extern napi_status napi_create_function(napi_env, const char *, size_t, napi_callback, void *, napi_value *);
extern napi_status napi_set_named_property(napi_env, napi_value, const char *, napi_value);
extern napi_status napi_get_cb_info(napi_env, napi_callback_info, size_t *, napi_value *, napi_value *, void **);
extern napi_status napi_get_value_string_utf8(napi_env, napi_value, char *, size_t, size_t *);
extern napi_status napi_get_value_int32(napi_env, napi_value, int32_t *);
extern napi_status napi_create_int32(napi_env, int32_t, napi_value *);
extern napi_status napi_create_string_utf8(napi_env, const char *, size_t, napi_value *);
extern napi_status napi_get_undefined(napi_env, napi_value *);
extern napi_status napi_throw_error(napi_env, const char *, const char *);
extern napi_status napi_add_env_cleanup_hook(napi_env, void (*)(void *), void *);
#define NAPI_AUTO_LENGTH SIZE_MAX

/* This thread has begun a batch and not ended it. */
static _Thread_local bool batch_open;

static napi_value undefined(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

static napi_value fail(napi_env env, const char *what, const char *path, int err) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s%s%s: %s", what, path[0] ? " " : "", path, strerror(err));
  napi_throw_error(env, NULL, msg);
  return NULL;
}

/* The arguments: true with `want` of them in argv, or false with an error thrown. */
static bool args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != 0 || argc < want) {
    napi_throw_error(env, NULL, "ctnl-writer: too few arguments");
    return false;
  }
  return true;
}

static bool int_arg(napi_env env, napi_value v, int32_t *out) {
  if (napi_get_value_int32(env, v, out) == 0) return true;
  napi_throw_error(env, NULL, "ctnl-writer: an argument is not a number");
  return false;
}

/* A string argument, malloc'd (free it); NULL with an error thrown. */
static char *string_arg(napi_env env, napi_value v, size_t *len) {
  size_t n;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &n) != 0) {
    napi_throw_error(env, NULL, "ctnl-writer: an argument is not a string");
    return NULL;
  }
  char *s = malloc(n + 1);
  if (s == NULL) { fail(env, "ctnl-writer", "", ENOMEM); return NULL; }
  napi_get_value_string_utf8(env, v, s, n + 1, &n);
  *len = n;
  return s;
}

static napi_value js_open(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  int32_t bytes;
  size_t len;
  if (!args(env, info, 2, argv) || !int_arg(env, argv[1], &bytes)) return NULL;
  char *path = string_arg(env, argv[0], &len);
  if (path == NULL) return NULL;
  int home = -1, s;
  if (len > 0) {
    /* setns moves this thread only; it comes back before anything else runs on it. */
    home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int there = home < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
    int err = errno;
    if (there < 0 || setns(there, CLONE_NEWNET) < 0) {
      err = there < 0 ? err : errno;
      if (there >= 0) close(there);
      if (home >= 0) close(home);
      napi_value r = fail(env, "ctnl-writer: entering the network namespace", path, err);
      free(path);
      return r;
    }
    close(there);
  }
  s = write_socket(bytes);
  int err = errno;
  if (home >= 0) {
    /* A thread left in another namespace would make every later socket there: nothing safe remains to do. */
    if (setns(home, CLONE_NEWNET) < 0) { perror("ctnl-writer: back to the thread's network namespace"); abort(); }
    close(home);
  }
  napi_value r = s < 0 ? fail(env, "ctnl-writer: a ctnetlink socket in the network namespace", len > 0 ? path : "of this thread", err) : NULL;
  free(path);
  if (s < 0) return r;
  napi_create_int32(env, s, &r);
  return r;
}

static napi_value js_begin(napi_env env, napi_callback_info info) {
  (void)info;
  if (batch_open) {
    napi_throw_error(env, NULL, "ctnl-writer: begin inside a batch of this thread's (end or abort it first)");
    return NULL;
  }
  batch_open = true;
  ncodes = 0;
  first_error[0] = '\0';
  return undefined(env);
}

static bool owns_batch(napi_env env) {
  if (batch_open) return true;
  napi_throw_error(env, NULL, "ctnl-writer: no batch begun on this thread");
  return false;
}

static napi_value js_write(napi_env env, napi_callback_info info) {
  napi_value argv[2];
  int32_t fd;
  size_t len;
  if (!args(env, info, 2, argv) || !int_arg(env, argv[0], &fd) || !owns_batch(env)) return NULL;
  char *text = string_arg(env, argv[1], &len);
  if (text == NULL) return NULL;
  for (char *p = text, *stop = text + len; p < stop;) {
    char *nl = memchr(p, '\n', (size_t)(stop - p));
    size_t got = nl ? (size_t)(nl - p) : (size_t)(stop - p);
    p[got] = '\0';
    /* "." belongs to end(): here it is a request that is not one. */
    if (strcmp(p, ".") == 0) { push_code('!'); note_error(0, "bad request: ."); }
    else write_line(fd, p, got);
    p += got + 1;
  }
  free(text);
  return undefined(env);
}

static napi_value js_end(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int32_t fd;
  if (!args(env, info, 1, argv) || !int_arg(env, argv[0], &fd) || !owns_batch(env)) return NULL;
  write_line(fd, (char[]){ "." }, 1);
  char *r = batch_result();
  batch_open = false;
  napi_value out;
  napi_create_string_utf8(env, r, NAPI_AUTO_LENGTH, &out);
  free(r);
  return out;
}

static napi_value js_abort(napi_env env, napi_callback_info info) {
  (void)info;
  if (batch_open) {
    /* What was queued and not sent is dropped; what was sent is the kernel's. */
    chunk_len = 0;
    chunk_count = 0;
    ncodes = 0;
    first_error[0] = '\0';
    batch_open = false;
  }
  return undefined(env);
}

static napi_value js_close(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  int32_t fd;
  if (!args(env, info, 1, argv) || !int_arg(env, argv[0], &fd)) return NULL;
  close(fd);
  return undefined(env);
}

/*
 * The thread's batch answers (a byte per request, grown to its largest batch: 4 KiB at first, 128 KiB after one of
 * 100 000) go when its environment does: a worker thread that ended would otherwise leave them allocated, once per
 * sync thread the agent ever made. Node runs an environment's cleanup hooks on that environment's own thread, so the
 * thread-locals here are the ending thread's. Registered once per thread: Node refuses a hook added twice.
 */
static _Thread_local bool cleanup_registered;

static void free_thread_state(void *arg) {
  (void)arg;
  free(codes);
  codes = NULL;
  codes_cap = ncodes = 0;
  batch_open = false;
}

napi_value napi_register_module_v1(napi_env env, napi_value exports);
napi_value napi_register_module_v1(napi_env env, napi_value exports) {
  if (!cleanup_registered) {
    if (napi_add_env_cleanup_hook(env, free_thread_state, NULL) != 0) return NULL;
    cleanup_registered = true;
  }
  static const struct { const char *name; napi_callback fn; } fns[] = {
    { "open", js_open }, { "begin", js_begin }, { "write", js_write }, { "end", js_end }, { "abort", js_abort }, { "close", js_close },
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) != 0
        || napi_set_named_property(env, exports, fns[i].name, f) != 0) return NULL;
  }
  return exports;
}
