/* SPDX-License-Identifier: MIT */
/*
 * names.h - every plane, line, stat and counter name profd writes into an
 * XSpace, in one place, with where XProf (or the TF/JAX tooling) reads it.
 *
 * These strings are a contract with readers we do not control: a typo is
 * a silently missing column, so call sites use these macros, never a
 * literal. Sections of ../shared/reference/protocol.md are given as §.
 */
#pragma once

/* ---- planes (§4.1) ------------------------------------------------------ */
/* "/device:GPU:<n>", n = profd's plane number of a physical GPU (gpu-map.h);
 * XProf's GPU tools select planes by this prefix (§4.4). */
#define XN_PLANE_GPU_PREFIX "/device:GPU:"
#define XN_PLANE_GPU_FMT XN_PLANE_GPU_PREFIX "%u"
/* Host threads and host counters (§4.6). */
#define XN_PLANE_HOST "/host:CPU"
/* Versions of the CUDA stack, as the in-process GPU tracer fills it (§4.8). */
#define XN_PLANE_METADATA "/host:metadata"
/* profile_start_time / profile_stop_time (§4.2; read by no converter, §4.9). */
#define XN_PLANE_TASK_ENV "Task Environment"

/* ---- lines --------------------------------------------------------------- */
/* Counter events go on a line of this name with id INT64_MAX (§4.3). */
#define XN_LINE_COUNTERS "_counters_"
/* GPU stream lines: "Stream #<id>(<types>)", types from the events seen (§4.4). */
#define XN_LINE_STREAM_FMT "Stream #%u("
/* Host API lines: "<comm> (pid <pid>)/tid <tid>" (§4.6). */
#define XN_LINE_HOST_THREAD_FMT "%s (pid %u)/tid %u"
#define XN_LINE_CUPTI_OVERHEAD "CUPTI overhead"

/* ---- Task Environment stats (§4.2) --------------------------------------- */
#define XN_STAT_PROFILE_START "profile_start_time"
#define XN_STAT_PROFILE_STOP "profile_stop_time"

/* ---- event stats on GPU and host events (§4.4, §4.6, §4.9) --------------- */
/* uint64 on both ends of a launch: XProf draws the flow arrow from it. */
#define XN_STAT_CORRELATION_ID "correlation_id"
/* "$$<context id>" (§4.4). */
#define XN_STAT_CONTEXT_ID "context_id"
/* The kernel stats tool keys on it (§4.5, §4.8). */
#define XN_STAT_KERNEL_DETAILS "kernel_details"
#define XN_STAT_THEORETICAL_OCCUPANCY "theoretical_occupancy_pct"
/* Lower case for memcpy/memalloc, capitalised for Memset/MemFree (§4.4). */
#define XN_STAT_MEMCPY_DETAILS "memcpy_details"
#define XN_STAT_MEMSET_DETAILS "Memset_details"
#define XN_STAT_MEMALLOC_DETAILS "memalloc_details"
#define XN_STAT_MEMFREE_DETAILS "MemFree_details"

/* ---- GPU plane stats: device capabilities (§4.4 table) ------------------- */
/* Must be exactly "Nvidia": XProf's peak tables key on it. */
#define XN_STAT_DEVICE_VENDOR "device_vendor"
#define XN_VENDOR_NVIDIA "Nvidia"
#define XN_STAT_GPU_DEVICE_NAME "gpu_device_name"
#define XN_STAT_CLOCK_RATE "clock_rate"
#define XN_STAT_CORE_COUNT "core_count"
#define XN_STAT_MEMORY_BANDWIDTH "memory_bandwidth"
#define XN_STAT_MEMORY_SIZE "memory_size"
#define XN_STAT_CC_MAJOR "compute_cap_major"
#define XN_STAT_CC_MINOR "compute_cap_minor"

/* ---- /host:metadata stats (§4.8) ------------------------------------------ */
#define XN_STAT_CUDA_DRIVER_VERSION "cuda_driver_version"
#define XN_STAT_CUDA_RUNTIME_VERSION "cuda_runtime_version"
#define XN_STAT_CUDA_VERSION "cuda_version"
#define XN_STAT_CUPTI_VERSION "cupti_version"

/* ---- GPU event names (§4.4) ----------------------------------------------- */
#define XN_EVENT_MEMSET "Memset"
#define XN_EVENT_MEMORY_ALLOC "MemoryAlloc"
#define XN_EVENT_MEMORY_FREE "MemoryFree"

/* ---- the gpu.agent receiver (collectors/agent-map.c) ----------------------- */
/* Stream line types: "Stream #<id>(" + comma-joined types + ")"; XProf's
 * derived timeline orders lines whose name holds "Compute" as compute
 * streams (§4.4). The memcpy types double as event names (§4.4, §5.4). */
#define XN_STREAM_TYPE_COMPUTE "Compute"
#define XN_EVENT_MEMCPY_H2D "MemcpyH2D"
#define XN_EVENT_MEMCPY_D2H "MemcpyD2H"
#define XN_EVENT_MEMCPY_D2D "MemcpyD2D"
#define XN_EVENT_MEMCPY_P2P "MemcpyP2P"
#define XN_EVENT_MEMCPY_OTHER "MemcpyOther"
#define XN_LINE_STREAM_END ")"
/* Overhead events on the "CUPTI overhead" line, by CUpti_ActivityOverheadKind
 * (shown as is; no tool reads them). */
#define XN_EVENT_CUPTI_OVERHEAD_FMT "CUPTI overhead %u"
/* Names for records whose string id the agent never defined: the event is
 * kept (its timing and flow still count) under a plain name. */
#define XN_EVENT_UNKNOWN_KERNEL "unknown kernel"
#define XN_EVENT_UNKNOWN_API "cuda api"
