/* SPDX-License-Identifier: MIT */
/*
 * pywalk-layouts.c - which CPython runs in this process, and where the
 * fields the walker reads lie in its structs.
 *
 * 3.10, 3.11 and 3.12 keep those structs private and publish no offsets:
 * the table below was taken from each version's internal headers (the
 * structs did not move between patch releases of a minor version). 3.13
 * and 3.14 describe themselves in _Py_DebugOffsets, the first field of
 * _PyRuntime (cookie "xdebugpy", PY_VERSION_HEX); its own layout differs
 * between the two, and it lacks a few per-minor constants (the frame owner
 * values, Py_TAG_BITS on 3.14's f_executable, co_flags, the string
 * header), kept here.
 *
 * Refused, with the reason in `why`: other versions, free-threaded builds
 * (another object header, thread-local bytecode) and debug builds
 * (Py_TRACE_REFS puts two pointers before ob_refcnt, Py_REF_DEBUG is its
 * usual companion): their structs would be misread, not read.
 *
 * Every offset is checked once against the running interpreter: the code
 * type's own header, and the main interpreter's first thread state
 * pointing back at its interpreter.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pywalk-int.h"

/* 3.10 - 3.12: the fields, from Include/internal/ of each. */
static const struct pyw_layout table_310 = {
	.minor = 10, .rt_interp = 40, .in_next = 0, .in_threads = 8, .ts_next = 8, .ts_interp = 16, .ts_frame = 24,
	.cf_current = PYW_NONE, .ts_native_id = PYW_NONE, .ts_thread_id = 176,
	.frame_kind = PYW_FRAME_310, .fr_previous = 24, .fr_code = 32, .fr_instr = 96, .fr_owner = PYW_NONE,
	.fr_type = 8, .co_flags = 36, .co_firstlineno = 40, .co_filename = 104, .co_name = 112,
	.co_qualname = PYW_NONE, .co_linetable = 120, .co_code = 48, .co_code_adaptive = PYW_NONE,
	.co_firsttraceable = PYW_NONE, .str_ascii_size = 48, .str_compact_size = 72, .linetable_310 = true,
	.gil_rt = 352, .gil_in = PYW_NONE,
};
static const struct pyw_layout table_311 = {
	.minor = 11, .rt_interp = 48, .in_next = 0, .in_threads = 16, .ts_next = 8, .ts_interp = 16, .ts_frame = 56,
	.cf_current = 8, .ts_native_id = 160, .ts_thread_id = 152, .frame_kind = PYW_FRAME_PREV,
	.fr_previous = 48, .fr_code = 32, .fr_instr = 56, .fr_owner = 69, .fr_type = PYW_NONE,
	.owner_skip = 3, .owner_max = 2, .co_flags = 48, .co_firstlineno = 72, .co_filename = 112,
	.co_name = 120, .co_qualname = 128, .co_linetable = 136, .co_code = PYW_NONE, .co_code_adaptive = 184,
	.co_firsttraceable = 168, .str_ascii_size = 48, .str_compact_size = 72,
	.gil_rt = 360, .gil_in = PYW_NONE,
};
static const struct pyw_layout table_312 = {
	.minor = 12, .rt_interp = 48, .in_next = 0, .in_threads = 72, .ts_next = 8, .ts_interp = 16, .ts_frame = 56,
	.cf_current = 0, .ts_native_id = 144, .ts_thread_id = 136, .frame_kind = PYW_FRAME_PREV,
	.fr_previous = 8, .fr_code = 0, .fr_instr = 56, .fr_owner = 70, .fr_type = PYW_NONE,
	.owner_skip = 3, .owner_max = 3, .co_flags = 48, .co_firstlineno = 68, .co_filename = 112,
	.co_name = 120, .co_qualname = 128, .co_linetable = 136, .co_code = PYW_NONE, .co_code_adaptive = 192,
	.co_firsttraceable = 176, .str_ascii_size = 40, .str_compact_size = 56,
	.gil_rt = PYW_NONE, .gil_in = 384,
};

/* _Py_DebugOffsets, as far as we read it. The groups both 3.13 and 3.14
 * have the same way: */
struct dbg_rt {
	uint64_t size, finalizing, interpreters_head;
};
struct dbg_ts {
	uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id, datastack_chunk, status;
};
struct dbg_tail {
	struct { uint64_t size, ob_type; } ob;
	struct { uint64_t size, tp_name, tp_repr, tp_flags; } type;
	struct { uint64_t size, ob_item, ob_size; } tuple, list;
};
struct dbg_objects {
	struct { uint64_t size, ma_keys, ma_values; } dict;
	struct { uint64_t size, ob_fval; } flt;
	struct { uint64_t size, lv_tag, ob_digit; } lng;
	struct { uint64_t size, ob_size, ob_sval; } bytes;
	struct { uint64_t size, state, length, asciiobject_size; } str;
};

/* 3.13's layout... */
struct dbg313 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct dbg_rt rt;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins, ceval_gil,
			gil, gil_enabled, gil_locked, gil_holder;
	} in;
	struct dbg_ts ts;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner; } fr;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
			localspluskinds, co_code_adaptive;
	} co;
	struct dbg_tail t;
	struct dbg_objects o;
};

/* ... and 3.14's: threads_main, the tlbc and generation fields, the
 * frame's stackpointer, a set group before dict. */
struct dbg314 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct dbg_rt rt;
	struct {
		uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict, builtins,
			ceval_gil, gil, gil_enabled, gil_locked, gil_holder, code_object_generation,
			tlbc_generation;
	} in;
	struct dbg_ts ts;
	struct { uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer, tlbc_index; } fr;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames,
			localspluskinds, co_code_adaptive, co_tlbc;
	} co;
	struct dbg_tail t;
	struct { uint64_t size, used, table, mask; } set;
	struct dbg_objects o;
};

/* The debug offsets' groups as both versions share them. */
struct dbg_view {
	uint64_t version, free_threaded;
	uint64_t rt_size, rt_head, in_size, in_next, in_threads, ts_size, ts_next, ts_interp, ts_frame,
		ts_native, ts_thread_id, fr_size, fr_previous, fr_exec, fr_instr, fr_owner, co_size, co_filename,
		co_name, co_qualname, co_linetable, co_firstlineno, co_adaptive, ob_type, bytes_sval,
		str_state, str_length, str_ascii;
};

#define VIEW_FROM(d, v)                                                                                 \
	do {                                                                                            \
		(v)->version = (d)->version;                                                            \
		(v)->free_threaded = (d)->free_threaded;                                                \
		(v)->rt_size = (d)->rt.size;                                                            \
		(v)->rt_head = (d)->rt.interpreters_head;                                               \
		(v)->in_size = (d)->in.size;                                                            \
		(v)->in_next = (d)->in.next;                                                            \
		(v)->in_threads = (d)->in.threads_head;                                                 \
		(v)->ts_size = (d)->ts.size;                                                            \
		(v)->ts_next = (d)->ts.next;                                                            \
		(v)->ts_interp = (d)->ts.interp;                                                        \
		(v)->ts_frame = (d)->ts.current_frame;                                                  \
		(v)->ts_native = (d)->ts.native_thread_id;                                              \
		(v)->ts_thread_id = (d)->ts.thread_id;                                                  \
		(v)->fr_size = (d)->fr.size;                                                            \
		(v)->fr_previous = (d)->fr.previous;                                                    \
		(v)->fr_exec = (d)->fr.executable;                                                      \
		(v)->fr_instr = (d)->fr.instr_ptr;                                                      \
		(v)->fr_owner = (d)->fr.owner;                                                          \
		(v)->co_size = (d)->co.size;                                                            \
		(v)->co_filename = (d)->co.filename;                                                    \
		(v)->co_name = (d)->co.name;                                                            \
		(v)->co_qualname = (d)->co.qualname;                                                    \
		(v)->co_linetable = (d)->co.linetable;                                                  \
		(v)->co_firstlineno = (d)->co.firstlineno;                                              \
		(v)->co_adaptive = (d)->co.co_code_adaptive;                                            \
		(v)->ob_type = (d)->t.ob.ob_type;                                                       \
		(v)->bytes_sval = (d)->o.bytes.ob_sval;                                                 \
		(v)->str_state = (d)->o.str.state;                                                      \
		(v)->str_length = (d)->o.str.length;                                                    \
		(v)->str_ascii = (d)->o.str.asciiobject_size;                                           \
	} while (0)

/* Every offset lies inside its struct, every struct is of a sane size. */
static bool within(uint64_t off, uint64_t need, uint64_t size)
{
	return size <= (1u << 20) && off <= size && need <= size - off;
}

static int from_debug_offsets(struct pyw_layout *l, unsigned minor, char *why, size_t why_len)
{
	union {
		struct dbg313 a;
		struct dbg314 b;
	} d;
	struct dbg_view v;
	size_t len = minor == 13 ? sizeof d.a : sizeof d.b;

	if (pyw_read(pyw_state.runtime, &d, len) != 0 || memcmp(d.a.cookie, "xdebugpy", 8) != 0) {
		snprintf(why, why_len, "Python %s without _Py_DebugOffsets", pyw_state.version);
		return -ENOTSUP;
	}
	if (minor == 13)
		VIEW_FROM(&d.a, &v);
	else
		VIEW_FROM(&d.b, &v);
	if ((v.version >> 16) != (0x0300u | minor)) {
		snprintf(why, why_len, "Python %s with debug offsets of version %#llx", pyw_state.version,
			 (unsigned long long)v.version);
		return -ENOTSUP;
	}
	if (v.free_threaded) {
		snprintf(why, why_len, "free-threaded Python %s", pyw_state.version);
		return -ENOTSUP;
	}
	if (!within(v.rt_head, 8, v.rt_size) || !within(v.in_next, 8, v.in_size) ||
	    !within(v.in_threads, 8, v.in_size) || !within(v.ts_next, 8, v.ts_size) ||
	    !within(v.ts_interp, 8, v.ts_size) || !within(v.ts_frame, 8, v.ts_size) ||
	    !within(v.ts_native, 8, v.ts_size) || !within(v.ts_thread_id, 8, v.ts_size) ||
	    !within(v.fr_previous, 8, v.fr_size) || !within(v.fr_exec, 8, v.fr_size) ||
	    !within(v.fr_instr, 8, v.fr_size) || !within(v.fr_owner, 1, v.fr_size) ||
	    !within(v.co_filename, 8, v.co_size) || !within(v.co_name, 8, v.co_size) ||
	    !within(v.co_qualname, 8, v.co_size) || !within(v.co_linetable, 8, v.co_size) ||
	    !within(v.co_firstlineno, 4, v.co_size) || v.co_adaptive > v.co_size || v.co_adaptive < 64 ||
	    v.co_size - v.co_adaptive > 16 ||
	    v.ob_type != 8 || v.bytes_sval != 32 || v.str_ascii > 128 || v.str_state + 4 > v.str_ascii ||
	    v.str_length + 8 > v.str_ascii) {
		snprintf(why, why_len, "Python %s with unexpected _Py_DebugOffsets", pyw_state.version);
		return -ENOTSUP;
	}
	*l = (struct pyw_layout){
		.minor = minor,
		.rt_interp = (uint32_t)v.rt_head,
		.rt_interp_tail = true,
		.in_next = (uint32_t)v.in_next,
		.in_threads = (uint32_t)v.in_threads,
		.ts_next = (uint32_t)v.ts_next,
		.ts_interp = (uint32_t)v.ts_interp,
		.ts_frame = (uint32_t)v.ts_frame,
		.cf_current = PYW_NONE,
		.ts_native_id = (uint32_t)v.ts_native,
		.ts_thread_id = (uint32_t)v.ts_thread_id,
		.frame_kind = PYW_FRAME_INSTR,
		.fr_previous = (uint32_t)v.fr_previous,
		.fr_code = (uint32_t)v.fr_exec,
		.fr_instr = (uint32_t)v.fr_instr,
		.fr_owner = (uint32_t)v.fr_owner,
		.fr_type = PYW_NONE,
		/* 3.13: FRAME_OWNED_BY_CSTACK = 3; 3.14: INTERPRETER = 3, CSTACK = 4. */
		.owner_skip = 3,
		.owner_max = minor == 13 ? 3 : 4,
		/* 3.14 tags f_executable (a _PyStackRef) in its low bit. */
		.exec_tag_mask = minor >= 14 ? 3u : 0u,
		/* Not in the debug offsets: PyObject_VAR_HEAD and three pointers
		 * precede co_flags since 3.11. */
		.co_flags = 48,
		.co_firstlineno = (uint32_t)v.co_firstlineno,
		.co_filename = (uint32_t)v.co_filename,
		.co_name = (uint32_t)v.co_name,
		.co_qualname = (uint32_t)v.co_qualname,
		.co_linetable = (uint32_t)v.co_linetable,
		.co_code = PYW_NONE,
		.co_code_adaptive = (uint32_t)v.co_adaptive,
		/* `int _co_firsttraceable; void *co_extra;` end the header (3.13). */
		.co_firsttraceable = minor == 13 ? (uint32_t)v.co_adaptive - 16 : PYW_NONE,
		.str_ascii_size = (uint32_t)v.str_ascii,
		/* PyCompactUnicodeObject adds utf8_length and utf8 (3.12+). */
		.str_compact_size = (uint32_t)v.str_ascii + 16,
		.str_state = (uint32_t)v.str_state,
		.str_length = (uint32_t)v.str_length,
		.gil_rt = PYW_NONE,
		.gil_in = PYW_NONE,
	};
	/* 3.13's GIL struct is 3.12's (its header): taken when the offsets
	 * agree on where its holder and lock lie. 3.14's is not known here. */
	if (minor == 13 && within(d.a.in.ceval_gil, 8, v.in_size) && d.a.in.gil_holder == d.a.in.gil + PYW_GIL_HOLDER &&
	    d.a.in.gil_locked == d.a.in.gil + 16)
		l->gil_in = (uint32_t)d.a.in.ceval_gil;
	return 0;
}

static bool parse_version(const char *s, unsigned *major, unsigned *minor, unsigned *micro)
{
	return s && sscanf(s, "%u.%u.%u", major, minor, micro) == 3;
}

/* 3.10's only thread id is the pthread_t; glibc's struct pthread keeps the
 * kernel's tid at a fixed offset, found here once on this thread (whose
 * tid differs from the pid: the agent thread is never the main thread,
 * and on the main thread a match is only a candidate). */
static void find_pthread_tid(void)
{
	pyw_state.pthread_tid_off = PYW_NONE;
	int32_t words[512];
	pid_t tid = (pid_t)syscall(SYS_gettid);
	if (pyw_read((uintptr_t)pthread_self(), words, sizeof words) != 0)
		return;
	for (uint32_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		if (words[i] == tid) {
			pyw_state.pthread_tid_off = i * 4;
			return;
		}
	}
}

static void *sym(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

struct segment {
	uintptr_t addr, lo, hi;
	const char *name;
	unsigned index;
};

static int segment_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct segment *s = data;
	(void)size;
	for (unsigned i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_R) && s->addr >= lo &&
		    s->addr - lo < ph->p_memsz) {
			s->lo = lo;
			s->hi = lo + ph->p_memsz;
			s->name = info->dlpi_name;
			return 1;
		}
	}
	s->index++;
	return 0;
}

/* pyw_state.static_lo/hi: the segment holding _PyRuntime, where it stays
 * mapped. The main program (listed first) is never unloaded; a libpython
 * is made undeletable (RTLD_NODELETE: a dlclose() leaves it mapped), or
 * nothing is trusted. */
static void find_static(void)
{
	struct segment s = {.addr = pyw_state.runtime};
	if (dl_iterate_phdr(segment_cb, &s) != 1 || !s.lo)
		return;
	if (s.index > 0 && (!s.name || !*s.name || !dlopen(s.name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE)))
		return;
	pyw_state.static_lo = s.lo;
	pyw_state.static_hi = s.hi;
}

/* The main interpreter and one of its thread states must agree. */
static int check_threads(char *why, size_t why_len)
{
	const struct pyw_layout *l = &pyw_state.l;
	uint64_t interp = 0, ts = 0, back = 0;
	if (pyw_read(pyw_state.runtime + l->rt_interp, &interp, 8) != 0)
		goto bad;
	for (int i = 0; l->rt_interp_tail && interp && i < 4096; i++) {
		uint64_t next = 0;
		if (pyw_read(interp + l->in_next, &next, 8) != 0)
			goto bad;
		if (!next)
			break;
		interp = next;
	}
	if (!interp)
		return 0; /* not initialized (yet, or any more): nothing to check */
	if (pyw_read(interp + l->in_threads, &ts, 8) != 0)
		goto bad;
	if (!ts)
		return 0;
	if (pyw_read(ts + l->ts_interp, &back, 8) != 0 || back != interp)
		goto bad;
	return 0;
bad:
	snprintf(why, why_len, "Python %s with an interpreter state we cannot read", pyw_state.version);
	return -ENOTSUP;
}

int pyw_layout_find(char *why, size_t why_len)
{
	void *gil = sym("PyGILState_GetThisThreadState");
	memcpy(&pyw_state.gilstate, &gil, sizeof gil);
	void *runtime = sym("_PyRuntime");
	pyw_state.code_type = (uintptr_t)sym("PyCode_Type");
	pyw_state.frame_type = (uintptr_t)sym("PyFrame_Type");
	pyw_state.unicode_type = (uintptr_t)sym("PyUnicode_Type");
	pyw_state.bytes_type = (uintptr_t)sym("PyBytes_Type");
	uintptr_t type_type = (uintptr_t)sym("PyType_Type");
	if (!pyw_state.gilstate || !runtime || !pyw_state.code_type || !pyw_state.unicode_type ||
	    !pyw_state.bytes_type || !type_type)
		return -ENOENT;
	pyw_state.runtime = (uintptr_t)runtime;

	unsigned major = 0, minor = 0, micro = 0;
	const unsigned long *hex = sym("Py_Version");
	if (hex) {
		major = (unsigned)(*hex >> 24) & 0xff;
		minor = (unsigned)(*hex >> 16) & 0xff;
		micro = (unsigned)(*hex >> 8) & 0xff;
	} else {
		/* Before 3.11: the version string is a constant Py_GetVersion()
		 * formats once; it takes no lock and needs no thread state. */
		const char *(*get)(void);
		void *g = sym("Py_GetVersion");
		memcpy(&get, &g, sizeof g);
		if (!get || !parse_version(get(), &major, &minor, &micro))
			return -ENOENT;
	}
	snprintf(pyw_state.version, sizeof pyw_state.version, "%u.%u.%u", major, minor, micro);

	if (sym("_Py_NegativeRefcount") || sym("_Py_GetRefTotal") || sym("_Py_GetGlobalRefTotal") ||
	    sym("_Py_ForgetReference")) {
		snprintf(why, why_len, "debug build of Python %s", pyw_state.version);
		return -ENOTSUP;
	}
	int rc = 0;
	if (major != 3 || minor < 10 || minor > 14) {
		snprintf(why, why_len, "Python %s", pyw_state.version);
		return -ENOTSUP;
	}
	if (minor == 10)
		pyw_state.l = table_310;
	else if (minor == 11)
		pyw_state.l = table_311;
	else if (minor == 12)
		pyw_state.l = table_312;
	else
		rc = from_debug_offsets(&pyw_state.l, minor, why, why_len);
	if (rc < 0)
		return rc;
	struct pyw_layout *l = &pyw_state.l;
	l->hexversion = (uint32_t)(major << 24 | minor << 16 | micro << 8);
	l->ob_type = 8;
	l->var_size = 16;
	l->bytes_sval = 32;
	if (minor < 13) {
		l->str_length = 16;
		l->str_state = 32;
	}

	/* The object header as we read it: PyCode_Type is a PyTypeObject whose
	 * ob_type is PyType_Type and whose tp_name (after PyObject_VAR_HEAD)
	 * is "code". A header with extra fields (Py_TRACE_REFS) fails here. */
	uintptr_t t = 0, name = 0;
	char tpname[8] = {0};
	if (pyw_read(pyw_state.code_type + l->ob_type, &t, 8) != 0 || t != type_type ||
	    pyw_read(pyw_state.code_type + 24, &name, 8) != 0 || pyw_read(name, tpname, 5) != 0 ||
	    memcmp(tpname, "code", 5) != 0) {
		snprintf(why, why_len, "Python %s with an object header we do not know", pyw_state.version);
		return -ENOTSUP;
	}

	/* Bytes each walk copies of a frame, a code object, a thread state. */
	uint32_t fr = l->fr_previous > l->fr_code ? l->fr_previous : l->fr_code;
	fr = fr > l->fr_instr ? fr : l->fr_instr;
	l->frame_span = fr + 8;
	if (l->fr_owner != PYW_NONE && l->fr_owner + 1 > l->frame_span)
		l->frame_span = l->fr_owner + 1;
	uint32_t co = l->co_filename;
	uint32_t fields[] = {l->co_name,  l->co_qualname,	l->co_linetable,     l->co_flags,
			     l->co_firstlineno, l->co_code, l->co_firsttraceable};
	for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
		if (fields[i] != PYW_NONE && fields[i] > co)
			co = fields[i];
	l->code_span = co + 8;
	uint32_t ts = l->ts_next > l->ts_frame ? l->ts_next : l->ts_frame;
	ts = ts > l->ts_thread_id ? ts : l->ts_thread_id;
	if (l->ts_native_id != PYW_NONE && l->ts_native_id > ts)
		ts = l->ts_native_id;
	l->tstate_span = ts + 8;
	if (minor == 10)
		find_pthread_tid();
	find_static();
	return check_threads(why, why_len);
}
