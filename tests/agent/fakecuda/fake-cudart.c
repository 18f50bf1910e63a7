/* SPDX-License-Identifier: MIT */
/*
 * fake-cudart.c - a stand-in for libcudart.so.13: only the version query
 * the agent makes. fake-cuda-app loads it RTLD_LOCAL, as Python frameworks
 * load theirs, so the agent must find it by name rather than globally.
 */
#define EXPORT __attribute__((visibility("default")))

EXPORT int cudaRuntimeGetVersion(int *v);
EXPORT int cudaRuntimeGetVersion(int *v)
{
	*v = 13000;
	return 0;
}
