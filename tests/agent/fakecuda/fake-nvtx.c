/* SPDX-License-Identifier: MIT */
/*
 * fake-nvtx.c - the application side of NVTX v3 for fake-cuda-app: what
 * the header-only nvtx3/nvToolsExt.h compiles into a job, built from
 * collectors/cupti/nvtx-abi.h so no CUDA headers are needed.
 *
 * It keeps NVTX's protocol with a tool: at the first NVTX call (once per
 * process) it reads NVTX_INJECTION64_PATH, dlopens that library, calls its
 * InitializeInjectionNvtx2 with our export table, and the tool fills the
 * function-pointer slots it handles through GetModuleFunctionTable (an
 * array of pointers to slots, one spare NULL at the end, as nvtx3's).
 * Without a tool, or for a slot the tool left empty, a call returns what
 * NVTX's does: NVTX_NO_PUSH_POP_TRACKING, or NULL.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "nvtx-abi.h"

typedef int(NVTX_API *push_a_fn)(const char *);
typedef int(NVTX_API *pop_fn)(void);
typedef nvtxDomainHandle_t(NVTX_API *create_a_fn)(const char *);
typedef nvtxStringHandle_t(NVTX_API *reg_a_fn)(nvtxDomainHandle_t, const char *);
typedef int(NVTX_API *d_push_fn)(nvtxDomainHandle_t, const nvtxEventAttributes_t *);
typedef int(NVTX_API *d_pop_fn)(nvtxDomainHandle_t);

/* The slots, by callback id; a tool writes into them during init. */
static NvtxFunctionPointer core[NVTX_CBID_CORE_SIZE], core2[NVTX_CBID_CORE2_SIZE];
static NvtxFunctionPointer *core_table[NVTX_CBID_CORE_SIZE + 1], *core2_table[NVTX_CBID_CORE2_SIZE + 1];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int NVTX_API get_module_table(NvtxCallbackModule m, NvtxFunctionTable *out, unsigned int *size)
{
	NvtxFunctionPointer **t;
	unsigned n;

	switch (m) {
	case NVTX_CB_MODULE_CORE: t = core_table, n = NVTX_CBID_CORE_SIZE; break;
	case NVTX_CB_MODULE_CORE2: t = core2_table, n = NVTX_CBID_CORE2_SIZE; break;
	default: return 0;
	}
	if (out)
		*out = t;
	if (size)
		*size = n;
	return 1;
}

static const NvtxExportTableCallbacks callbacks = { sizeof(callbacks), get_module_table };

static const void *NVTX_API get_export_table(uint32_t id)
{
	return id == NVTX_ETID_CALLBACKS ? &callbacks : NULL;
}

static void init(void)
{
	const char *path = getenv("NVTX_INJECTION64_PATH");
	NvtxInitializeInjectionNvtxFunc_t fn;
	void *h;

	for (unsigned i = 0; i < NVTX_CBID_CORE_SIZE; i++)
		core_table[i] = &core[i];
	for (unsigned i = 0; i < NVTX_CBID_CORE2_SIZE; i++)
		core2_table[i] = &core2[i];
	if (!path || !(h = dlopen(path, RTLD_LAZY)))
		return;
	*(void **)&fn = dlsym(h, "InitializeInjectionNvtx2");
	if (!fn || !fn(get_export_table)) {
		/* A tool that declined leaves nothing behind. */
		for (unsigned i = 0; i < NVTX_CBID_CORE_SIZE; i++)
			core[i] = NULL;
		for (unsigned i = 0; i < NVTX_CBID_CORE2_SIZE; i++)
			core2[i] = NULL;
	}
}

/* The slot @id of @t once NVTX is initialised, as type @type. */
#define SLOT(type, t, id) (pthread_once(&once, init), (type)(t)[id])

int NVTX_API nvtxRangePushA(const char *message)
{
	push_a_fn f = SLOT(push_a_fn, core, NVTX_CBID_CORE_RangePushA);

	return f ? f(message) : NVTX_NO_PUSH_POP_TRACKING;
}

int NVTX_API nvtxRangePop(void)
{
	pop_fn f = SLOT(pop_fn, core, NVTX_CBID_CORE_RangePop);

	return f ? f() : NVTX_NO_PUSH_POP_TRACKING;
}

nvtxDomainHandle_t NVTX_API nvtxDomainCreateA(const char *name)
{
	create_a_fn f = SLOT(create_a_fn, core2, NVTX_CBID_CORE2_DomainCreateA);

	return f ? f(name) : NULL;
}

nvtxStringHandle_t NVTX_API nvtxDomainRegisterStringA(nvtxDomainHandle_t domain, const char *string)
{
	reg_a_fn f = SLOT(reg_a_fn, core2, NVTX_CBID_CORE2_DomainRegisterStringA);

	return f ? f(domain, string) : NULL;
}

int NVTX_API nvtxDomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *a)
{
	d_push_fn f = SLOT(d_push_fn, core2, NVTX_CBID_CORE2_DomainRangePushEx);

	return f ? f(domain, a) : NVTX_NO_PUSH_POP_TRACKING;
}

int NVTX_API nvtxDomainRangePop(nvtxDomainHandle_t domain)
{
	d_pop_fn f = SLOT(d_pop_fn, core2, NVTX_CBID_CORE2_DomainRangePop);

	return f ? f(domain) : NVTX_NO_PUSH_POP_TRACKING;
}
