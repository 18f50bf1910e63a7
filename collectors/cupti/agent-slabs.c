/* SPDX-License-Identifier: MIT */
/*
 * agent-slabs.c - the agent's activity buffers, CUPTI's buffer callbacks,
 * and reading them back (drain, settle).
 *
 * Buffers (the slabs): one mapping of SLAB_COUNT x SLAB_SIZE, each slab
 * FREE (ours, zeroed), CUPTI (handed out) or DONE (queued to drain). The
 * completion callback accepts only a slab of ours that CUPTI holds; any
 * other buffer belongs to another tool that shares the process-wide
 * Activity API (PyTorch's profiler, say): it is counted and left alone.
 * A slab is never handed out twice and never unmapped while CUPTI might
 * still write it: only after cuptiFinalize returned, or never.
 *
 * Threads: CUPTI's callbacks (any thread) and the agent thread share the
 * slab table under g.lock; reading and zeroing a slab is the agent
 * thread's (agent-int.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent-int.h"
#include "nvtx.h"
#include "pystack.h"

static uint8_t *slab_buf(uint32_t i) { return g.region + (size_t)i * SLAB_SIZE; }

/* One more slab past the pool: what a CUPTI older than 12.9 gets instead
 * of a refusal (refusing could crash it). Shared, never read: its records
 * are the ones dropped. */
#define DISCARD SLAB_COUNT
#define REGION_SIZE ((size_t)(SLAB_COUNT + 1) * SLAB_SIZE)

/* The index of a buffer that is one of our slabs, or -1. */
static int slab_of(const uint8_t *b)
{
	uintptr_t off;

	if (!g.region || b < g.region)
		return -1;
	off = (uintptr_t)(b - g.region);
	if (off % SLAB_SIZE || off / SLAB_SIZE > DISCARD)
		return -1;
	return (int)(off / SLAB_SIZE);
}

void CUPTIAPI agent_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *b = NULL;

	pthread_mutex_lock(&g.lock);
	if (g.accepting && g.n_free) {
		uint32_t i = g.free_stack[--g.n_free];

		g.slabs[i].state = SLAB_CUPTI;
		g.slabs[i].seq = ++g.hand_seq;
		g.slabs[i].handed_ns = agent_mono_ns();
		b = slab_buf(i);
	} else {
		if (g.accepting)
			g.declined++; /* CUPTI >= 12.9 accepts a declined buffer and counts the drops */
		if (g.region && g.C.version < CUPTI_DECLINE_OK)
			b = slab_buf(DISCARD);
	}
	pthread_mutex_unlock(&g.lock);
	*buffer = b;
	*size = b ? SLAB_SIZE : 0;
	*max_records = 0;
}

void CUPTIAPI agent_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				      size_t valid)
{
	int i;

	(void)ctx;
	(void)stream;
	(void)size;
	if (!buffer)
		return;
	pthread_mutex_lock(&g.lock);
	i = slab_of(buffer);
	if (i == DISCARD) {
		pthread_mutex_unlock(&g.lock);
		return;
	}
	if (i < 0 || g.slabs[i].state != SLAB_CUPTI) {
		/* Another tool's buffer (the Activity API is per process): not
		 * ours to read, pool or free. */
		pthread_mutex_unlock(&g.lock);
		atomic_fetch_add(&g.foreign, 1);
		return;
	}
	g.slabs[i].state = SLAB_DONE;
	g.slabs[i].valid = valid < SLAB_SIZE ? valid : SLAB_SIZE;
	g.done_ring[(g.done_head + g.n_done) % SLAB_COUNT] = (uint32_t)i;
	g.n_done++; /* each slab is DONE at most once: the ring cannot overflow */
	pthread_mutex_unlock(&g.lock);
	agent_wake();
}

/* Map the slabs (zero pages: CUPTI may skip zeroing them). */
int agent_slabs_map(void)
{
	void *p;

	if (g.region)
		return 0;
	p = mmap(NULL, REGION_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		 -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	pthread_mutex_lock(&g.lock);
	g.region = p;
	g.n_free = g.n_done = g.done_head = 0;
	for (uint32_t i = SLAB_COUNT; i-- > 0;) {
		g.slabs[i] = (struct slab){ .state = SLAB_FREE };
		g.free_stack[g.n_free++] = i;
	}
	pthread_mutex_unlock(&g.lock);
	return 0;
}

/* Unmap the slabs: only once CUPTI cannot touch them (finalized). */
void agent_slabs_unmap(void)
{
	pthread_mutex_lock(&g.lock);
	if (g.region)
		munmap(g.region, REGION_SIZE);
	g.region = NULL;
	g.n_free = g.n_done = g.done_head = 0;
	g.accepting = false;
	pthread_mutex_unlock(&g.lock);
}

/* Slabs CUPTI holds, all or those handed out up to @seq. */
unsigned agent_slabs_held(uint64_t seq)
{
	unsigned n = 0;

	pthread_mutex_lock(&g.lock);
	for (uint32_t i = 0; g.region && i < SLAB_COUNT; i++)
		n += g.slabs[i].state == SLAB_CUPTI && g.slabs[i].seq <= seq;
	pthread_mutex_unlock(&g.lock);
	return n;
}

/* Whether CUPTI holds a slab it was handed before @handed_before_ns. */
bool agent_slabs_stale(uint64_t handed_before_ns)
{
	bool stale = false;

	pthread_mutex_lock(&g.lock);
	for (uint32_t i = 0; g.region && i < SLAB_COUNT && !stale; i++)
		stale = g.slabs[i].state == SLAB_CUPTI && g.slabs[i].handed_ns < handed_before_ns;
	pthread_mutex_unlock(&g.lock);
	return stale;
}

/* Read one completed slab: convert its records while a capture is on
 * (else discard them), then zero it and put it back. The walk needs a live
 * CUPTI; after finalize the records are dropped unread. */
static void drain_slab(uint32_t i, size_t valid)
{
	uint8_t *buf = slab_buf(i);
	CUpti_Activity *rec = NULL;
	bool convert = atomic_load(&g.capturing);
	CUptiResult r = CUPTI_ERROR_MAX_LIMIT_REACHED;

	g.stats.buffers++;
	/* After cuptiFinalize (it may hand back buffers on its way out) the
	 * records are dropped unread: reading them would restart CUPTI. */
	while (valid && agent_cupti_usable() && !atomic_load(&g.finalized) &&
	       (r = g.C.cuptiActivityGetNextRecord(buf, valid, &rec)) == CUPTI_SUCCESS) {
		if (convert)
			agent_conv_record(&g.cv, rec);
		/* Ours to free, read or not; only CUDA 13's Overhead3 has it. */
		if (rec->kind == CUPTI_ACTIVITY_KIND_OVERHEAD && g.C.version >= CUPTI_V13_MIN)
			free(((CUpti_ActivityOverhead3 *)rec)->overheadData);
	}
	/* A forced flush hands over records still being written: the walk
	 * stops at the first one, and whatever follows it is lost. */
	if (r == CUPTI_ERROR_INVALID_KIND && convert)
		g.cut++;
	/* Zeroed for the next hand-out (CUPTI skips it: we said we would).
	 * CUPTI writes records from the start, so past `valid` it is still
	 * zero, unless the walk stopped short on an unfinished record. */
	memset(buf, 0, r == CUPTI_ERROR_MAX_LIMIT_REACHED && valid ? valid : SLAB_SIZE);
	pthread_mutex_lock(&g.lock);
	g.slabs[i].state = SLAB_FREE;
	g.slabs[i].valid = 0;
	g.free_stack[g.n_free++] = i;
	pthread_mutex_unlock(&g.lock);
}

/* Convert and send every completed slab. NVTX and Python stacks first: a
 * launch's stacks are queued at the launch, so they reach profd before the
 * kernel. */
void agent_drain(void)
{
	agent_follow_nvtx();
	agent_nvtx_drain(&g.cv);
	agent_py_drain(&g.cv);
	for (;;) {
		uint32_t i;
		size_t valid;

		pthread_mutex_lock(&g.lock);
		if (!g.n_done) {
			pthread_mutex_unlock(&g.lock);
			break;
		}
		i = g.done_ring[g.done_head];
		g.done_head = (g.done_head + 1) % SLAB_COUNT;
		g.n_done--;
		valid = g.slabs[i].valid;
		pthread_mutex_unlock(&g.lock);
		/* Every launch with a record in this slab queued its Python stack
		 * before CUPTI completed the slab: sent first, profd joins them. */
		agent_py_drain(&g.cv);
		drain_slab(i, valid);
	}
	agent_conv_flush(&g.cv);
}

/* flush(0) and drain until CUPTI gave back every slab it was handed up to
 * @seq, or @ms passed. Never a forced flush: that cuts records still
 * being written. True when they all came back. */
bool agent_settle(uint64_t seq, unsigned ms)
{
	uint64_t deadline = agent_mono_ns() + ms * 1000000ull;

	for (;;) {
		if (!agent_cupti_usable())
			return false;
		g.C.cuptiActivityFlushAll(0);
		agent_drain();
		if (agent_slabs_held(seq) == 0)
			return true;
		if (agent_mono_ns() >= deadline)
			return false;
		usleep(10000);
	}
}
