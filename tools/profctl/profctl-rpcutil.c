/* SPDX-License-Identifier: MIT */
/*
 * profctl-rpcutil.c - what the one-call subcommands (monitor, terminate,
 * status) share: URL checking and a unary call that explains failures.
 */
#define _GNU_SOURCE /* strcasestr */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/macro.h"
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

/* gRPC core's words for a name it could not resolve (c-ares and native resolvers). */
static bool is_dns_failure(const char *msg)
{
	static const char *const words[] = {
		"DNS resolution failed", "DNS query", "Name resolution failure", "name resolution",
		"Domain name not found", "Could not resolve", "resolve address",
	};

	for (size_t i = 0; msg && i < ARRAY_SIZE(words); i++)
		if (strcasestr(msg, words[i]))
			return true;
	return false;
}

const char *profctl_rpc_hint(int code, const char *msg)
{
	switch (code) {
	case RPC_UNAVAILABLE:
		if (is_dns_failure(msg))
			return "the host name does not resolve (DNS or /etc/hosts); check the spelling, or use an IP address";
		return "is the profiler server running and listening on that address? (profd --listen, firewall)";
	case RPC_DEADLINE_EXCEEDED:
		return "the address accepted the connection but sent no reply in time: is it a profiler server "
		       "(gRPC tensorflow.ProfilerService), and is it not stuck? A firewall that drops packets looks "
		       "the same";
	case RPC_UNIMPLEMENTED:
		return "that address does not serve this tensorflow.ProfilerService method";
	case RPC_RESOURCE_EXHAUSTED:
		return "the daemon has too many captures open; wait or raise profd --max-sessions";
	case RPC_INTERNAL:
		return "the server failed to capture (another capture running in a TF/JAX process?)";
	case RPC_INVALID_ARGUMENT:
		return "the server rejected the request (duration or delay above its limit?)";
	case RPC_UNAUTHENTICATED:
	case RPC_PERMISSION_DENIED:
		return "the server requires a token this client did not send or that it refuses (profctl --token-file FILE)";
	default:
		return NULL;
	}
}

int profctl_call(const char *url, const char *path, const ProtobufCMessage *req,
		const ProtobufCMessageDescriptor *desc, uint64_t timeout_ms, ProtobufCMessage **ret)
{
	struct rpc_client *cl;
	char msg[512] = "";
	const char *hint;
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
	hint = profctl_rpc_hint(r, msg);
	return profctl_err(PROFCTL_EXIT_FAIL, "%s: %s: %s%s%s", url, rpc_code_name(r), msg[0] ? msg : "(no message)",
			   hint ? "\n  hint: " : "", hint ? hint : "");
}
