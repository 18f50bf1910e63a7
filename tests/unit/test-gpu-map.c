/* SPDX-License-Identifier: MIT */
/* gpu_map: one /device:GPU:<n> number per physical GPU, by UUID. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu-map.h"
#include "harness.h"

/* About 50 KB: on the heap, zeroed as the daemon's is. */
static struct gpu_map *map_new(void)
{
	struct gpu_map *m = calloc(1, sizeof(*m));

	if (!m)
		TEST_FAIL("calloc");
	return m;
}

TEST(gpu_map_numbers_by_uuid_in_first_seen_order)
{
	struct gpu_map *m = map_new();

	ASSERT_EQ(gpu_map_id(m, "GPU-aaaa", NULL, NULL), 0);
	ASSERT_EQ(gpu_map_id(m, "GPU-bbbb", NULL, NULL), 1);
	/* An agent whose "device 0" is the second GPU (CUDA_VISIBLE_DEVICES=1)
	 * lands on the same plane as NVML's entry for it. */
	ASSERT_EQ(gpu_map_id(m, "GPU-bbbb", NULL, NULL), 1);
	ASSERT_EQ(gpu_map_id(m, "GPU-aaaa", NULL, NULL), 0);
	ASSERT_EQ(gpu_map_id(m, "GPU-cccc", NULL, NULL), 2);
	ASSERT_EQ(m->n, 3);
	ASSERT_STREQ(gpu_map_get(m, 1)->uuid, "GPU-bbbb");
	ASSERT_TRUE(gpu_map_get(m, 3) == NULL);
	free(m);
}

TEST(gpu_map_uuid_prefix_is_a_different_gpu)
{
	struct gpu_map *m = map_new();

	ASSERT_EQ(gpu_map_id(m, "GPU-abc", NULL, NULL), 0);
	ASSERT_EQ(gpu_map_id(m, "GPU-ab", NULL, NULL), 1);
	ASSERT_EQ(gpu_map_id(m, "GPU-abcd", NULL, NULL), 2);
	free(m);
}

TEST(gpu_map_pci_and_name_filled_in_when_known_and_kept)
{
	struct gpu_map *m = map_new();
	const struct gpu_map_entry *e;

	/* An agent reports the UUID first, without PCI id or name. */
	ASSERT_EQ(gpu_map_id(m, "GPU-aaaa", NULL, NULL), 0);
	e = gpu_map_get(m, 0);
	ASSERT_STREQ(e->pci_bus_id, "");
	ASSERT_STREQ(e->name, "");
	/* A later source knows them: filled in, same number. */
	ASSERT_EQ(gpu_map_id(m, "GPU-aaaa", "00000000:18:00.0", "NVIDIA H100 80GB HBM3"), 0);
	ASSERT_STREQ(e->pci_bus_id, "00000000:18:00.0");
	ASSERT_STREQ(e->name, "NVIDIA H100 80GB HBM3");
	/* A source that knows less (NULL or "") does not erase them. */
	ASSERT_EQ(gpu_map_id(m, "GPU-aaaa", "", NULL), 0);
	ASSERT_STREQ(e->pci_bus_id, "00000000:18:00.0");
	ASSERT_STREQ(e->name, "NVIDIA H100 80GB HBM3");
	/* Only the one entry. */
	ASSERT_EQ(m->n, 1);
	free(m);
}

TEST(gpu_map_overlong_name_is_truncated_not_overflowed)
{
	struct gpu_map *m = map_new();
	char name[300];

	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = 0;
	ASSERT_EQ(gpu_map_id(m, "GPU-aaaa", NULL, name), 0);
	ASSERT_EQ(strlen(gpu_map_get(m, 0)->name), sizeof(m->e[0].name) - 1);
	free(m);
}

TEST(gpu_map_rejects_empty_and_overlong_uuids)
{
	struct gpu_map *m = map_new();
	char uuid[GPU_UUID_MAX + 1];

	ASSERT_EQ(gpu_map_id(m, NULL, NULL, NULL), -EINVAL);
	ASSERT_EQ(gpu_map_id(m, "", "00000000:18:00.0", NULL), -EINVAL);
	memset(uuid, 'a', GPU_UUID_MAX);
	uuid[GPU_UUID_MAX] = 0;
	ASSERT_EQ(gpu_map_id(m, uuid, NULL, NULL), -EINVAL);
	/* The longest that fits is fine. */
	uuid[GPU_UUID_MAX - 1] = 0;
	ASSERT_EQ(gpu_map_id(m, uuid, NULL, NULL), 0);
	ASSERT_EQ(m->n, 1);
	free(m);
}

TEST(gpu_map_full_gives_enospc_and_keeps_known_gpus)
{
	struct gpu_map *m = map_new();
	char uuid[32];

	for (int i = 0; i < GPU_MAP_MAX; i++) {
		snprintf(uuid, sizeof(uuid), "GPU-%04d", i);
		ASSERT_EQ(gpu_map_id(m, uuid, NULL, NULL), i);
	}
	ASSERT_EQ(gpu_map_id(m, "GPU-one-too-many", NULL, NULL), -ENOSPC);
	ASSERT_EQ(m->n, GPU_MAP_MAX);
	/* Numbers already handed out still resolve. */
	ASSERT_EQ(gpu_map_id(m, "GPU-0000", NULL, NULL), 0);
	ASSERT_EQ(gpu_map_id(m, "GPU-0255", NULL, NULL), GPU_MAP_MAX - 1);
	free(m);
}

TEST(gpu_map_complete_refuses_unknown_gpu)
{
	struct gpu_map *m = map_new();

	/* NVML listed every GPU of the machine ... */
	ASSERT_EQ(gpu_map_id(m, "GPU-aaaa", "00000000:18:00.0", "H100"), 0);
	ASSERT_EQ(gpu_map_id(m, "GPU-bbbb", "00000000:2a:00.0", "H100"), 1);
	m->complete = true;
	/* ... so an agent naming another one is wrong (or a MIG instance),
	 * and gets no plane of its own. */
	ASSERT_EQ(gpu_map_id(m, "GPU-zzzz", NULL, NULL), -ENOENT);
	ASSERT_EQ(m->n, 2);
	/* Listed GPUs still resolve and still learn details. */
	ASSERT_EQ(gpu_map_id(m, "GPU-bbbb", NULL, "NVIDIA H100"), 1);
	ASSERT_STREQ(gpu_map_get(m, 1)->name, "NVIDIA H100");
	free(m);
}

TEST_MAIN()
