/* SPDX-License-Identifier: MIT */
/*
 * gpu-map.h - one plane number per physical GPU, whoever reports it.
 *
 * NVML (at daemon start, in NVML index order = PCI bus order) and every
 * agent (per process, whatever CUDA_VISIBLE_DEVICES made its "device 0")
 * name GPUs by UUID. The map hands out /device:GPU:<n> numbers by UUID, so
 * the same physical GPU lands on the same plane for every source and for
 * every capture of this daemon's life. Numbers are never reused.
 * [loop thread]
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define GPU_MAP_MAX 256
#define GPU_UUID_MAX 64

struct gpu_map_entry {
	char uuid[GPU_UUID_MAX];   /* "GPU-8c1b..." as NVML and CUDA print it */
	char pci_bus_id[32];       /* "00000000:18:00.0", may be empty */
	char name[96];             /* "NVIDIA H100 80GB HBM3", may be empty */
	bool by_uid;               /* added by an agent of uid @uid (gpu_map_id_for_uid()) */
	uint32_t uid;
};

struct gpu_map {
	struct gpu_map_entry e[GPU_MAP_MAX];
	uint32_t n;
	bool complete; /* set by NVML: every GPU of this machine is listed */
};

/* The plane number of @uuid, registering it if new (@pci_bus_id and
 * @name may be NULL and are filled in when later known). -ENOSPC past
 * GPU_MAP_MAX, -EINVAL for an empty uuid, -ENOENT for a uuid that is not
 * listed once the map is complete. */
int gpu_map_id(struct gpu_map *m, const char *uuid, const char *pci_bus_id, const char *name);
/* gpu_map_id(), for an agent of @uid: a UUID not in the map yet is added
 * only while @uid has added fewer than @max_per_uid (-EDQUOT past it). The
 * count is per uid for the daemon's life (entries are never removed), so
 * a process that reconnects, or many processes of one user, get no fresh
 * allowance. */
int gpu_map_id_for_uid(struct gpu_map *m, const char *uuid, const char *pci_bus_id, const char *name,
		       uint32_t uid, uint32_t max_per_uid);
/* How many entries agents of @uid added. */
uint32_t gpu_map_added_by(const struct gpu_map *m, uint32_t uid);
/* The plane number of @uuid if it is registered, else -ENOENT. */
int gpu_map_find(const struct gpu_map *m, const char *uuid);
/* The entry for plane @id, NULL if none. */
const struct gpu_map_entry *gpu_map_get(const struct gpu_map *m, uint32_t id);
