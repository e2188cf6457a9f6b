"""The function library (libgshare-fn.so, src/gshare/fn/c_api/gshare_fn.h) for Python functions.

A function process that a gShare node starts on an emulated GPU talks to the node over its control
channel: it says hello, gets its device memory mapped at fixed addresses, runs its device work
under the node's compute grants, and is locked, copied away and mapped again (on the same or
another GPU) between requests without knowing it. Device connects once per process; memory from
allocate() may be touched only inside launch(), which is where the node guarantees it is mapped.

    device = Device()                    # waits until the node maps the first slice
    address = device.allocate(n, "weights")
    device.launch(lambda: copy_weights_to(address))
    device.freeze()                      # the weights are read-only from here on
    device.launch(run_the_model)         # per request
    device.end_work()                    # at the end of each request

Threading: launch() may be called from any thread; kernels run one at a time.
"""

import ctypes
import os

_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_LIBRARY_NAME = "libgshare-fn.so"


def default_library():
    """libgshare-fn.so beside the gshare binary: two folders up from this package (python/
    gshare_runtime/ under the program folder), unless GSHARE_FN_LIBRARY names it."""
    named = os.environ.get("GSHARE_FN_LIBRARY")
    if named:
        return named
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(here, "..", "..", _LIBRARY_NAME))


class DeviceError(RuntimeError):
    """The function library refused: the node is gone, a quota, a bad environment."""


class Device:
    def __init__(self, library=None):
        lib = ctypes.CDLL(library or default_library())
        lib.gshare_fn_connect.restype = ctypes.c_int
        lib.gshare_fn_last_error.restype = ctypes.c_char_p
        lib.gshare_fn_allocate.restype = ctypes.c_void_p
        lib.gshare_fn_allocate.argtypes = [ctypes.c_uint64, ctypes.c_char_p]
        lib.gshare_fn_freeze.restype = ctypes.c_int
        lib.gshare_fn_launch.restype = ctypes.c_int
        lib.gshare_fn_launch.argtypes = [_KERNEL, ctypes.c_void_p]
        lib.gshare_fn_end_work.restype = None
        lib.gshare_fn_quota_bytes.restype = ctypes.c_uint64
        self._lib = lib
        if lib.gshare_fn_connect() != 0:
            raise DeviceError(f"cannot connect to the node: {self._error()}")

    def _error(self):
        return (self._lib.gshare_fn_last_error() or b"").decode(errors="replace")

    def quota_bytes(self):
        return int(self._lib.gshare_fn_quota_bytes())

    def allocate(self, nbytes, what):
        """The address of `nbytes` of device memory (256-byte aligned), never freed."""
        address = self._lib.gshare_fn_allocate(nbytes, what.encode())
        if not address:
            raise DeviceError(self._error())
        return int(address)

    def freeze(self):
        if self._lib.gshare_fn_freeze() != 0:
            raise DeviceError(self._error())

    def launch(self, kernel):
        """Runs kernel() with the device memory mapped, under the node's compute grant; what it
        raises is raised here, once the grant's accounting is done."""
        raised = []

        def trampoline(_context):
            try:
                kernel()
            except BaseException as error:  # noqa: BLE001 (carried back to the caller)
                raised.append(error)

        callback = _KERNEL(trampoline)  # referenced until the call returns
        status = self._lib.gshare_fn_launch(callback, None)
        if raised:
            raise raised[0]
        if status != 0:
            raise DeviceError(self._error())

    def end_work(self):
        self._lib.gshare_fn_end_work()
