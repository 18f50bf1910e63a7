/* SPDX-License-Identifier: MIT */
/*
 * names.h - every plane, line, stat and counter name profd writes into an
 * XSpace, in one place, with where XProf (or the TF/JAX tooling) reads it.
 *
 * These strings are a contract with readers we do not control: a typo is
 * a silently missing column, so call sites (writers, and profctl reading
 * them back) use these macros, never a literal; tools/check-names fails
 * the test suite on a literal, and on a name here that nothing uses.
 * § refers to the project's XSpace notes; docs/protocol.md, docs/agent.md
 * and docs/counters.md describe what profd writes.
 */
#pragma once

/* ---- planes (§4.1) ------------------------------------------------------ */
/* "/device:GPU:<n>", n = profd's plane number of a physical GPU (gpu-map.h);
 * XProf's GPU tools select planes by this prefix (§4.4). */
#define XN_PLANE_DEVICE_PREFIX "/device:"
#define XN_PLANE_GPU_PREFIX XN_PLANE_DEVICE_PREFIX "GPU:"
#define XN_PLANE_GPU_FMT XN_PLANE_GPU_PREFIX "%u"
/* Host threads and host counters (§4.6). */
#define XN_PLANE_HOST_PREFIX "/host:"
#define XN_PLANE_HOST XN_PLANE_HOST_PREFIX "CPU"
/* Versions of the CUDA stack, as the in-process GPU tracer fills it (§4.8). */
#define XN_PLANE_METADATA XN_PLANE_HOST_PREFIX "metadata"
/* profile_start_time / profile_stop_time (§4.2; read by no converter, §4.9). */
#define XN_PLANE_TASK_ENV "Task Environment"

/* ---- lines --------------------------------------------------------------- */
/* Counter events go on a line of this name with id INT64_MAX (§4.3). */
#define XN_LINE_COUNTERS "_counters_"
/* GPU stream lines: "Stream #<id>(<types>)", types from the events seen (§4.4). */
#define XN_LINE_STREAM_FMT "Stream #%u("
/* Host API lines: "<comm> (pid <pid>)/tid <tid>" (§4.6). */
#define XN_LINE_HOST_THREAD_FMT "%s (pid %u)/tid %u"
/* Display name of an agent's GPU lines: "<comm> <pid> / <line name>"; the
 * name stays what XProf parses ("Stream #7(Compute)"). */
/* XProf keeps the low 32 bits of a line id and derives lines of its own from
 * kThreadIdDerivedMin = 0xdeadbeef up (xla trace_utils.h): ids stay below. */
#define XN_LINE_ID_LIMIT 0xdeadbeefu
/* XProf's derived lines (names: xplane_schema.cc k*LineName; ids:
 * xla/tsl/profiler/utils/trace_utils.h kThreadId*), written by profd for GPU
 * work in NVTX steps (collectors/agent/agent-derived.h). The ids are C++ `int`
 * constants: 0xdeadbeef is the int -559038737, and XLineBuilder stores it
 * widened to int64, so a reader's `line.id() == kThreadIdStepInfo` holds only
 * for the negative value (the positive 0xdeadbeef shares its low 32 bits, which
 * is all IsDerivedThreadId() looks at). */
#define XN_LINE_ID_DERIVED_MIN (-559038737) /* kThreadIdDerivedMin, (int)0xdeadbeef */
#define XN_LINE_ID_STEPS (XN_LINE_ID_DERIVED_MIN + 0)         /* kThreadIdStepInfo */
/* + 1 kThreadIdKernelLaunch, + 2 kThreadIdTfNameScope: profd writes neither. */
#define XN_LINE_ID_TF_OP (XN_LINE_ID_DERIVED_MIN + 3)         /* kThreadIdTfOp */
#define XN_LINE_ID_HLO_MODULE (XN_LINE_ID_DERIVED_MIN + 4)    /* kThreadIdHloModule */
#define XN_LINE_ID_HLO_OP (XN_LINE_ID_DERIVED_MIN + 5)        /* kThreadIdHloOp */
#define XN_LINE_DERIVED_STEPS "Steps"
#define XN_LINE_DERIVED_FRAMEWORK_OPS "Framework Ops"
#define XN_LINE_DERIVED_XLA_MODULES "XLA Modules"
#define XN_LINE_DERIVED_XLA_OPS "XLA Ops"
#define XN_LINE_DISPLAY_FMT "%.64s %u / %s"
#define XN_LINE_CUPTI_OVERHEAD "CUPTI overhead"

/* ---- Task Environment stats (§4.2) --------------------------------------- */
#define XN_STAT_PROFILE_START "profile_start_time"
#define XN_STAT_PROFILE_STOP "profile_stop_time"
/* profd's information lines about the window (not warnings: XSpace has no
 * list for them), one per line; e.g. where steps came from (docs/agent.md). */
#define XN_STAT_PROFD_INFO "profd_info"

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
/* profd's own, from NVML (docs/nvml.md): who the GPU is and who used it. */
#define XN_STAT_GPU_UUID "gpu_uuid"
#define XN_STAT_GPU_PCI_BUS_ID "gpu_pci_bus_id"
#define XN_STAT_GPU_PROCESSES "gpu_processes"

/* Roofline peaks (§4.4 optional, §4.9): double; computed per architecture
 * (docs/agent.md "Roofline"). XProf reads the FLOP peak for GPUs and takes
 * the bandwidth from memory_bandwidth; the HBM one is written for readers
 * that prefer it (TPU-style tools, our own check). */
#define XN_STAT_PEAK_TFLOPS "peak_teraflops_per_second"
#define XN_STAT_PEAK_HBM_BW "peak_hbm_bw_gigabytes_per_second"
/* An op's FLOP count (XProf's kFlops), read by profctl doctor's roofline
 * verdict; profd has no cost model and writes none. */
#define XN_STAT_FLOPS "flops"

/* ---- memory profile (xprof xplane_to_memory_profile.cc; every number int64,
 * §4.9) on the first plane named exactly /host:CPU ------------------------- */
#define XN_EVENT_MEMORY_ALLOCATION "MemoryAllocation"
#define XN_EVENT_MEMORY_DEALLOCATION "MemoryDeallocation"
#define XN_LINE_GPU_MEMORY_FMT "%s (pid %u)/GPU memory"
#define XN_STAT_DEVICE_ORDINAL "device_ordinal"
#define XN_STAT_ALLOCATOR_NAME "allocator_name"
#define XN_ALLOCATOR_FMT "GPU:%u pid %u"
#define XN_STAT_BYTES_RESERVED "bytes_reserved"
#define XN_STAT_BYTES_ALLOCATED "bytes_allocated"
#define XN_STAT_PEAK_BYTES_IN_USE "peak_bytes_in_use"
#define XN_STAT_REQUESTED_BYTES "requested_bytes"
#define XN_STAT_ALLOCATION_BYTES "allocation_bytes"
#define XN_STAT_ADDR "addr"
#define XN_STAT_REGION_TYPE "region_type"
#define XN_STAT_TF_OP "tf_op"
#define XN_STAT_GROUP_ID "group_id"

/* ---- /host:metadata stats (§4.8) ------------------------------------------ */
#define XN_STAT_CUDA_DRIVER_VERSION "cuda_driver_version"
#define XN_STAT_CUDA_RUNTIME_VERSION "cuda_runtime_version"
#define XN_STAT_CUDA_VERSION "cuda_version"
#define XN_STAT_CUPTI_VERSION "cupti_version"

/* ---- GPU event names (§4.4) ----------------------------------------------- */
#define XN_EVENT_MEMSET "Memset"
#define XN_EVENT_MEMORY_ALLOC "MemoryAlloc"
#define XN_EVENT_MEMORY_FREE "MemoryFree"

/* ---- the gpu.agent receiver (collectors/agent/agent-map.c) ----------------------- */
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
/* CUDA graphs (docs/agent.md "CUDA graphs"), upstream's names
 * (xla/backends/profiler/gpu/cupti_collector.cc, cupti_buffer_events.cc;
 * xla/tsl/profiler/utils/xplane_schema.cc), uint64 as XProf reads them
 * (§4.9): a graph launch's host event gets " (CudaGraph:<exec id>)"; a
 * launch traced as a whole is "CudaGraphExec:<graph id>" on its stream's
 * line, which then has type "CudaGraph". cuda_graph_node_id is profd's
 * own (upstream drops CUPTI's graphNodeId). */
#define XN_EVENT_GRAPH_LAUNCH_FMT "%s (CudaGraph:%u)"
#define XN_EVENT_GRAPH_EXEC_FMT "CudaGraphExec:%u"
#define XN_STREAM_TYPE_GRAPH "CudaGraph"
#define XN_STAT_CUDA_GRAPH_ID "cuda_graph_id"
#define XN_STAT_CUDA_GRAPH_EXEC_ID "cuda_graph_exec_id"
#define XN_STAT_CUDA_GRAPH_ORIG_ID "cuda_graph_orig_id"
#define XN_STAT_CUDA_GRAPH_NODE_ID "cuda_graph_node_id"
/* Python stacks (docs/python-stacks.md). A frame span on a host thread's
 * line (the line of that thread's CUDA API events) is named as XLA's
 * Python tracer names it (xla/python/profiler/internal/python_hooks.cc):
 * "$<basename of co_filename>:<co_firstlineno> <function>", with the full
 * path and the line executing as stats. Every API event, and the kernels,
 * copies and memsets it launched, carry the launching thread's leaf frame
 * as "<basename>:<line> <function>" (the innermost frame outside installed
 * packages and the standard library) and its whole stack, outermost first,
 * those leaf-style frames joined by XN_PYTHON_STACK_SEP (';' inside a
 * name is written ','), so flame graphs need no other plane. A thread with
 * no Python, or a walk the agent abandoned, says so in python_frame. */
#define XN_EVENT_PYTHON_FRAME_FMT "$%s:%u %s"
#define XN_STAT_PYTHON_FILE "python_file"
#define XN_STAT_PYTHON_LINE "python_line"
#define XN_STAT_PYTHON_FRAME "python_frame"
#define XN_STAT_PYTHON_STACK "python_stack"
#define XN_PYTHON_LEAF_FMT "%s:%u %s"
#define XN_PYTHON_STACK_SEP ";"
#define XN_PYTHON_STACK_TRUNCATED "[truncated]" /* outermost frame of a capped stack */
#define XN_PYTHON_NO_PYTHON "(thread without Python)"
#define XN_PYTHON_DROPPED "(Python stack unavailable)"
/* ---- counters (§4.3, §4.4; docs/counters.md, docs/nvml.md) ----------------
 * Each is an event on a plane's XN_LINE_COUNTERS line whose metadata name
 * and one double stat are both the counter's name (trace_counter_append()).
 * XProf's trace viewer (xplane_to_trace_container.cc) draws every event of
 * that line as one point of the counter track named after its metadata, on
 * the plane's process; no XProf tool keys on a particular name, except that
 * the four environment metrics marked (§4.4) are the names upstream's CUPTI
 * tracer gives the same numbers. profd's Monitor reads the GPU and host.io
 * ones back from the window's trace (daemon/monitor.c). */

/* host.proc, on XN_PLANE_HOST (docs/counters.md §2). */
#define XN_COUNTER_CPU_UTIL "cpu_util_pct"
/* Per CPU: printf format, the kernel's CPU number as unsigned. */
#define XN_COUNTER_CPU_N_UTIL_FMT "cpu%u_util_pct"
#define XN_COUNTER_MEM_USED "memory_used_bytes"
#define XN_COUNTER_MEM_AVAILABLE "memory_available_bytes"
#define XN_COUNTER_LOAD1 "load_avg_1m"
#define XN_COUNTER_CTXT_SWITCHES "context_switches_per_s"

/* host.io, on XN_PLANE_HOST (docs/nvml.md). */
#define XN_COUNTER_NET_RX "net_rx_bytes_per_s"
#define XN_COUNTER_NET_TX "net_tx_bytes_per_s"
#define XN_COUNTER_DISK_READ "disk_read_bytes_per_s"
#define XN_COUNTER_DISK_WRITE "disk_write_bytes_per_s"

/* nvml, on each XN_PLANE_GPU_FMT plane (docs/nvml.md). */
#define XN_COUNTER_GPU_UTIL "gpu_util_pct"
#define XN_COUNTER_MEM_UTIL "mem_util_pct"
#define XN_COUNTER_GPU_MEM_USED "memory_used_mib"
#define XN_COUNTER_GPU_MEM_TOTAL "memory_total_mib"
#define XN_COUNTER_POWER "power_mw"                 /* upstream name (§4.4) */
#define XN_COUNTER_SM_CLOCK "sm_clock_mhz"          /* upstream name (§4.4) */
#define XN_COUNTER_MEM_CLOCK "memory_clock_mhz"     /* upstream name (§4.4) */
#define XN_COUNTER_GPU_TEMP "gpu_temp_c"            /* upstream name (§4.4) */
#define XN_COUNTER_PCIE_TX "pcie_tx_mib_s"
#define XN_COUNTER_PCIE_RX "pcie_rx_mib_s"
#define XN_COUNTER_NVLINK_TX "nvlink_tx_mib_s"
#define XN_COUNTER_NVLINK_RX "nvlink_rx_mib_s"
#define XN_COUNTER_SM_ACTIVE "sm_active_pct"        /* GPM */
#define XN_COUNTER_SM_OCCUPANCY "sm_occupancy_pct"  /* GPM */
#define XN_COUNTER_TENSOR_ACTIVE "tensor_active_pct" /* GPM */
#define XN_COUNTER_FP64_ACTIVE "fp64_active_pct"    /* GPM */
#define XN_COUNTER_FP32_ACTIVE "fp32_active_pct"    /* GPM */
#define XN_COUNTER_FP16_ACTIVE "fp16_active_pct"    /* GPM */
#define XN_COUNTER_DRAM_BW_UTIL "dram_bw_util_pct"  /* GPM */

/* Per process: "process <pid> <comm> <what>", printf format (int pid,
 * comm, one XN_PROCESS_* below). nvml writes them on the GPU plane the
 * process uses, host.io writes XN_PROCESS_CPU on XN_PLANE_HOST. */
#define XN_COUNTER_PROCESS_PREFIX "process "
#define XN_COUNTER_PROCESS_FMT XN_COUNTER_PROCESS_PREFIX "%d %s %s"
#define XN_PROCESS_GPU_MEM "gpu_mem_mib"
#define XN_PROCESS_SM "sm_pct"
#define XN_PROCESS_MEM_UTIL "mem_util_pct"
#define XN_PROCESS_CPU "cpu_pct"
#define XN_PROCESS_RSS "rss_mib"
#define XN_PROCESS_THREADS "threads"

/* NVTX ranges through the agent (collectors/agent/agent-nvtx.c, docs/agent.md "NVTX"). */
#define XN_LINE_NVTX_FMT XN_LINE_HOST_THREAD_FMT "/NVTX"
#define XN_STAT_NVTX_RANGE "nvtx_range"
#define XN_STAT_NVTX_DOMAIN "nvtx_domain"
#define XN_STAT_NVTX_PAYLOAD "marker_payload"
/* tf_op and group_id: XN_STAT_TF_OP, XN_STAT_GROUP_ID above. */
#define XN_STAT_STEP_NUM "step_num"
#define XN_STAT_IS_ROOT "_r"
/* hlo_op is written under this name: XProf's op metrics drop an event whose
 * hlo_op has no HLO proto, and a daemon has none. */
#define XN_STAT_HLO_OP_NAME "hlo_op_name"
#define XN_STAT_HLO_OP "hlo_op"
#define XN_STAT_HLO_MODULE "hlo_module"

/* CUPTI PM sampling through the agent (collectors/agent/agent-pm.c, docs/agent.md
 * "PM sampling"), as XProf's perf_counters tool reads it: a plane lists
 * only with a device_id stat. */
#define XN_LINE_PM_COUNTERS "PM counters"
#define XN_STAT_DEVICE_ID "device_id"
#define XN_STAT_COUNTER_VALUE "counter_value"
#define XN_STAT_PM_DESCRIPTION "performance_counter_description"

/* ProfileResponse.tool_data's one entry: the XSpace, under the name the TF
 * client writes as <host>.xplane.pb (protocol.md §2). */
#define XN_TOOL_XPLANE "xplane.pb"
