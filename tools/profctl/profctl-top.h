/* SPDX-License-Identifier: MIT */
/*
 * profctl-top.h - what `profctl top`'s two files share: the summary of one
 * XSpace file (struct top) that profctl-top-walk.c fills by walking the
 * file and profctl-top.c sorts and prints. One struct top per file, owned
 * by the caller of top_walk(); names in it are views into the file's
 * mapping, valid while the file is open.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strtab.h"
#include "profctl.h" /* ps128 */
#include "xspace-reader.h"

/* Copy directions, the index of struct top's copies[]. */
enum { CP_H2D, CP_D2H, CP_D2D, CP_P2P, CP_OTHER };

struct kernel {
	struct xs_str name;
	uint64_t count;
	ps128 total_ps, min_ps, max_ps;
	double occ_sum;
	uint64_t occ_n;
	char grid[48], block[48];
	bool grid_varies, block_varies;
};

struct proc {
	struct xs_str name;
	uint64_t host_events, launches, kernels;
	ps128 host_ps, kernel_ps;
};

struct copy_dir {
	const char *name;
	uint64_t count, bytes;
	ps128 dur_ps;
};

struct gpu {
	char name[64];
	uint64_t kernels;
	ps128 busy_ps;
	ps128 first_ps, last_ps;
};

struct counter {
	struct xs_str plane, name;
	uint64_t points;
	double min, max, sum, last;
};

/* A launch site: the python_frame of the kernels it launched. */
struct site {
	struct xs_str name;
	uint64_t kernels;
	ps128 ps;
};

struct corr_slot {
	uint64_t key; /* corr + 1; 0 = empty */
	uint32_t proc;
};

struct top {
	struct kernel *k;
	size_t nk, capk;
	struct strtab knames; /* kernel names; id - 1 indexes @k */
	struct proc *p;
	size_t np, capp;
	struct strtab pnames; /* process names; id - 1 indexes @p */
	struct corr_slot *corr;
	size_t ncorr, corr_slots;
	struct copy_dir copies[5];
	struct gpu *g;
	size_t ng, capg;
	int64_t window_ps;
	bool window_from_env;
	ps128 span_lo, span_hi; /* all device events, ps, fallback window */
	char host[256];
	struct counter *cn;
	size_t ncn, capcn;
	struct strtab cnames; /* (plane, counter) keys (counter_index()); id - 1 indexes @cn */
	char *ckey;           /* the key being looked up */
	size_t ckey_cap;
	struct site *s;
	size_t ns, caps;
	struct strtab snames;  /* launch sites; id - 1 indexes @s */
	bool has_python;       /* a GPU plane names python_frame: print the sites */
	struct xs_str *notes[2]; /* [0] XSpace.errors, [1] .warnings (views) */
	size_t nnotes[2], capnotes[2];
};

/* Walk @f into @t (zeroed by the caller): the capture window, hostnames,
 * errors and warnings, host planes, GPU planes. 0, -EBADMSG for a
 * malformed file, -ENOMEM. */
int top_walk(struct xs_file *f, struct top *t);
/* Free what top_walk() allocated in @t (also after it failed). */
void top_free(struct top *t);
