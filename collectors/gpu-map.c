/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpu-map.h"

static void set_if(char *dst, size_t size, const char *src)
{
	if (src && src[0])
		snprintf(dst, size, "%s", src);
}

int gpu_map_id(struct gpu_map *m, const char *uuid, const char *pci_bus_id, const char *name)
{
	uint32_t i;

	if (!uuid || !uuid[0] || strlen(uuid) >= GPU_UUID_MAX)
		return -EINVAL;
	for (i = 0; i < m->n; i++)
		if (strcmp(m->e[i].uuid, uuid) == 0)
			break;
	if (i == m->n) {
		if (m->complete)
			return -ENOENT;
		if (m->n >= GPU_MAP_MAX)
			return -ENOSPC;
		memset(&m->e[i], 0, sizeof(m->e[i]));
		snprintf(m->e[i].uuid, sizeof(m->e[i].uuid), "%s", uuid);
		m->n++;
	}
	set_if(m->e[i].pci_bus_id, sizeof(m->e[i].pci_bus_id), pci_bus_id);
	set_if(m->e[i].name, sizeof(m->e[i].name), name);
	return (int)i;
}

uint32_t gpu_map_added_by(const struct gpu_map *m, uint32_t uid)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < m->n; i++)
		n += m->e[i].by_uid && m->e[i].uid == uid;
	return n;
}

int gpu_map_id_for_uid(struct gpu_map *m, const char *uuid, const char *pci_bus_id, const char *name,
		       uint32_t uid, uint32_t max_per_uid)
{
	uint32_t before = m->n;
	int id;

	if (uuid && gpu_map_find(m, uuid) < 0 && !m->complete && gpu_map_added_by(m, uid) >= max_per_uid)
		return -EDQUOT;
	id = gpu_map_id(m, uuid, pci_bus_id, name);
	if (id >= 0 && m->n != before) {
		m->e[id].by_uid = true;
		m->e[id].uid = uid;
	}
	return id;
}

int gpu_map_find(const struct gpu_map *m, const char *uuid)
{
	for (uint32_t i = 0; i < m->n; i++)
		if (strcmp(m->e[i].uuid, uuid) == 0)
			return (int)i;
	return -ENOENT;
}

const struct gpu_map_entry *gpu_map_get(const struct gpu_map *m, uint32_t id)
{
	return id < m->n ? &m->e[id] : NULL;
}
