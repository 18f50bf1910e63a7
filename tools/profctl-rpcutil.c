/* SPDX-License-Identifier: MIT */
/*
 * profctl-rpcutil.c - what the one-call subcommands (monitor, terminate,
 * status) share: URL checking and a unary call that explains failures.
 */
#include <stdio.h>
#include <string.h>

#include "base/parse.h"
#include "profctl.h"
#include "rpc.h"

int profctl_check_url(const char *sub, const char *url)
{
	char host[256];
	uint16_t port;

	if (parse_host_port(url, host, sizeof(host), &port) < 0 || port == 0)
		return profctl_usage_err(sub, "\"%s\" is not HOST:PORT or [IPV6]:PORT", url);
	return 0;
}

int profctl_call(const char *url, const char *path, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, uint64_t timeout_ms, ProtobufCMessage **ret)
{
	struct rpc_client *cl;
	char msg[512] = "";
	int r;

	r = rpc_client_new(url, &cl);
	if (r < 0)
		return profctl_err(PROFCTL_EXIT_FAIL, "%s: cannot create a channel: %s", url, strerror(-r));
	r = rpc_client_call(cl, path, req, desc, timeout_ms, ret, msg, sizeof(msg));
	rpc_client_free(cl);
	if (r == RPC_OK)
		return 0;
	if (r < 0)
		return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s", url, msg[0] ? msg : strerror(-r));
	if (r == RPC_UNAVAILABLE)
		return profctl_err(PROFCTL_EXIT_FAIL, "%s: UNAVAILABLE: %s\n  hint: is the server running and "
				   "listening there? (profd --listen, firewall)", url, msg);
	return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s: %s", url, rpc_code_name(r), msg[0] ? msg : "(no message)");
}
