/* SPDX-License-Identifier: MIT */
/*
 * auth.h - access control inside rpc/ (docs/security.md).
 *
 * Server side: the credentials each listener gets (TLS or plain) and the
 * check every call passes before its method is looked at: peer address in
 * --allow-from, verified client certificate, bearer token. Client side: the
 * TLS credentials and the authorization header of every channel profctl
 * opens. Internal to rpc/ (it speaks gRPC types); the rest of profd sees
 * struct rpc_server_auth / rpc_client_auth in rpc.h.
 *
 * Ownership: struct rpc_auth belongs to the rpc_server that made it and is
 * read-only after rpc_auth_new(); rpc_auth_check() runs on the loop thread.
 * The client settings are process-wide, written once by
 * rpc_client_set_auth() before any channel exists, then only read.
 */
#pragma once

#include <stdbool.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>

#include "rpc.h"

struct rpc_auth;

/* What one call proved; filled by rpc_auth_check(), owned by the call. */
struct rpc_auth_peer {
	char *identity; /* "x509:..." or "ip:...", malloc'ed */
	bool token;     /* carried the configured token */
	bool cert;      /* presented a client certificate gRPC verified against --tls-client-ca */
	bool open;      /* the server has no access option at all */
};

int rpc_auth_new(const struct rpc_server_auth *a, struct rpc_auth **ret, char *err, size_t err_size);
struct rpc_auth *rpc_auth_free(struct rpc_auth *a);
/* A listener's credentials: TLS when configured, else insecure. The caller
 * releases them. @a may be NULL. */
grpc_server_credentials *rpc_auth_server_credentials(const struct rpc_auth *a);
/*
 * Decide whether a new call may go on. RPC_OK with @ret filled, or
 * RPC_PERMISSION_DENIED / RPC_UNAUTHENTICATED with a message for the
 * client in @msg (and @ret still filled, for the log). @a may be NULL: every
 * call is let through and @ret only names the peer.
 */
int rpc_auth_check(const struct rpc_auth *a, grpc_call *call, const grpc_metadata_array *md,
		   const char *peer, struct rpc_auth_peer *ret, char *msg, size_t msg_size);
void rpc_auth_peer_clear(struct rpc_auth_peer *p);

/* Channel credentials for rpc_client_new(): TLS when set up, else insecure. */
grpc_channel_credentials *rpc_auth_channel_credentials(void);
/* --tls-server-name, or NULL. */
const char *rpc_auth_client_server_name(void);
/* "Bearer <token>" to send as "authorization", or NULL. */
const char *rpc_auth_client_bearer(void);
