/* SPDX-License-Identifier: MIT */
/*
 * pywalk-lines.c - pyw_resolve(): a code object's file, function, first
 * line and the line executing, off the hot path.
 *
 * Every read is fault-safe (pyw_read): the code object may have been freed
 * since the walk. It must still be a code object with the fingerprint the
 * walk took (f->check), else -ESTALE. Strings are taken only from compact
 * str objects (ob_type checked, length bounded), ASCII as is, Latin-1,
 * UCS-2 and UCS-4 re-encoded as UTF-8, cut at a character boundary.
 *
 * Line tables, both walked from co_firstlineno:
 *   3.10  co_linetable: (byte delta, signed line delta) pairs over byte
 *         offsets of the bytecode; a line delta of -128 means "no line"
 *   3.11+ the location table: entries of (code units covered, a kind in
 *         bits 3-6, varint-coded line delta and columns), kind 15 "no
 *         location" (Objects/locations.md in CPython)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "pywalk-int.h"

/* A line table longer than this is not believed. */
#define LINETABLE_MAX (4u << 20)
/* A str longer than this is not believed (we keep at most 255 bytes). */
#define STR_MAX (1u << 20)

/* Bytes of a bytes object, read in chunks through pyw_read(). */
struct breader {
	uintptr_t data;
	size_t len, pos, lo, n;
	bool fault;
	unsigned char buf[256];
};

static int next_byte(struct breader *r)
{
	if (r->pos >= r->len || r->fault)
		return -1;
	if (r->pos < r->lo || r->pos >= r->lo + r->n) {
		size_t n = r->len - r->pos < sizeof r->buf ? r->len - r->pos : sizeof r->buf;
		if (pyw_read(r->data + r->pos, r->buf, n) != 0) {
			r->fault = true;
			return -1;
		}
		r->lo = r->pos;
		r->n = n;
	}
	return r->buf[r->pos++ - r->lo];
}

/* Locations' varints: 6 bits a byte, little end first, 0x40 = more. */
static int64_t varint(struct breader *r)
{
	int b = next_byte(r);
	if (b < 0)
		return -1;
	uint64_t v = (unsigned)b & 63;
	for (unsigned shift = 6; b & 64; shift += 6) {
		if ((b = next_byte(r)) < 0 || shift > 30)
			return -1;
		v |= (uint64_t)((unsigned)b & 63) << shift;
	}
	return (int64_t)v;
}

static bool svarint(struct breader *r, int64_t *out)
{
	int64_t v = varint(r);
	if (v < 0)
		return false;
	*out = (v & 1) ? -(v >> 1) : (v >> 1);
	return true;
}

static int line_310(struct breader *r, int64_t line, uint64_t target)
{
	uint64_t end = 0;
	for (;;) {
		int sdelta = next_byte(r), ldelta = next_byte(r);
		if (sdelta < 0 || ldelta < 0)
			return -1;
		uint64_t start = end;
		end += (unsigned)sdelta;
		int8_t ld = (int8_t)ldelta;
		if (ld != -128)
			line += ld;
		if (target >= start && target < end)
			return ld == -128 || line < 0 || line > INT32_MAX ? -1 : (int)line;
	}
}

static int line_311(struct breader *r, int64_t line, uint64_t target)
{
	uint64_t addr = 0;
	for (;;) {
		int b = next_byte(r);
		if (b < 0 || !(b & 0x80))
			return -1;
		unsigned kind = ((unsigned)b >> 3) & 15, units = ((unsigned)b & 7) + 1;
		int64_t delta = 0;
		bool none = false;
		if (kind == 15) {
			none = true;
		} else if (kind == 14) {
			/* line delta, end line delta, column + 1, end column + 1 */
			if (!svarint(r, &delta) || varint(r) < 0 || varint(r) < 0 || varint(r) < 0)
				return -1;
		} else if (kind == 13) {
			if (!svarint(r, &delta))
				return -1;
		} else if (kind >= 10) {
			delta = kind - 10;
			if (next_byte(r) < 0 || next_byte(r) < 0)
				return -1;
		} else if (next_byte(r) < 0) {
			return -1;
		}
		line += delta;
		if (target >= addr && target < addr + units)
			return none || line < 0 || line > INT32_MAX ? -1 : (int)line;
		addr += units;
	}
}

int pyw_code_line(const unsigned char *code, uint32_t instr)
{
	const struct pyw_layout *l = &pyw_state.l;
	uintptr_t table = pyw_ld64(code, l->co_linetable);
	unsigned char hdr[40];
	if (table < 4096 || (table & 7) || pyw_read(table, hdr, l->bytes_sval) != 0 ||
	    pyw_ld64(hdr, l->ob_type) != pyw_state.bytes_type)
		return -1;
	uint64_t len = pyw_ld64(hdr, l->var_size);
	if (len > LINETABLE_MAX)
		return -1;
	struct breader r = {.data = table + l->bytes_sval, .len = len};
	int64_t first = (int32_t)pyw_ld32(code, l->co_firstlineno);
	/* 3.10 counts bytes, 3.11+ code units. */
	return l->linetable_310 ? line_310(&r, first, (uint64_t)instr * 2) : line_311(&r, first, instr);
}

/* Append code point @cp to @dst (size @cap, NUL kept) as UTF-8. */
static bool put_utf8(char *dst, size_t cap, size_t *at, uint32_t cp)
{
	unsigned char u[4];
	size_t n;
	if (cp < 0x80) {
		u[0] = (unsigned char)(cp ? cp : '?');
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | cp >> 6);
		u[1] = (unsigned char)(0x80 | (cp & 63));
		n = 2;
	} else if (cp < 0x10000) {
		if (cp >= 0xd800 && cp < 0xe000)
			cp = 0xfffd; /* a lone surrogate */
		u[0] = (unsigned char)(0xe0 | cp >> 12);
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
		u[2] = (unsigned char)(0x80 | (cp & 63));
		n = 3;
	} else if (cp < 0x110000) {
		u[0] = (unsigned char)(0xf0 | cp >> 18);
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 63));
		u[3] = (unsigned char)(0x80 | (cp & 63));
		n = 4;
	} else {
		return put_utf8(dst, cap, at, 0xfffd);
	}
	if (*at + n + 1 > cap)
		return false;
	memcpy(dst + *at, u, n);
	*at += n;
	return true;
}

/* The str at @obj as UTF-8 into @dst. 0 or -EFAULT (dst = ""). */
static int read_str(uintptr_t obj, char *dst, size_t cap)
{
	const struct pyw_layout *l = &pyw_state.l;
	unsigned char h[128];
	dst[0] = '\0';
	if (obj < 4096 || (obj & 7) || pyw_read(obj, h, l->str_ascii_size) != 0 ||
	    pyw_ld64(h, l->ob_type) != pyw_state.unicode_type)
		return -EFAULT;
	uint64_t length = pyw_ld64(h, l->str_length);
	uint32_t state = pyw_ld32(h, l->str_state);
	/* state: interned:2, kind:3, compact:1, ascii:1 */
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (length > STR_MAX || !compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1))
		return -EFAULT;
	uintptr_t data = obj + (ascii ? l->str_ascii_size : l->str_compact_size);
	size_t at = 0;
	unsigned char chunk[256];
	for (uint64_t i = 0; i < length;) {
		uint64_t n = (sizeof chunk / kind < length - i) ? sizeof chunk / kind : length - i;
		if (pyw_read(data + i * kind, chunk, n * kind) != 0) {
			dst[0] = '\0';
			return -EFAULT;
		}
		for (uint64_t k = 0; k < n; k++) {
			uint32_t cp = kind == 1 ? chunk[k] : kind == 2 ? (uint32_t)pyw_ld32(chunk, (uint32_t)(k * 2)) & 0xffff
								       : pyw_ld32(chunk, (uint32_t)(k * 4));
			if (!put_utf8(dst, cap, &at, cp)) {
				dst[at] = '\0';
				return 0;
			}
		}
		i += n;
	}
	dst[at] = '\0';
	return 0;
}

int pyw_resolve(const struct pyw_raw *f, struct pyw_loc *loc)
{
	const struct pyw_layout *l = &pyw_state.l;
	unsigned char c[PYW_CODE_BUF];
	memset(loc, 0, sizeof *loc);
	if (!pyw_ready())
		return -ENOTSUP;
	/* Off the hot path: bring the range cache up to date for it. */
	pyw_maps_refresh(false);
	if (f->code < 4096 || (f->code & 7) || pyw_read(f->code, c, l->code_span) != 0)
		return -EFAULT;
	if (pyw_ld64(c, l->ob_type) != pyw_state.code_type || pyw_code_check(c) != f->check)
		return -ESTALE;
	uintptr_t name = pyw_ld64(c, l->co_qualname != PYW_NONE ? l->co_qualname : l->co_name);
	if (read_str(pyw_ld64(c, l->co_filename), loc->file, sizeof loc->file) < 0 ||
	    read_str(name, loc->name, sizeof loc->name) < 0)
		return -EFAULT;
	int32_t first = (int32_t)pyw_ld32(c, l->co_firstlineno);
	loc->firstlineno = first > 0 ? (uint32_t)first : 0;
	if (pyw_ld32(c, l->co_flags) & PYW_CO_GENERATOR_ANY)
		loc->flags |= PYW_LOC_GENERATOR;
	int line = pyw_code_line(c, f->instr);
	if (line < 0) {
		loc->line = loc->firstlineno;
		loc->flags |= PYW_LOC_LINE_UNKNOWN;
	} else {
		loc->line = (uint32_t)line;
	}
	return 0;
}
