/* SPDX-License-Identifier: MIT */
/*
 * agent-proto.h - the wire format between libprofd-agent.so (inside a CUDA
 * job) and profd's "gpu.agent" receiver, over a Unix stream socket.
 *
 * DESIGN
 * ------
 * Plain C structs with explicit padding; both ends run on the same host,
 * so the byte order is the host's (both ends are little-endian x86-64 or
 * aarch64 in practice) and sizes are pinned by static asserts below.
 *
 * A connection is a sequence of frames:
 *
 *   struct agent_frame_hdr { magic, version, kind, length }  + length bytes
 *
 * The receiver checks every header (magic, version, a known kind, a length
 * within AGENT_FRAME_MAX and within the kind's own bounds) before it buffers
 * a byte of the payload; anything else closes that connection. A RECORDS
 * payload is a sequence of 8-byte aligned records, each starting with a
 * struct agent_rec { type, size }; sizes are checked against the payload
 * and the type's struct.
 *
 * Flow:
 *   agent  -> HELLO, DEVICE x n            on connect (device inventory)
 *   daemon -> START                        a capture window opened
 *   agent  -> CLOCK (start), RECORDS ...   while capturing
 *   daemon -> FLUSH{token}                 a window is closing
 *   agent  -> RECORDS ..., FLUSHED{token}  everything up to now was sent
 *   daemon -> STOP                         the last window closed
 *   agent  -> CLOCK (stop), STATS          counters of the capture
 *   agent  -> ERROR                        at any time: CUPTI refused etc.
 *
 * Strings (kernel and API names) are interned per connection: a STRING
 * record defines id -> text before the first record that uses the id. Ids
 * start at 1; 0 means "no name". Both ends reset the table on reconnect.
 *
 * Timestamps in records are in the agent's clock (CUPTI ns); CLOCK frames
 * carry (agent clock, CLOCK_REALTIME) pairs taken together, and the
 * receiver maps wall = ts - clock_ns + wall_ns.
 *
 * Version rule: any change to a struct below bumps AGENT_PROTO_VERSION.
 * The first 8 bytes of HELLO (pid, proto version) never change, so a
 * receiver can name the process it refuses. profd serves every version
 * from AGENT_PROTO_VERSION_MIN to AGENT_PROTO_VERSION, so upgrading profd
 * never refuses the agents of jobs already running; it answers each agent
 * in the version that agent spoke in its HELLO.
 *
 *   v1  first release
 *   v2  STATS grew (cut_records, foreign_buffers, flags); ERROR codes
 *       FOREIGN, NO_CUPTI, NOTICE (a v1 receiver shows unknown codes as
 *       plain text, so they need no version of their own)
 *   v3  records NVTX (ranges and the range stack at each CUDA launch),
 *       MEM_STATE (memory in use per device when a capture opens) and
 *       MEMORY2 (MEMORY plus the cudaMallocAsync pool it came from)
 *   v4  START carries the capture's GPU options (struct agent_start) and
 *       may be sent again while capturing when they change; KERNEL,
 *       MEMCPY, MEMSET and API grew CUDA graph ids at their end; records
 *       GRAPH (one graph launch, graph-level tracing), PM_METRICS and
 *       PM_SAMPLE (hardware counters); ERROR code COUNTERS
 *   v5  Python stacks: START grew (py_sample_hz, py_max_depth; flags
 *       PY_STACKS, PY_SAMPLE); records PY_FRAME and PY_STACK (definitions,
 *       once per id), PY_LAUNCH (the Python stack of a CUDA call, keyed by
 *       correlation like an NVTX LAUNCH) and PY_SAMPLE (the sampler);
 *       STATS grew the Python counters; START flag RECORDING (the flight
 *       recorder alone: its minimum kinds, buffers out within ~1 s)
 *   v6  STATS grew what Python stacks cost the job: the launch-site walks
 *       timed (1 in 64 of each thread's) with their median and 90th
 *       percentile, and the sampler thread's CPU and wall time
 *
 * Growth rule for records: a record type may grow at its end in a new
 * version. The receiver accepts any size from the type's first size up
 * (agent_rec_min_size) and zero-fills the fields a shorter record lacks, so
 * a v3 agent's KERNEL reads with graph_node_id 0.
 */
#pragma once

#include <stdint.h>

#define AGENT_PROTO_MAGIC 0x41444650u /* "PFDA" little-endian */
#define AGENT_PROTO_VERSION 6u
/* The oldest agent protocol this profd still serves. */
#define AGENT_PROTO_VERSION_MIN 1u
/* Largest payload of one frame; the agent splits record batches below it. */
#define AGENT_FRAME_MAX (1u << 20)
/* Per-connection bounds the receiver enforces. */
#define AGENT_MAX_STRINGS 65536u
#define AGENT_MAX_STRING_LEN 4096u
#define AGENT_MAX_DEVICES 64u

/* Environment variable that overrides the socket path in the agent. */
#define AGENT_SOCKET_ENV "PROFD_AGENT_SOCKET"

enum agent_frame_kind {
	/* agent -> daemon */
	AGENT_FRAME_HELLO = 1,
	AGENT_FRAME_DEVICE = 2,
	AGENT_FRAME_CLOCK = 3,
	AGENT_FRAME_RECORDS = 4,
	AGENT_FRAME_ERROR = 5,
	AGENT_FRAME_FLUSHED = 6,
	AGENT_FRAME_STATS = 7,
	/* daemon -> agent */
	AGENT_FRAME_START = 16,
	AGENT_FRAME_STOP = 17,
	AGENT_FRAME_FLUSH = 18,
};

struct agent_frame_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t kind;
	uint32_t length; /* payload bytes after this header */
	uint32_t reserved; /* 0 */
};

/* HELLO: who is connecting. Strings are NUL-padded; the receiver forces a
 * final NUL. */
struct agent_hello {
	uint32_t pid;
	uint32_t proto_version; /* == AGENT_PROTO_VERSION of the agent */
	uint32_t ppid;
	uint32_t n_devices;
	uint32_t cuda_driver_version;  /* cuDriverGetVersion, 13000 = 13.0 */
	uint32_t cuda_runtime_version; /* 0 when unknown */
	uint32_t cupti_version;        /* cuptiGetVersion, 0 when unknown */
	uint32_t flags;    /* enum agent_hello_flag */
	char name[64];     /* comm */
	char cmdline[512]; /* argv joined by spaces, truncated */
};

enum agent_hello_flag {
	AGENT_HELLO_NVTX = 1u << 0, /* v3: the agent collects NVTX (sends NVTX records) */
};

/* DEVICE: identity and capabilities of one device the process sees. */
struct agent_device {
	uint32_t local_ordinal; /* CUDA device ordinal in the process = CUPTI deviceId */
	uint32_t cc_major, cc_minor;
	uint32_t sm_count;
	uint32_t sm_clock_khz;
	uint32_t mem_clock_khz;
	uint32_t bus_width_bits;
	uint32_t warp_size;
	uint32_t max_threads_per_block;
	uint32_t max_threads_per_sm;
	uint32_t max_blocks_per_sm;
	uint32_t regs_per_block;
	uint32_t regs_per_sm;
	uint32_t smem_per_block;       /* bytes, default limit (48 KiB) */
	uint32_t smem_per_block_optin; /* bytes */
	uint32_t smem_per_sm;          /* bytes */
	uint32_t reserved_smem_per_block;
	uint32_t _pad;
	uint64_t mem_bytes;
	uint64_t mem_bandwidth; /* bytes/s, agent_mem_bandwidth() */
	char uuid[48];          /* "GPU-xxxxxxxx-xxxx-..." */
	char pci_bus_id[32];    /* "0000:18:00.0" */
	char name[96];
};

enum agent_clock_which { AGENT_CLOCK_START = 0, AGENT_CLOCK_STOP = 1 };

struct agent_clock {
	uint64_t agent_ns; /* cuptiGetTimestamp() */
	uint64_t wall_ns;  /* CLOCK_REALTIME at the same moment */
	uint32_t which;    /* enum agent_clock_which */
	uint32_t _pad;
};

/* ERROR codes; text carries the details (e.g. the other subscriber). */
enum agent_error_code {
	AGENT_ERR_CUPTI = 1,        /* a CUPTI call failed; text has the call and result */
	AGENT_ERR_PRIVILEGES = 2,   /* CUPTI_ERROR_INSUFFICIENT_PRIVILEGES */
	AGENT_ERR_BUSY = 3,         /* another CUPTI subscriber in this process */
	AGENT_ERR_VERSION = 4,      /* CUPTI / driver too old */
	AGENT_ERR_NOT_FINALIZED = 5, /* detach could not finalize CUPTI in time */
	/* v2 */
	AGENT_ERR_FOREIGN = 6,  /* another tool owns the Activity API (e.g. PyTorch's profiler) */
	AGENT_ERR_NO_CUPTI = 7, /* no usable libcupti found in the job; text says where it looked */
	AGENT_ERR_NOTICE = 8,   /* tracing runs, with a limitation the user should know of */
	/* v4 */
	AGENT_ERR_COUNTERS = 9, /* hardware counters (PM sampling) unavailable: privileges,
				 * another profiler holds them, unsupported GPU; text says
				 * which (and who, where CUPTI tells); tracing goes on */
};

struct agent_error {
	uint32_t code; /* enum agent_error_code */
	int32_t detail; /* e.g. the CUptiResult */
	char text[248];
};

struct agent_flush {
	uint64_t token;
};

/*
 * START: a capture. v1-v3 agents get the first AGENT_START_V3_SIZE bytes
 * (flags 0). From v4 the payload carries the GPU options of the capture:
 * the union over the windows open now (collectors/agent/agent-opts.h). While a
 * capture runs the daemon sends START again whenever that union changes
 * (a window with other options opened, or closed); the agent then applies
 * the new options and sends no new CLOCK. The agent reads min(length,
 * sizeof) bytes and zero-fills the rest.
 */
#define AGENT_PM_METRICS_MAX 448u /* bytes of pm_metrics incl. the NUL */
#define AGENT_PM_MAX_METRICS 16u  /* metric names in one PM_METRICS record */

struct agent_start {
	uint64_t token;
	uint64_t flags; /* v4: enum agent_start_flag; earlier versions 0 */
	/* v4 */
	uint32_t pm_interval_us; /* PM sampling interval (AGENT_START_PM_SAMPLING) */
	uint32_t pm_buffer_mb;   /* PM sampling hardware buffer per GPU */
	char pm_metrics[AGENT_PM_METRICS_MAX]; /* comma-separated metric names, NUL-terminated;
						* "" = the agent's default set */
	/* v5 */
	uint32_t py_sample_hz;  /* AGENT_START_PY_SAMPLE: samples per second per thread, 1..1000 */
	uint32_t py_max_depth;  /* frames kept per stack (innermost first), 1..AGENT_PY_MAX_DEPTH;
				 * 0 = the agent's default (64) */
};
#define AGENT_START_V3_SIZE 16u
/* RECORDING: a buffer CUPTI has held this long is flushed by force, so a
 * job killed while recording loses at most about this much. */
#define AGENT_RECORD_FLUSH_MS 1000u
#define AGENT_START_V4_SIZE 472u

enum agent_start_flag {
	AGENT_START_NVTX = 1u << 0,        /* collect NVTX ranges (an older agent always does) */
	AGENT_START_GRAPH_TRACE = 1u << 1, /* CUDA graphs as one GRAPH record per launch, not per node */
	AGENT_START_PM_SAMPLING = 1u << 2, /* sample pm_metrics every pm_interval_us */
	/* v5 */
	AGENT_START_PY_STACKS = 1u << 3, /* the Python stack of the calling thread at each
					  * launch, copy and memset (PY_LAUNCH records) */
	AGENT_START_PY_SAMPLE = 1u << 4, /* sample every Python thread at py_sample_hz
					  * (PY_SAMPLE records) */
	AGENT_START_RECORDING = 1u << 5, /* only the flight recorder wants data: kernels,
					  * copies, memsets, their API records and NVTX
					  * (no MEMORY2/OVERHEAD/PM/Python; the daemon clears
					  * those flags), and no completed record held back
					  * more than ~1 s (AGENT_RECORD_FLUSH_MS) */
};

/* STATS: counters of the capture, sent after STOP (and on FLUSH). A v1
 * agent sends the first AGENT_STATS_V1_SIZE bytes. */
struct agent_stats {
	uint64_t records;          /* CUPTI records converted */
	uint64_t buffers;          /* CUPTI buffers completed */
	uint64_t dropped_buffers;  /* buffers dropped: queue or socket full */
	uint64_t dropped_records;  /* cuptiActivityGetNumDroppedRecords */
	uint64_t unknown_records;  /* records of kinds we do not convert */
	/* v2 */
	uint64_t cut_records;      /* records still incomplete when the capture had to end */
	uint64_t foreign_buffers;  /* buffers CUPTI returned that were not ours (another tool's) */
	uint32_t flags;            /* enum agent_stats_flag */
	uint32_t _pad;
	/* v5 */
	uint64_t py_stacks;        /* launch-site stacks taken (PY_LAUNCH records) */
	uint64_t py_dropped;       /* launch-site walks abandoned (odd state) or not queued (full) */
	uint64_t py_samples;       /* thread samples taken (PY_SAMPLE records) */
	uint64_t py_sample_drops;  /* samples abandoned: torn or unreadable frames, queue full */
	/* v6: what the Python stacks cost the job in this capture. A timed
	 * launch is from the launch callback's check that stacks are on to
	 * its record queued (one clock read included); each launching thread
	 * times its 64th, 128th, ... The percentiles are 0 with none timed. */
	uint64_t py_timed;           /* launch-site walks timed */
	uint32_t py_launch_p50_ns;   /* their median, ns (16 ns steps; AGENT_PY_COST_BEYOND) */
	uint32_t py_launch_p90_ns;   /* their 90th percentile, ns */
	uint64_t py_sampler_cpu_ns;  /* the sampler thread's CPU time */
	uint64_t py_sampler_wall_ns; /* how long it ran */
};
#define AGENT_STATS_V1_SIZE 40u
#define AGENT_STATS_V4_SIZE 64u
#define AGENT_STATS_V5_SIZE 96u
/* py_launch_p50_ns / p90_ns: beyond what the agent's histogram holds (8 us). */
#define AGENT_PY_COST_BEYOND 0xFFFFFFFFu

enum agent_stats_flag {
	AGENT_STATS_SLABS_LEAKED = 1u << 0, /* finalize outlasted the wait: buffers left to CUPTI */
};

/* ---- records inside a RECORDS frame ------------------------------------ */

enum agent_rec_type {
	AGENT_REC_STRING = 1,
	AGENT_REC_KERNEL = 2,
	AGENT_REC_MEMCPY = 3,
	AGENT_REC_MEMSET = 4,
	AGENT_REC_MEMORY = 5,
	AGENT_REC_OVERHEAD = 6,
	AGENT_REC_API = 7,
	AGENT_REC_NVTX = 8, /* v3 */
	AGENT_REC_MEM_STATE = 9, /* v3 */
	AGENT_REC_MEMORY2 = 10, /* v3 */
	AGENT_REC_GRAPH = 11, /* v4 */
	AGENT_REC_PM_METRICS = 12, /* v4 */
	AGENT_REC_PM_SAMPLE = 13, /* v4 */
	AGENT_REC_PY_FRAME = 14, /* v5 */
	AGENT_REC_PY_STACK = 15, /* v5 */
	AGENT_REC_PY_LAUNCH = 16, /* v5 */
	AGENT_REC_PY_SAMPLE = 17, /* v5 */
};

struct agent_rec {
	uint16_t type; /* enum agent_rec_type */
	uint16_t size; /* bytes of the whole record incl. this header, multiple of 8 */
	uint32_t aux;  /* type-specific (STRING: text length) */
};

/* STRING: aux = text length (no NUL), followed by the text, padded to 8. */
struct agent_rec_string {
	struct agent_rec h;
	uint32_t id;
	uint32_t _pad;
	/* char text[aux]; */
};

/* Memory kinds: the CUpti_ActivityMemoryKind values. */
enum agent_mem_kind {
	AGENT_MEM_UNKNOWN = 0,
	AGENT_MEM_PAGEABLE = 1,
	AGENT_MEM_PINNED = 2,
	AGENT_MEM_DEVICE = 3,
	AGENT_MEM_ARRAY = 4,
	AGENT_MEM_MANAGED = 5,
	AGENT_MEM_DEVICE_STATIC = 6,
	AGENT_MEM_MANAGED_STATIC = 7,
	AGENT_MEM__MAX = 8,
};

enum agent_copy_kind {
	AGENT_COPY_OTHER = 0,
	AGENT_COPY_H2D = 1,
	AGENT_COPY_D2H = 2,
	AGENT_COPY_D2D = 3,
	AGENT_COPY_P2P = 4,
	AGENT_COPY__MAX = 5,
};

struct agent_rec_kernel {
	struct agent_rec h;
	uint64_t start, end;
	uint32_t device; /* local ordinal */
	uint32_t context;
	uint32_t stream;
	uint32_t correlation;
	uint32_t name_id;
	uint32_t regs;
	uint32_t static_smem;
	uint32_t dynamic_smem;
	int32_t grid[3];
	int32_t block[3];
	uint32_t occ_pct_e4; /* theoretical occupancy in 1/10000 %; UINT32_MAX = unknown */
	uint32_t graph_id;   /* CUDA graph the kernel was launched from, 0 = none */
	/* v4 */
	uint64_t graph_node_id; /* CUpti graphNodeId, 0 = none */
};
#define AGENT_REC_KERNEL_V3_SIZE 88u

struct agent_rec_memcpy {
	struct agent_rec h;
	uint64_t start, end;
	uint64_t bytes;
	uint32_t device, context, stream, correlation;
	uint32_t dst_device; /* local ordinal of the destination (P2P), else device */
	uint8_t copy_kind;   /* enum agent_copy_kind */
	uint8_t src_kind, dst_kind; /* enum agent_mem_kind */
	uint8_t async;
	/* v4 */
	uint64_t graph_node_id; /* 0 = not a graph node */
	uint32_t graph_id;
	uint32_t _pad4;
};
#define AGENT_REC_MEMCPY_V3_SIZE 56u

struct agent_rec_memset {
	struct agent_rec h;
	uint64_t start, end;
	uint64_t bytes;
	uint32_t device, context, stream, correlation;
	uint32_t value;
	uint8_t mem_kind;
	uint8_t async;
	uint8_t _pad[2];
	/* v4 */
	uint64_t graph_node_id; /* 0 = not a graph node */
	uint32_t graph_id;
	uint32_t _pad4;
};
#define AGENT_REC_MEMSET_V3_SIZE 56u

enum agent_mem_op { AGENT_MEMOP_ALLOC = 1, AGENT_MEMOP_FREE = 2 };

/* MEMORY: an allocation or a release (one instant). */
struct agent_rec_memory {
	struct agent_rec h;
	uint64_t ts;
	uint64_t bytes;
	uint64_t address;
	uint32_t device, context, stream, correlation; /* stream UINT32_MAX = none */
	uint8_t op;       /* enum agent_mem_op */
	uint8_t mem_kind; /* enum agent_mem_kind */
	uint8_t _pad[6];
};

/* MEMORY2 (v3): MEMORY plus CUPTI's memoryPoolConfig, so that a
 * cudaMallocAsync allocation is told from a cudaMalloc one. */
struct agent_rec_memory2 {
	struct agent_rec h;
	uint64_t ts;
	uint64_t bytes;
	uint64_t address;
	uint64_t pool_address;  /* the pool's base; 0 = not from a pool */
	uint64_t pool_size;     /* memoryPoolConfig.pool.size (local pools), else 0 */
	uint64_t pool_utilized; /* memoryPoolConfig.utilizedSize */
	uint32_t device, context, stream, correlation; /* stream UINT32_MAX = none */
	uint8_t op;        /* enum agent_mem_op */
	uint8_t mem_kind;  /* enum agent_mem_kind */
	uint8_t pool_type; /* enum agent_pool_type */
	uint8_t _pad[5];
};

enum agent_pool_type { AGENT_POOL_NONE = 0, AGENT_POOL_LOCAL = 1, AGENT_POOL_IMPORTED = 2 };

/* Where MEM_STATE's used_bytes comes from. */
enum agent_mem_state_source {
	AGENT_MEMSTATE_UNKNOWN = 0, /* the agent could not ask (no active primary context) */
	AGENT_MEMSTATE_DEVICE = 1,  /* cuMemGetInfo in the primary context: the whole device */
};

/* MEM_STATE (v3): device memory in use when a capture opened, sent once per
 * device right after CLOCK (start); the memory profile's running totals
 * start at this level instead of 0. */
struct agent_rec_mem_state {
	struct agent_rec h;
	uint64_t ts;         /* agent clock when it was measured */
	uint64_t used_bytes; /* total - free, as the driver reports it */
	uint64_t total_bytes;
	uint32_t device;     /* local ordinal */
	uint32_t source;     /* enum agent_mem_state_source */
};

/* OVERHEAD: time CUPTI or the driver spent on an object. */
struct agent_rec_overhead {
	struct agent_rec h;
	uint64_t start, end;
	uint64_t object_id; /* thread id, or device/context/stream packed */
	uint32_t kind;      /* CUpti_ActivityOverheadKind */
	uint32_t object_kind; /* CUpti_ActivityObjectKind */
	uint32_t device;    /* local ordinal, UINT32_MAX = not a device object */
	uint32_t _pad;
};

enum agent_api_domain { AGENT_API_DRIVER = 1, AGENT_API_RUNTIME = 2 };

/* API: one driver or runtime call on a host thread. */
struct agent_rec_api {
	struct agent_rec h;
	uint64_t start, end;
	uint32_t tid;
	uint32_t correlation;
	uint32_t cbid;
	uint32_t name_id;
	uint16_t domain; /* enum agent_api_domain */
	uint16_t _pad;
	int32_t ret;
	/* v4: a graph launch (cuGraphLaunch, cudaGraphLaunch) */
	uint32_t graph_id;      /* the graph the executable was instantiated from, 0 = none */
	uint32_t graph_exec_id; /* the executable graph launched, 0 = none */
};
#define AGENT_REC_API_V3_SIZE 48u

/* GRAPH (v4): one CUDA graph launch traced as a whole (AGENT_START_GRAPH_TRACE;
 * CUpti_ActivityGraphTrace2), in place of its nodes' records. */
struct agent_rec_graph {
	struct agent_rec h;
	uint64_t start, end;
	uint32_t device, context, stream, correlation; /* where the first node ran */
	uint32_t graph_id;
	uint32_t end_device; /* where the last node ran */
};

/*
 * PM_METRICS (v4): the metrics of the PM_SAMPLE records of @device that
 * follow, sent once per device when sampling starts (again if the set
 * changes). aux = number of metrics (1..AGENT_PM_MAX_METRICS); a uint32_t
 * STRING id per metric follows, padded to 8.
 */
struct agent_rec_pm_metrics {
	struct agent_rec h;
	uint32_t device;      /* local ordinal */
	uint32_t interval_us; /* the interval the hardware was set to */
	/* uint32_t name_id[aux]; */
};

/*
 * PM_SAMPLE (v4): one PM sampling interval of one device. aux = number of
 * values, equal to the metrics of the device's last PM_METRICS record, in
 * its order; a double per metric follows (NaN = not measured).
 */
struct agent_rec_pm_sample {
	struct agent_rec h;
	uint64_t start, end; /* the interval, agent clock */
	uint32_t device;
	uint32_t _pad;
	/* double value[aux]; */
};

/* NVTX: one finished range, or the NVTX range stack of the thread at a CUDA
 * API call (a launch, copy, memset ...) that CUPTI will report under
 * @correlation. aux = number of struct agent_nvtx_level entries that
 * follow (1..AGENT_NVTX_MAX_LEVELS), outermost first: a RANGE's ancestors
 * then the range itself; a LAUNCH's whole stack. Deeper stacks keep the
 * outermost AGENT_NVTX_MAX_LEVELS - 1 levels and the innermost one. */
enum agent_nvtx_kind { AGENT_NVTX_RANGE = 1, AGENT_NVTX_LAUNCH = 2 };
#define AGENT_NVTX_MAX_LEVELS 8u

enum agent_nvtx_payload {
	AGENT_NVTX_PAYLOAD_NONE = 0,
	AGENT_NVTX_PAYLOAD_U64 = 1,
	AGENT_NVTX_PAYLOAD_I64 = 2,
	AGENT_NVTX_PAYLOAD_DOUBLE = 3,
};

enum agent_nvtx_flag {
	AGENT_NVTX_START_END = 1u << 0, /* a start/end range (may end on another thread) */
};

struct agent_nvtx_level {
	uint32_t serial;  /* per process, in push order; 0 = unknown */
	uint32_t text_id; /* STRING id of the range's message */
};

struct agent_rec_nvtx {
	struct agent_rec h;
	uint64_t start, end; /* RANGE: the range; LAUNCH: the call's entry, twice */
	uint64_t payload;    /* bits of the payload, read as @payload_type says */
	uint32_t tid;
	uint32_t correlation; /* LAUNCH: CUPTI's correlation id of the call; RANGE: 0 */
	uint32_t domain_id;   /* STRING id of the domain's name, 0 = the default domain */
	uint32_t category;
	uint8_t kind;         /* enum agent_nvtx_kind */
	uint8_t payload_type; /* enum agent_nvtx_payload */
	uint8_t flags;        /* enum agent_nvtx_flag */
	uint8_t _pad;
	uint32_t depth;       /* nesting depth of the innermost level, 0 = outermost */
	/* struct agent_nvtx_level levels[aux]; */
};

/* ---- Python stacks (v5) -------------------------------------------------
 *
 * A frame is one (code object, current line) of a Python thread; a stack
 * is a list of frame ids. Both are interned per connection like STRINGs:
 * the PY_FRAME / PY_STACK record defining an id comes before the first
 * record that uses it, ids start at 1 and are reset on reconnect. A stack
 * lists at most AGENT_PY_MAX_DEPTH frames, innermost LAST (outermost
 * first, like NVTX levels); a walk deeper than the capture's depth keeps
 * the innermost frames and sets AGENT_PY_STACK_TRUNCATED.
 *
 * Stack id 0 in PY_LAUNCH / PY_SAMPLE: the thread runs no Python (no
 * thread state: a native thread such as PyTorch's autograd device threads
 * or XLA's executors). AGENT_PY_STACK_DROPPED: the walk was abandoned (a
 * torn or foreign state) and counted in STATS.
 */
#define AGENT_PY_MAX_DEPTH 128u
#define AGENT_PY_MAX_FRAMES (1u << 20)  /* frame ids per connection */
#define AGENT_PY_MAX_STACKS (1u << 20)  /* stack ids per connection */
#define AGENT_PY_STACK_DROPPED UINT32_MAX

enum agent_py_frame_flag {
	AGENT_PY_FRAME_GENERATOR = 1u << 0, /* a generator or coroutine frame */
	AGENT_PY_FRAME_LINE_UNKNOWN = 1u << 1, /* line could not be computed: line = firstlineno */
};

/* PY_FRAME: frame id -> code location. file_id is co_filename (the full
 * path as the interpreter knows it), name_id co_qualname where the
 * interpreter has one (3.11+), else co_name; both STRING ids. */
struct agent_rec_py_frame {
	struct agent_rec h;
	uint32_t id;
	uint32_t file_id;
	uint32_t name_id;
	uint32_t firstlineno; /* co_firstlineno: the definition line */
	uint32_t line;        /* the line executing (the call site in a caller) */
	uint32_t flags;       /* enum agent_py_frame_flag */
};

enum agent_py_stack_flag {
	AGENT_PY_STACK_TRUNCATED = 1u << 0, /* outer frames past the depth cap were left out */
};

/* PY_STACK: stack id -> aux frame ids (1..AGENT_PY_MAX_DEPTH), outermost
 * first, padded to 8. */
struct agent_rec_py_stack {
	struct agent_rec h;
	uint32_t id;
	uint32_t flags; /* enum agent_py_stack_flag */
	/* uint32_t frame_id[aux]; */
};

/* PY_LAUNCH: the Python stack of @tid when it entered the CUDA call that
 * CUPTI reports under @correlation (a launch, graph launch, copy or
 * memset). */
struct agent_rec_py_launch {
	struct agent_rec h;
	uint64_t ts; /* 0: not taken (the API record of @correlation dates the
		      * call); agents before 2026-11-27 sent the agent clock at the
		      * call's entry, which profd never read */
	uint32_t tid;
	uint32_t correlation;
	uint32_t stack_id; /* 0 = no Python on this thread; AGENT_PY_STACK_DROPPED */
	uint32_t _pad;
};

/* PY_SAMPLE: the sampler saw @tid in @stack_id at @ts. */
struct agent_rec_py_sample {
	struct agent_rec h;
	uint64_t ts;
	uint32_t tid;
	uint32_t stack_id; /* 0 = no Python frame on that thread now; AGENT_PY_STACK_DROPPED */
};

#define AGENT_STATIC_SIZE(type, n) _Static_assert(sizeof(type) == (n), #type " is part of the wire format")
AGENT_STATIC_SIZE(struct agent_frame_hdr, 16);
AGENT_STATIC_SIZE(struct agent_hello, 608);
AGENT_STATIC_SIZE(struct agent_device, 264);
AGENT_STATIC_SIZE(struct agent_clock, 24);
AGENT_STATIC_SIZE(struct agent_error, 256);
AGENT_STATIC_SIZE(struct agent_stats, 128);
AGENT_STATIC_SIZE(struct agent_rec, 8);
AGENT_STATIC_SIZE(struct agent_rec_string, 16);
AGENT_STATIC_SIZE(struct agent_start, 480);
AGENT_STATIC_SIZE(struct agent_rec_kernel, 96);
AGENT_STATIC_SIZE(struct agent_rec_memcpy, 72);
AGENT_STATIC_SIZE(struct agent_rec_memset, 72);
AGENT_STATIC_SIZE(struct agent_rec_memory, 56);
AGENT_STATIC_SIZE(struct agent_rec_memory2, 80);
AGENT_STATIC_SIZE(struct agent_rec_mem_state, 40);
AGENT_STATIC_SIZE(struct agent_rec_overhead, 48);
AGENT_STATIC_SIZE(struct agent_rec_api, 56);
AGENT_STATIC_SIZE(struct agent_rec_graph, 48);
AGENT_STATIC_SIZE(struct agent_rec_pm_metrics, 16);
AGENT_STATIC_SIZE(struct agent_rec_pm_sample, 32);
AGENT_STATIC_SIZE(struct agent_nvtx_level, 8);
AGENT_STATIC_SIZE(struct agent_rec_nvtx, 56);
AGENT_STATIC_SIZE(struct agent_rec_py_frame, 32);
AGENT_STATIC_SIZE(struct agent_rec_py_stack, 16);
AGENT_STATIC_SIZE(struct agent_rec_py_launch, 32);
AGENT_STATIC_SIZE(struct agent_rec_py_sample, 24);

/* Round a record size up to the 8-byte record alignment. */
static inline uint32_t agent_rec_align(uint32_t n) { return (n + 7u) & ~7u; }

/* A device's memory bandwidth in bytes/s (agent_device.mem_bandwidth,
 * and NVML's memory_bandwidth stat): DDR, two transfers per clock, as XLA
 * computes it. Wraps rather than traps on a clock no device has. */
static inline uint64_t agent_mem_bandwidth(uint64_t mem_clock_khz, uint64_t bus_width_bits)
{
	return 2ull * mem_clock_khz * 1000ull * bus_width_bits / 8;
}
