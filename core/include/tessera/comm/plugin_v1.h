/* The communication-backend plugin ABI, version 1: plain C, so a plugin built by another compiler
 * (or written in C) loads safely. Plugin authors copy this header (NCCL's "headers management").
 *
 * A plugin is a shared library libtessera-comm-<name>.so exporting one function,
 *     const tessera_comm_plugin_v1_t* tessera_comm_plugin_v1(void);
 * The loader tries the newest entry point it knows first (tessera_comm_plugin_v1 today) and
 * checks api_version. Every function returns a tessera_status_t and never throws or exits; on
 * failure it writes a one-line message (what, where, how to fix) into *err.
 * Threading: a ctx (one rank's group) is used by one thread at a time; different ctx of one
 * process (a group and its sub-groups) may be used from different threads.
 * Ownership: buffers are the caller's and must stay valid until the request completes; requests
 * are freed with free_request; contexts with destroy. */
#ifndef TESSERA_COMM_PLUGIN_V1_H
#define TESSERA_COMM_PLUGIN_V1_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TESSERA_COMM_PLUGIN_API_V1 1

typedef enum {
  TESSERA_OK = 0,
  TESSERA_ERR_INVALID = 1,     /* the caller's fault (counts, ranks, options) -> InvalidArgument */
  TESSERA_ERR_UNSUPPORTED = 2, /* valid but not implemented by this plugin   -> Unsupported */
  TESSERA_ERR_SYSTEM = 3,      /* vendor or OS failure                        -> BackendError */
  TESSERA_ERR_REMOTE = 4,      /* another rank failed or the job was aborted  -> BackendError */
  TESSERA_ERR_INTERNAL = 5,    /* broken invariant, e.g. mismatched collectives -> InternalError */
  TESSERA_ERR_TIMEOUT = 6      /* a deadline expired                          -> TimeoutError */
} tessera_status_t;

/* Error message buffer filled by a failing call. */
typedef struct {
  char message[1024];
} tessera_error_t;

/* Element types (match tessera::core::DType's order) and reductions (tessera::comm::ReduceOp).
 * TESSERA_BF16 and TESSERA_F16 buffers hold raw 16-bit patterns (bfloat16, IEEE binary16): copies
 * move them unchanged; a plugin that reduces them accumulates in f32 where it can and rounds the
 * result once, round to nearest even (tessera/core/half.hpp), so every rank gets the same bits. */
typedef enum { TESSERA_F32 = 0, TESSERA_F64, TESSERA_BF16, TESSERA_F16, TESSERA_I32,
               TESSERA_I64 } tessera_dtype_t;
typedef enum { TESSERA_SUM = 0, TESSERA_AVG = 1, TESSERA_MAX = 2, TESSERA_MIN = 3 } tessera_reduce_op_t;

typedef struct {
  void* data;
  size_t count; /* elements */
  int dtype;    /* tessera_dtype_t */
  int space;    /* 0 host, 1 CUDA */
} tessera_buffer_t;

typedef struct {
  int kind; /* 0 send, 1 receive */
  tessera_buffer_t buf;
  int peer; /* rank in the group */
  int tag;
} tessera_p2p_op_t;

/* cuda_memory: 0 host buffers only; 1 CUDA buffers natively; 2 CUDA buffers staged through pinned
 * host memory (a loader that knows only 0/1 reads 2 as "accepts CUDA buffers", which holds). */
typedef struct {
  int cuda_memory, all_to_all, split, multi_process;
} tessera_capabilities_t;

/* The job's key-value store, provided by the host (the plugin does not open sockets for it).
 * get blocks up to timeout_ms; the value is malloc'ed and freed by the plugin with free(). */
typedef struct {
  void* self;
  tessera_status_t (*set)(void* self, const char* key, const void* value, size_t len, tessera_error_t* err);
  tessera_status_t (*get)(void* self, const char* key, int64_t timeout_ms, void** value, size_t* len,
                          tessera_error_t* err);
  tessera_status_t (*add)(void* self, const char* key, int64_t delta, int64_t* result, tessera_error_t* err);
  /* Marks the job as failed (first reason wins). */
  void (*abort)(void* self, const char* reason);
  /* Copies the abort reason into buf and returns 1 when the job was aborted, else returns 0. */
  int (*abort_reason)(void* self, char* buf, size_t len);
  /* An fd readable once the job is aborted, or -1. */
  int abort_fd;
} tessera_store_v1_t;

/* Called by the plugin for log lines: level 0 error, 1 warn, 2 info, 3 debug. */
typedef void (*tessera_log_fn)(int level, const char* message);

typedef struct {
  int rank, size;
  int64_t timeout_ms;          /* deadline of every blocking wait */
  const tessera_store_v1_t* store; /* valid until destroy of the last ctx */
  tessera_log_fn log;
} tessera_init_v1_t;

typedef struct tessera_comm_plugin_v1 {
  int api_version;   /* TESSERA_COMM_PLUGIN_API_V1 */
  const char* name;  /* "ucx" */
  const char* description;
  tessera_capabilities_t caps;
  /* Collective over the job: joins the group of init->size ranks; *ctx receives the world group. */
  tessera_status_t (*create)(const tessera_init_v1_t* init, void** ctx, tessera_error_t* err);
  /* Never fails; releases the ctx (sub-groups first, world last). */
  void (*destroy)(void* ctx);
  /* Non-blocking starts; *req receives a request to test/wait and free. */
  tessera_status_t (*all_reduce)(void* ctx, tessera_buffer_t buf, int op, void** req, tessera_error_t* err);
  tessera_status_t (*all_gather)(void* ctx, tessera_buffer_t send, tessera_buffer_t recv, void** req,
                                 tessera_error_t* err);
  tessera_status_t (*reduce_scatter)(void* ctx, tessera_buffer_t send, tessera_buffer_t recv, int op,
                                     void** req, tessera_error_t* err);
  tessera_status_t (*broadcast)(void* ctx, tessera_buffer_t buf, int root, void** req, tessera_error_t* err);
  tessera_status_t (*all_to_all)(void* ctx, tessera_buffer_t send, tessera_buffer_t recv, void** req,
                                 tessera_error_t* err);
  tessera_status_t (*batch_p2p)(void* ctx, const tessera_p2p_op_t* ops, size_t n, void** req,
                                tessera_error_t* err);
  /* Blocking. */
  tessera_status_t (*barrier)(void* ctx, tessera_error_t* err);
  /* Collective over ctx's group; *sub is NULL when ranks does not contain this rank. */
  tessera_status_t (*split)(void* ctx, const int* ranks, size_t n, void** sub, tessera_error_t* err);
  /* *done = 1 once complete (an error completes it too: then the status says why). */
  tessera_status_t (*test)(void* ctx, void* req, int* done, tessera_error_t* err);
  /* Blocks until completion or the deadline. */
  tessera_status_t (*wait)(void* ctx, void* req, tessera_error_t* err);
  void (*free_request)(void* ctx, void* req);
  int (*rank)(void* ctx);
  int (*size)(void* ctx);
} tessera_comm_plugin_v1_t;

/* The one exported symbol of a version-1 plugin. */
typedef const tessera_comm_plugin_v1_t* (*tessera_comm_plugin_v1_fn)(void);
#define TESSERA_COMM_PLUGIN_V1_SYMBOL "tessera_comm_plugin_v1"

/* Optional second symbol: says whether the backend can run in this process. Returns NULL when it
 * can, else a one-line reason owned by the plugin ("no CUDA device visible (...)"). The loader
 * registers the backend either way (create then fails with the full message) and does not call
 * the probe itself; `tessera backends` does and shows the reason. Never throws or exits; may
 * initialise the vendor runtime (so hosts call it only where no fork follows). */
typedef const char* (*tessera_comm_plugin_v1_probe_fn)(void);
#define TESSERA_COMM_PLUGIN_V1_PROBE_SYMBOL "tessera_comm_plugin_v1_probe"

/* Retired symbol: tessera_comm_plugin_v1_plans (a table of prepared batches) is no longer looked
 * up; a plugin that still exports it loads as before and the table is never called. */

/* Optional third symbol: returns 1 when a posted operation's data moves while the caller is
 * outside the plugin (on a device stream, a progress thread), 0 when it moves only inside the
 * plugin's calls (posts, test, wait). Without it the host assumes 0 (Capabilities::
 * overlaps_compute). */
typedef int (*tessera_comm_plugin_v1_overlaps_fn)(void);
#define TESSERA_COMM_PLUGIN_V1_OVERLAPS_SYMBOL "tessera_comm_plugin_v1_overlaps"

/* Optional fourth symbol: when a completed request's data moved, as the plugin observed it
 * (Work::moved): writes the start and the end in nanoseconds of CLOCK_MONOTONIC (std::
 * chrono::steady_clock) and returns 1, or returns 0 when it does not know (the request failed,
 * is not complete, or the plugin does not track it). Never blocks. Without the symbol the host
 * takes the post and the first observed completion as the bounds. */
typedef int (*tessera_comm_plugin_v1_moved_fn)(void* req, int64_t* start_ns, int64_t* end_ns);
#define TESSERA_COMM_PLUGIN_V1_MOVED_SYMBOL "tessera_comm_plugin_v1_moved"

/* Optional fifth symbol: the stream on which ctx's operations read and write CUDA buffers (a
 * cudaStream_t, as void*), or NULL when ctx has none. Ordering contract with the host:
 * - Before a call whose CUDA buffers come from a producer the host knows (the
 *   compute backend's memory of a tensor), the host makes this stream wait, on the device, for
 *   everything that producer has enqueued so far (an event recorded on its compute stream and
 *   waited on here; no host wait). The plugin must therefore read and write those buffers only
 *   in work enqueued on this stream after the call starts, or after a host wait on this stream.
 *   Without the symbol, or when it returns NULL, the host waits for the producer on the host
 *   (DeviceMemory::synchronize) before the call. Buffers whose producer the host does not know
 *   (raw pointers) are ordered by the caller.
 * - A request reports done (test, wait) only once its CUDA outputs hold their results and the
 *   plugin no longer touches its buffers; compute the host enqueues after that is ordered after
 *   the operation by the host's own order, with no event.
 * The host calls it from the thread using ctx, before each such call; it may create the stream on
 * its first call (so a process that never passes CUDA buffers never initialises CUDA) and return
 * NULL when it cannot. Never blocks, never throws. */
typedef void* (*tessera_comm_plugin_v1_stream_fn)(void* ctx);
#define TESSERA_COMM_PLUGIN_V1_STREAM_SYMBOL "tessera_comm_plugin_v1_stream"

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_COMM_PLUGIN_V1_H */
