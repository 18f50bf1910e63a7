/* SPDX-License-Identifier: MIT */
/*
 * cupti-spy.c - an LD_PRELOAD library that logs the CUPTI calls a job's own
 * profiler makes (PyTorch's Kineto, the TF/JAX profiler), one line each on
 * stderr: "cupti-spy: <ms> <call>(<args>) = <result>". For
 * tests/gpu/run-gpu-tests.sh (torch-profiler): which calls of PyTorch's
 * profiler, started inside a profd capture, leave the rest of that capture
 * without kernels.
 *
 * The job's calls reach these wrappers through its PLT; profd's agent
 * resolves CUPTI with dlsym() on its own handle, so its calls are not
 * logged. The real function: the next definition in the global scope, or,
 * when CUPTI came in as the dependency of a library loaded RTLD_LOCAL (a
 * Python extension), the copy already loaded under CUPTI's soname.
 *
 * Not part of profd: built by tools/device-bundle for the GPU machine only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

typedef int res_t; /* CUptiResult */

static void *real(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name), *h;

	if (!f && (h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD)))
		f = dlsym(h, name);
	return f;
}

static double ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#define LOG(fmt, ...) fprintf(stderr, "cupti-spy: %.1f " fmt "\n", ms(), __VA_ARGS__)

/* One wrapper: @ret name(@params) calling the real one with @args. */
#define SPY1(name, t1, fmt)                                  \
	res_t name(t1 a);                                    \
	res_t name(t1 a)                                     \
	{                                                    \
		res_t (*f)(t1) = (res_t(*)(t1))real(#name);  \
		res_t r = f ? f(a) : 999;                    \
		LOG(#name "(" fmt ") = %d", a, r);           \
		return r;                                    \
	}

SPY1(cuptiActivityEnable, int, "kind %d")
SPY1(cuptiActivityDisable, int, "kind %d")
SPY1(cuptiActivityFlushAll, uint32_t, "flag %u")
SPY1(cuptiUnsubscribe, void *, "%p")
SPY1(cuptiSetThreadIdType, int, "type %d")

res_t cuptiFinalize(void);
res_t cuptiFinalize(void)
{
	res_t (*f)(void) = (res_t(*)(void))real("cuptiFinalize");
	res_t r = f ? f() : 999;

	LOG("cuptiFinalize() = %d", r);
	return r;
}

res_t cuptiActivityRegisterCallbacks(void *req, void *done);
res_t cuptiActivityRegisterCallbacks(void *req, void *done)
{
	res_t (*f)(void *, void *) = (res_t(*)(void *, void *))real("cuptiActivityRegisterCallbacks");
	res_t r = f ? f(req, done) : 999;

	LOG("cuptiActivityRegisterCallbacks(%p, %p) = %d", req, done, r);
	return r;
}

res_t cuptiSubscribe(void **sub, void *cb, void *ud);
res_t cuptiSubscribe(void **sub, void *cb, void *ud)
{
	res_t (*f)(void **, void *, void *) = (res_t(*)(void **, void *, void *))real("cuptiSubscribe");
	res_t r = f ? f(sub, cb, ud) : 999;

	LOG("cuptiSubscribe(%p) = %d", cb, r);
	return r;
}

res_t cuptiEnableDomain(uint32_t enable, void *sub, int domain);
res_t cuptiEnableDomain(uint32_t enable, void *sub, int domain)
{
	res_t (*f)(uint32_t, void *, int) = (res_t(*)(uint32_t, void *, int))real("cuptiEnableDomain");
	res_t r = f ? f(enable, sub, domain) : 999;

	LOG("cuptiEnableDomain(%u, %p, domain %d) = %d", enable, sub, domain, r);
	return r;
}

/* A (context, kind) call. */
#define SPY_CTX(name)                                                     \
	res_t name(void *ctx, int kind);                                  \
	res_t name(void *ctx, int kind)                                   \
	{                                                                 \
		res_t (*f)(void *, int) = (res_t(*)(void *, int))real(#name); \
		res_t r = f ? f(ctx, kind) : 999;                         \
		LOG(#name "(%p, kind %d) = %d", ctx, kind, r);            \
		return r;                                                 \
	}

SPY_CTX(cuptiActivityEnableContext)
SPY_CTX(cuptiActivityDisableContext)
