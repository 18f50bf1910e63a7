/* SPDX-License-Identifier: MIT */
/*
 * xspace-encode.h - the workload shared by the two sides of
 * bench/xspace-encode: profd's store + writer (xspace-encode.c) and the
 * protobuf C++ peer (xspace-encode-pb.cc).
 *
 * Both sides pull the same event stream from one deterministic generator,
 * one event at a time (nothing is pre-materialised, so neither side's peak
 * RSS includes an input array), and must produce the same XSpace content:
 *
 *   plane "/device:GPU:0" (id 0): plane stats device_vendor (str),
 *     core_count (int64), memory_size (uint64); WL_STREAMS stream lines;
 *     kernel events named after one of WL_KERNELS demangled-looking kernel
 *     names, stats kernel_details (ref), context_id (str "$$1"),
 *     correlation_id (uint64).
 *   plane "/host:CPU" (id 1): WL_THREADS thread lines; CUDA driver API
 *     events (cuLaunchKernel, ...), stats device_id (uint64 0),
 *     correlation_id (uint64).
 *   plane "Task Environment": profile_start_time / profile_stop_time.
 *   hostname.
 *
 * Metadata ids are handed out in first-use order on both sides; the stat
 * names correlation_id, kernel_details, context_id (GPU) and correlation_id,
 * device_id (host) are created up front, after the plane stats.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { WL_KERNELS = 200, WL_STREAMS = 8, WL_THREADS = 16, WL_APIS = 8 };

#define WL_GPU_PLANE "/device:GPU:0"
#define WL_HOST_PLANE "/host:CPU"
#define WL_CONTEXT_ID "$$1"
#define WL_VENDOR "Nvidia"
#define WL_CORE_COUNT 132
#define WL_MEMORY_SIZE 85520809984ull

struct wl {
	uint64_t n_pairs; /* API call + kernel pairs: 2 * n_pairs events */
	int64_t start_ns, stop_ns; /* profile window, CLOCK_REALTIME ns */
	const char *hostname;
	char kernel_name[WL_KERNELS][192];
	char kernel_details[WL_KERNELS][128];
	int64_t kernel_dur_ns[WL_KERNELS];
	const char *api_name[WL_APIS];
	int64_t stream_id[WL_STREAMS];
	char stream_name[WL_STREAMS][32];
	int64_t thread_id[WL_THREADS];
	char thread_name[WL_THREADS][32];
};

enum wl_kind { WL_API = 0, WL_KERNEL = 1 };

/* One generated event: @line indexes stream_* (kernels) or thread_* (API
 * calls); @name indexes kernel_* or api_name. */
struct wl_ev {
	int kind;
	uint32_t line;
	uint32_t name;
	int64_t start_ns, dur_ns;
	uint64_t corr;
};

struct wl_gen {
	uint64_t rng, i;
	int64_t stream_free[WL_STREAMS], thread_free[WL_THREADS];
	int pending;
	struct wl_ev kernel;
};

void wl_init(struct wl *w, uint64_t n_pairs);
void wl_gen_init(struct wl_gen *g);
/* Next event in emission order (an API call, then the kernel it launched);
 * 0 at the end. Each line's events come out in increasing start order. */
int wl_next(const struct wl *w, struct wl_gen *g, struct wl_ev *ev);

/* Peak-RSS probes (Linux /proc): reset the high-water mark, read VmRSS /
 * VmHWM in bytes. */
void rss_reset_peak(void);
int64_t rss_current(void);
int64_t rss_peak(void);
double now_s(void);
uint64_t fnv1a64(const void *p, size_t n);

/* The protobuf C++ peer (xspace-encode-pb.cc). */
struct pb_peer_result {
	double build_s, encode_s;
	uint64_t out_bytes, n_events;
	int64_t peak_rss; /* VmHWM right after serialising */
	uint64_t det_hash; /* of a deterministic re-serialisation, if asked */
};
/* Builds the workload as XSpace objects (on the heap as upstream does, or
 * in an Arena) and serialises it with SerializeToString. The objects are
 * left alive (the caller is a child process that exits). 0 or -1. */
int pb_peer_run(const struct wl *w, int use_arena, int want_hash, struct pb_peer_result *r);
/* Parses @data with XSpace::ParseFromArray; returns 0 and the number of
 * XEvents in it, or -1 when it does not parse. */
int pb_peer_parse(const void *data, size_t len, uint64_t *n_events);

#ifdef __cplusplus
}
#endif
