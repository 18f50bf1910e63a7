/* SPDX-License-Identifier: MIT */
/*
 * registry.c - every compiled-in collector, in start order. Optional ones
 * are decided at run time by their probe(); the table itself has no #if.
 */
#include "base/macro.h"
#include "collector.h"
#include "collectors.h"

const struct collector_ops *const collector_registry[] = {
	&host_proc_collector_ops,
	&nvml_collector_ops,
	&host_io_collector_ops,
	&agent_receiver_collector_ops,
};

const size_t collector_registry_size = ARRAY_SIZE(collector_registry);
