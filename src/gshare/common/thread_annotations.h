// Thread-safety annotations: the locking rules written into the types.
//
// Under clang the macros expand to the attributes that -Wthread-safety checks (a member marked
// GUARDED_BY(mu_) may only be touched while mu_ is held); under other compilers they expand to
// nothing and serve as documentation. Use them with gshare::Mutex (common/mutex.h), which carries
// the capability attributes that std::mutex lacks.
#pragma once

#if defined(__clang__)
#define GSHARE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define GSHARE_THREAD_ANNOTATION(x)
#endif

// Abseil (under gRPC) defines some of these names too: ours replace them.
#undef CAPABILITY
#undef SCOPED_CAPABILITY
#undef GUARDED_BY
#undef PT_GUARDED_BY
#undef ACQUIRED_BEFORE
#undef ACQUIRED_AFTER
#undef REQUIRES
#undef ACQUIRE
#undef RELEASE
#undef TRY_ACQUIRE
#undef EXCLUDES
#undef RETURN_CAPABILITY
#undef NO_THREAD_SAFETY_ANALYSIS

#define CAPABILITY(x) GSHARE_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY GSHARE_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) GSHARE_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) GSHARE_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) GSHARE_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) GSHARE_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) GSHARE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) GSHARE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) GSHARE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) GSHARE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) GSHARE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) GSHARE_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS GSHARE_THREAD_ANNOTATION(no_thread_safety_analysis)
