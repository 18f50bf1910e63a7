/* SPDX-License-Identifier: MIT */
/*
 * nvml-bind.c - the NVML binding: dlopen() of libnvidia-ml.so.1 and its
 * symbol table (nvml-api.h), NVML's error texts, and opening the GPUs
 * (handles, UUIDs, plane numbers through the GPU map, capabilities read
 * once). Runs on the loop thread at collector init and close, or on the
 * bench's thread; the sampler thread only calls nvml_strerror().
 */
#define LOG_TOPIC "collector.nvml"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "gpu-map.h"
#include "nvml-internal.h"
#include "xspace/names.h"

const char *nvml_strerror(const struct nvml *nv, nvmlReturn_t r)
{
	const char *s = nv->api.nvmlErrorString ? nv->api.nvmlErrorString(r) : NULL;

	return s ? s : "unknown NVML error";
}

int nvml_bind_probe(const struct collector_cfg *cfg, char *why, size_t why_size)
{
	const char *lib = cfg->nvml_library && cfg->nvml_library[0] ? cfg->nvml_library : NVML_DEFAULT_LIBRARY;
	void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!dl) {
		const char *e = dlerror();

		if (e && strstr(e, "No such file"))
			snprintf(why, why_size, "%s not found (install the NVIDIA driver)", lib);
		else
			snprintf(why, why_size, "%s could not be loaded: %s", lib, e ? e : "?");
		return -ENOENT;
	}
	dlclose(dl);
	return 0;
}

int nvml_bind_load(struct nvml_api *a, const char *lib, char *why, size_t why_size)
{
	a->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!a->dl) {
		snprintf(why, why_size, "%s could not be loaded: %s", lib, dlerror());
		return -ENOENT;
	}
#define LOAD_REQ(name, ret, args)                                                       \
	*(void **)&a->name = dlsym(a->dl, #name);                                        \
	if (!a->name) {                                                                  \
		snprintf(why, why_size, "%s lacks %s (driver too old for profd)", lib, #name); \
		return -EOPNOTSUPP;                                                      \
	}
#define LOAD_OPT(name, ret, args) *(void **)&a->name = dlsym(a->dl, #name);
	NVML_API_REQUIRED(LOAD_REQ)
	NVML_API_OPTIONAL(LOAD_OPT)
#undef LOAD_REQ
#undef LOAD_OPT
	return 0;
}

/* SMs from CUDA cores where NVML has no SM count (cores per SM by
 * architecture, CUDA C Programming Guide, "Compute Capabilities"). */
static uint32_t cores_per_sm(int major, int minor)
{
	switch (major) {
	case 3: return 192;
	case 5: return 128;
	case 6: return minor == 0 ? 64 : 128;
	case 7: return 64;
	case 8: return minor == 0 ? 64 : 128;
	default: return major >= 9 ? 128 : 0;
	}
}

static void read_caps(struct nvml *nv, struct gpu *g)
{
	const struct nvml_api *a = &nv->api;
	unsigned v;
	nvmlMemory_t m;

	if (a->nvmlDeviceGetCudaComputeCapability)
		if (a->nvmlDeviceGetCudaComputeCapability(g->dev, &g->cc_major, &g->cc_minor) != NVML_SUCCESS)
			g->cc_major = g->cc_minor = 0;
	if (a->nvmlDeviceGetMaxClockInfo) {
		if (a->nvmlDeviceGetMaxClockInfo(g->dev, NVML_CLOCK_SM, &v) == NVML_SUCCESS)
			g->max_sm_mhz = v;
		if (a->nvmlDeviceGetMaxClockInfo(g->dev, NVML_CLOCK_MEM, &v) == NVML_SUCCESS)
			g->max_mem_mhz = v;
	}
	if (a->nvmlDeviceGetMemoryBusWidth && a->nvmlDeviceGetMemoryBusWidth(g->dev, &v) == NVML_SUCCESS)
		g->bus_width = v;
	if (a->nvmlDeviceGetMemoryInfo(g->dev, &m) == NVML_SUCCESS)
		g->mem_total = m.total;
	if (a->nvmlDeviceGetAttributes_v2) {
		nvmlDeviceAttributes_t at = {0};

		if (a->nvmlDeviceGetAttributes_v2(g->dev, &at) == NVML_SUCCESS && at.multiprocessorCount)
			g->sm_count = at.multiprocessorCount;
	}
	if (!g->sm_count && a->nvmlDeviceGetNumGpuCores &&
	    a->nvmlDeviceGetNumGpuCores(g->dev, &v) == NVML_SUCCESS && cores_per_sm(g->cc_major, g->cc_minor))
		g->sm_count = v / cores_per_sm(g->cc_major, g->cc_minor);
	if (a->nvmlGpmQueryDeviceSupport && a->nvmlGpmSampleAlloc && a->nvmlGpmSampleGet &&
	    a->nvmlGpmMetricsGet) {
		nvmlGpmSupport_t s = {.version = NVML_GPM_SUPPORT_VERSION};

		if (a->nvmlGpmQueryDeviceSupport(g->dev, &s) == NVML_SUCCESS && s.isSupportedDevice &&
		    a->nvmlGpmSampleAlloc(&g->gpm[0]) == NVML_SUCCESS) {
			if (a->nvmlGpmSampleAlloc(&g->gpm[1]) == NVML_SUCCESS) {
				g->gpm_supported = true;
			} else {
				a->nvmlGpmSampleFree(g->gpm[0]);
				g->gpm[0] = NULL;
			}
		}
	}
	if (a->nvmlDeviceGetFieldValues) {
		nvmlFieldValue_t f = {.fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT};

		if (a->nvmlDeviceGetFieldValues(g->dev, 1, &f) == NVML_SUCCESS && f.nvmlReturn == NVML_SUCCESS &&
		    f.value.uiVal > 0)
			g->nvlink = true;
	}
}

void nvml_bind_unload(struct nvml *nv)
{
	for (unsigned i = 0; i < nv->n_gpus; i++)
		for (int k = 0; k < 2; k++)
			if (nv->gpus[i].gpm[k] && nv->api.nvmlGpmSampleFree)
				nv->api.nvmlGpmSampleFree(nv->gpus[i].gpm[k]);
	free(nv->gpus);
	nv->gpus = NULL;
	nv->n_gpus = 0;
	proc_reader_close(&nv->proc);
	if (nv->api.dl) {
		if (nv->api.nvmlShutdown)
			nv->api.nvmlShutdown();
		dlclose(nv->api.dl);
	}
	memset(&nv->api, 0, sizeof(nv->api));
}


int nvml_bind_open(struct nvml *nv, const char *lib, struct gpu_map *map, char *why, size_t why_size,
		   unsigned *ret_count)
{
	const struct nvml_api *a = &nv->api;
	unsigned count = 0;
	nvmlReturn_t nr;
	int r;

	r = nvml_bind_load(&nv->api, lib, why, why_size);
	if (r < 0)
		goto fail;
	nr = a->nvmlInit_v2();
	if (nr != NVML_SUCCESS) {
		snprintf(why, why_size, "NVML did not start: %s%s", nvml_strerror(nv, nr),
			 nr == NVML_ERROR_DRIVER_NOT_LOADED ? " (is the NVIDIA kernel module loaded?)"
			 : nr == NVML_ERROR_NO_PERMISSION ? " (profd needs access to /dev/nvidia*)" : "");
		a->nvmlShutdown(); /* harmless when init failed; balances a partial init */
		r = -ENODEV;
		goto fail;
	}
	nr = a->nvmlDeviceGetCount_v2(&count);
	if (nr != NVML_SUCCESS || count == 0) {
		snprintf(why, why_size, "no NVIDIA GPU found by NVML%s%s",
			 nr != NVML_SUCCESS ? ": " : "", nr != NVML_SUCCESS ? nvml_strerror(nv, nr) : "");
		r = -ENODEV;
		goto fail;
	}
	count = MIN(count, MAX_GPUS);
	nv->gpus = calloc(count, sizeof(*nv->gpus));
	if (!nv->gpus) {
		r = -ENOMEM;
		goto fail;
	}
	for (unsigned i = 0; i < count; i++) {
		struct gpu *g = &nv->gpus[nv->n_gpus];
		nvmlPciInfo_t pci;
		int id;

		nr = a->nvmlDeviceGetHandleByIndex_v2(i, &g->dev);
		if (nr != NVML_SUCCESS) {
			log_warn("GPU index %u skipped: %s", i, nvml_strerror(nv, nr));
			continue;
		}
		if (a->nvmlDeviceGetUUID(g->dev, g->uuid, sizeof(g->uuid)) != NVML_SUCCESS || !g->uuid[0]) {
			log_warn("GPU index %u skipped: no UUID", i);
			continue;
		}
		if (a->nvmlDeviceGetName(g->dev, g->name, sizeof(g->name)) != NVML_SUCCESS)
			snprintf(g->name, sizeof(g->name), "NVIDIA GPU");
		if (a->nvmlDeviceGetPciInfo_v3 && a->nvmlDeviceGetPciInfo_v3(g->dev, &pci) == NVML_SUCCESS)
			snprintf(g->pci, sizeof(g->pci), "%s", pci.busId);
		id = map ? gpu_map_id(map, g->uuid, g->pci[0] ? g->pci : NULL, g->name) : (int)nv->n_gpus;
		if (id < 0) {
			log_warn("GPU %s skipped: %s", g->uuid, strerror(-id));
			continue;
		}
		g->id = (uint32_t)id;
		snprintf(g->plane, sizeof(g->plane), XN_PLANE_GPU_FMT, g->id);
		read_caps(nv, g);
		log_info("GPU %u: %s %s (%s)%s%s", g->id, g->name, g->uuid, g->pci,
			 g->gpm_supported ? ", GPM" : "", g->nvlink ? ", NVLink" : "");
		nv->n_gpus++;
	}
	if (!nv->n_gpus) {
		snprintf(why, why_size, "NVML lists %u GPU(s) but none could be opened", count);
		r = -ENODEV;
		goto fail;
	}
	*ret_count = count;
	return 0;
fail:
	nvml_bind_unload(nv);
	return r;
}
