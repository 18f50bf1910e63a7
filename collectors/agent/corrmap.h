/* SPDX-License-Identifier: MIT */
/*
 * corrmap.h - CUPTI correlation id -> what its launch carried (an NVTX
 * range stack, a Python stack id): an exact-key map that forgets the
 * oldest launch first, only when full. [loop thread]
 *
 * Why not a table indexed by `corr % N`: CUPTI numbers EVERY CUDA API call
 * (PyTorch and JAX make 5-20 per kernel), and a kernel's record arrives up
 * to a flush period (100 ms, or a whole capture) after its launch, so a
 * later launch c + k * N overwrote launch c before its kernel came. Here a
 * launch is forgotten only after @cap later ones (or the shared budget
 * below), whatever their ids; ids are any uint32 (a long job wraps), 0
 * means none and is never stored.
 *
 * Design: the entries in insertion order in a ring (key array + value
 * array), indexed by an open-addressing table (linear probing, load at
 * most 1/2, backward-shift deletion: no tombstones). Re-putting a key
 * moves it to the newest end (the launch is the latest with that id); the
 * slot it leaves is a hole in the ring, skipped when the oldest is
 * evicted and squeezed out when the ring is full. The ring starts at 1024
 * slots at the first put and doubles up to the power of two >= @cap, so a
 * process that launches little costs little; put and get are O(1)
 * expected (a full ring is compacted or grown at O(ring) cost, amortized
 * by the slots it frees). Ids are the peer's: the index hashes them
 * with a seed drawn once per process (getrandom()), so that a peer cannot
 * pick ids that share one probe run and make every put scan all of them.
 *
 * Memory: (4 + value size) bytes per ring slot plus 8 per slot of index,
 * i.e. about 12 + value size bytes per entry in steady use, twice that at
 * worst (a peer re-putting keys leaves holes until the next compaction).
 *
 * A shared budget (struct corrmap_share, optional) bounds the entries of
 * every map that names it together: past share->max a map beyond
 * share->floor entries evicts its own oldest instead of growing, so many
 * processes cannot make the daemon hold @cap entries each, while each
 * still keeps at least its last share->floor launches.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The largest value and cap a map takes (init refuses more). */
#define CORRMAP_MAX_VALUE 4096u
#define CORRMAP_MAX_CAP (1u << 24)

struct corrmap_share {
	uint64_t n;     /* entries of all maps naming this share */
	uint64_t max;   /* past it, maps evict their own oldest... */
	uint32_t floor; /* ...once they hold this many */
};

struct corrmap {
	uint32_t *keys;  /* ring_cap slots, oldest at head; 0 = a hole */
	uint8_t *vals;   /* ring_cap * val_size */
	uint32_t *index; /* idx_cap slots: ring slot + 1, 0 = empty */
	size_t val_size;
	uint32_t cap;                /* most entries */
	uint32_t ring_cap;           /* power of two; 0 until the first put */
	uint32_t head, used;         /* used: ring slots from head, holes included */
	uint32_t n;                  /* entries */
	struct corrmap_share *share; /* NULL: none */
	uint64_t seed;               /* mixed into each key's hash */
};

/* An empty map of values of @val_size bytes (1..CORRMAP_MAX_VALUE), at most
 * @cap (1..CORRMAP_MAX_CAP) entries, counted in @share (may be NULL, must
 * outlive the map). Allocates nothing. 0 or -EINVAL. */
int corrmap_init(struct corrmap *m, size_t val_size, uint32_t cap, struct corrmap_share *share);
/* @key -> a copy of @val (val_size bytes), the newest entry; an existing
 * @key's value is replaced. The oldest entry is evicted first when the
 * map holds @cap (or the share is spent). 0, -EINVAL (key 0), -ENOMEM
 * (the map is unchanged but for the old @key, which is gone). */
int corrmap_put(struct corrmap *m, uint32_t key, const void *val);
/* @key's value (valid until the next put or free), NULL when absent or 0. */
const void *corrmap_get(const struct corrmap *m, uint32_t key);
/* Every entry and all memory freed (its entries leave the share); the map
 * stays usable with the same parameters. */
void corrmap_free(struct corrmap *m);
