/* libgshare-fn.so: the function library (fn/runtime.h) for programs that are not C++: a C ABI
 * over one FunctionRuntime per process, which a Python function loads with ctypes (the `pytorch`
 * and `python` runtimes, src/python/gshare_runtime/device.py).
 *
 * The node starts the process with its control channel and device range in the environment
 * (GSHARE_CONTROL_FD, GSHARE_DEVICE_BASE, GSHARE_DEVICE_RESERVE); gshare_fn_connect reads them,
 * says hello and waits until the node maps the first slice. Device memory from gshare_fn_allocate
 * lies at fixed addresses that stay valid across every checkpoint and restore; it may be touched
 * only inside a kernel run by gshare_fn_launch (the node may unmap it at any other time), and,
 * once gshare_fn_freeze has marked it, only read. When the node goes away the process exits.
 *
 * Threading: every function may be called from any thread once gshare_fn_connect has returned 0;
 * kernels run one at a time. Errors: -1 (or NULL) and gshare_fn_last_error(), per thread.
 */
#ifndef GSHARE_FN_C_API_H_
#define GSHARE_FN_C_API_H_

#include <stdint.h>

#define GSHARE_FN_API __attribute__((visibility("default")))

#ifdef __cplusplus
extern "C" {
#endif

/* Connects to the node (once per process; later calls return 0). */
GSHARE_FN_API int gshare_fn_connect(void);
/* The last error of the calling thread, "" when none. */
GSHARE_FN_API const char* gshare_fn_last_error(void);
/* `bytes` of device memory (256-byte aligned), for `what` (named in errors); NULL past the slice's
 * quota (the node hears of it) or before connecting. Never freed: a function's model lives as
 * long as its process. */
GSHARE_FN_API void* gshare_fn_allocate(uint64_t bytes, const char* what);
/* Marks what is allocated so far read-only (a write then faults, as a wild pointer does): an
 * instance that writes nothing above it is switched without copying its image again (fast swap).
 * 0, or -1. */
GSHARE_FN_API int gshare_fn_freeze(void);
/* Runs kernel(context) on the GPU under the node's compute grants, the device memory mapped.
 * 0, or -1 when the node is gone. */
GSHARE_FN_API int gshare_fn_launch(void (*kernel)(void* context), void* context);
/* Gives the compute engine back: at the end of each request. */
GSHARE_FN_API void gshare_fn_end_work(void);
/* The slice's quota: the most device memory the function may hold. */
GSHARE_FN_API uint64_t gshare_fn_quota_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* GSHARE_FN_C_API_H_ */
