"""gShare's Python function runtimes: the function protocol (kserve_unix), the function library
over its C ABI (device), and the runtimes a spec names (pytorch_function)."""
