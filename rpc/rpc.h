/* SPDX-License-Identifier: MIT */
/*
 * rpc.h - unary gRPC over the gRPC C core, driven from a libuv loop.
 *
 * This is the only interface the rest of profd sees of gRPC: no <grpc/...>
 * type crosses it. A server dispatches by method path to handlers that get
 * the decoded request (protobuf-c) and answer later, from the loop thread,
 * with rpc_call_reply*(). Unknown methods get UNIMPLEMENTED and requests
 * that do not decode INVALID_ARGUMENT without reaching a handler.
 *
 * Threads: every function here is [loop thread] unless marked otherwise.
 * One completion-queue thread inside the server hands events to the loop
 * through a locked list and uv_async_send(); call state lives on the loop.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>
#include <uv.h>

/* gRPC status codes (the numbers are fixed by the gRPC protocol). */
enum rpc_code {
	RPC_OK = 0,
	RPC_CANCELLED = 1,
	RPC_UNKNOWN = 2,
	RPC_INVALID_ARGUMENT = 3,
	RPC_DEADLINE_EXCEEDED = 4,
	RPC_NOT_FOUND = 5,
	RPC_ALREADY_EXISTS = 6,
	RPC_PERMISSION_DENIED = 7,
	RPC_RESOURCE_EXHAUSTED = 8,
	RPC_FAILED_PRECONDITION = 9,
	RPC_ABORTED = 10,
	RPC_OUT_OF_RANGE = 11,
	RPC_UNIMPLEMENTED = 12,
	RPC_INTERNAL = 13,
	RPC_UNAVAILABLE = 14,
	RPC_DATA_LOSS = 15,
	RPC_UNAUTHENTICATED = 16,
};

const char *rpc_code_name(int code);

struct rpc_server;
struct rpc_call;

/**
 * struct rpc_payload - reply bytes handed to the server, zero-copy.
 * @data, @len: the bytes.
 * @free:       called once when gRPC is done with them, from any thread
 *              (must be thread-safe); NULL if @data needs no freeing.
 */
struct rpc_payload {
	const uint8_t *data;
	size_t len;
	void (*free)(void *opaque);
	void *opaque;
};

/* Called with the decoded request; @req stays valid until the call ends. */
typedef void (*rpc_handler_cb)(void *userdata, struct rpc_call *call, const ProtobufCMessage *req);
/* The client cancelled or its deadline passed before a reply was made.
 * After this the handler must forget @call (it will be freed). */
typedef void (*rpc_cancel_cb)(struct rpc_call *call, void *userdata);

/**
 * struct rpc_limits - what one client may hold or send; 0 = off where noted.
 * @max_streams:          calls open at once on one connection (HTTP/2
 *                        SETTINGS_MAX_CONCURRENT_STREAMS)
 * @max_request_bytes:    largest request message; larger ones get
 *                        RESOURCE_EXHAUSTED from gRPC
 * @idle_ms:              close a connection with no call for this long (0 off)
 * @keepalive_ms:         ping connections that have calls this often (0 off)
 * @keepalive_timeout_ms: and drop them if the ping is not answered in this
 * @first_message_ms:     cancel a call whose request message has not
 *                        arrived this long after its headers, and drop a
 *                        connection that has not finished its handshake (0 off)
 */
struct rpc_limits {
	uint32_t max_streams;
	uint32_t max_request_bytes;
	uint64_t idle_ms;
	uint64_t keepalive_ms;
	uint64_t keepalive_timeout_ms;
	uint64_t first_message_ms;
};

#define RPC_LIMITS_DEFAULT                                                                              \
	{                                                                                               \
		.max_streams = 100, .max_request_bytes = 64 * 1024, .idle_ms = 5 * 60 * 1000,           \
		.keepalive_ms = 60 * 1000, .keepalive_timeout_ms = 20 * 1000, .first_message_ms = 10000, \
	}

/* With RPC_LIMITS_DEFAULT. */
int rpc_server_new(uv_loop_t *loop, struct rpc_server **ret);
int rpc_server_new_with(uv_loop_t *loop, const struct rpc_limits *lim, struct rpc_server **ret);
/* @path like "/tensorflow.ProfilerService/Profile". Before start. */
int rpc_server_add_method(struct rpc_server *s, const char *path,
			  const ProtobufCMessageDescriptor *request, rpc_handler_cb cb,
			  void *userdata);
/* "[::]:6009", "127.0.0.1:0" ... Returns the bound port (> 0) or -errno:
 * -EADDRINUSE when something (another profd) listens there already,
 * -EADDRNOTAVAIL when the host has no such address, -EACCES for a port
 * below 1024 without the privilege. gRPC's log is routed through ours. */
int rpc_server_listen(struct rpc_server *s, const char *addr);
int rpc_server_start(struct rpc_server *s);
/*
 * Stop accepting calls. Calls still open get @grace_ms to be answered, then
 * are cancelled; @done runs on the loop once every call is released and the
 * server is torn down. Then rpc_server_free().
 */
void rpc_server_shutdown(struct rpc_server *s, uint64_t grace_ms, void (*done)(void *), void *ud);
struct rpc_server *rpc_server_free(struct rpc_server *s);
/* Calls that are currently open (for tests and shutdown accounting). */
unsigned rpc_server_live_calls(const struct rpc_server *s);

/* Takes ownership of @payload (also on failure). 0, or -ECANCELED when the
 * call is already over. @msg is the status message, may be NULL. */
int rpc_call_reply(struct rpc_call *c, int code, const char *msg, struct rpc_payload *payload);
/* Pack @msg and answer OK. */
int rpc_call_reply_msg(struct rpc_call *c, const ProtobufCMessage *msg);
/* Answer with an error status and a formatted message, no payload. */
int rpc_call_error(struct rpc_call *c, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void rpc_call_on_cancel(struct rpc_call *c, rpc_cancel_cb cb, void *userdata);
/* The client's deadline as CLOCK_REALTIME ns, INT64_MAX if none. */
int64_t rpc_call_deadline_ns(const struct rpc_call *c);
/* "ipv4:127.0.0.1:5555" etc., borrowed for the call's life. */
const char *rpc_call_peer(const struct rpc_call *c);

/* ---- access control (auth.c; docs/security.md) --------------------------
 * Every option is off by default, which is profd's historic open server.
 */
struct rpc_server_auth {
	const char *const *allow_from; /* CIDRs ("10.0.0.0/8", "::1/128", "1.2.3.4");
					* a peer outside all of them: PERMISSION_DENIED */
	size_t n_allow_from;
	const char *tls_cert, *tls_key; /* PEM files: serve TLS on every listener */
	const char *tls_client_ca;      /* PEM file: require and verify client certificates */
	const char *token_file;         /* every call needs "authorization: Bearer <token>" */
};

/*
 * Read the files and parse the ranges now, so a bad option stops the start.
 * Before rpc_server_listen(). 0, or -errno with a sentence in @err.
 */
int rpc_server_set_auth(struct rpc_server *s, const struct rpc_server_auth *a, char *err,
			size_t err_size);
/*
 * SIGHUP (profd): replace the access settings of a running server for calls
 * that arrive from now on (a call admitted before keeps going). @a must name
 * the same TLS files the listening ports were made with: only the address
 * ranges differ (the token file is read again too). 0, or -errno with a
 * sentence in @err, the old settings kept. [loop thread]
 */
int rpc_server_reload_auth(struct rpc_server *s, const struct rpc_server_auth *a, char *err,
			   size_t err_size);
/* Whether @s is an --allow-from range rpc_server_set_auth() accepts
 * ("10.0.0.0/8", "::1/128", "192.0.2.7"): lets the config file name its
 * line. 0, or -EINVAL / -ERANGE (host bits set) with the reason in @why. */
int rpc_allow_from_check(const char *s, char *why, size_t why_size);
/* What the access check learnt about a call's caller, for the handlers. */
bool rpc_call_has_token(const struct rpc_call *c);
/* A valid token or a verified client certificate. */
bool rpc_call_authenticated(const struct rpc_call *c);
/* True when the server has no access option at all (profd's open default). */
bool rpc_call_access_open(const struct rpc_call *c);
/* The one rule for who sees other processes' command lines (Status's
 * agents, NVML's process list, anything a capture or Monitor carries;
 * docs/security.md): everyone while no access option is set, else only an
 * authenticated caller (token or verified client certificate). */
bool rpc_call_sees_cmdlines(const struct rpc_call *c);
/* Who the caller is, for ownership: "x509:<certificate identity>" with a
 * verified client certificate, else "ip:<address>" (no port). */
const char *rpc_call_identity(const struct rpc_call *c);

/* ---- client half (profctl, tests) ------------------------------------- */

struct rpc_client;

/* One channel to @target ("host:port", "[::1]:6009"; "grpc://" is
 * stripped). Receives messages of any size up to 2 GiB. [any thread] */
int rpc_client_new(const char *target, struct rpc_client **ret);
struct rpc_client *rpc_client_free(struct rpc_client *c);
/*
 * Blocking unary call. On success *@ret_reply is the decoded reply (free
 * with protobuf_c_message_free_unpacked()). Returns the gRPC code (>= 0),
 * with @status_msg filled, or -errno for local failures.
 * @timeout_ms 0 = no deadline. [any thread; one call per client at a time]
 */
int rpc_client_call(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *reply_desc, uint64_t timeout_ms,
		    ProtobufCMessage **ret_reply, char *status_msg, size_t status_msg_size);
/* Same, but hands back the raw reply bytes (malloc'ed) instead of decoding. */
int rpc_client_call_raw(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
			uint64_t timeout_ms, uint8_t **ret_bytes, size_t *ret_len, char *status_msg,
			size_t status_msg_size);
/* Client security for every rpc_client_new() after it (profctl's --tls-* and
 * --token-file). NULL fields are off. [main thread, before any client] */
struct rpc_client_auth {
	const char *tls_ca;              /* PEM file: use TLS, trust these roots */
	const char *tls_cert, *tls_key;  /* PEM files: client certificate (mTLS) */
	const char *tls_server_name;     /* name to check in the server's certificate */
	const char *token_file;          /* send "authorization: Bearer <token>" */
};
/* 0, or -errno with a sentence in @err. */
int rpc_client_set_auth(const struct rpc_client_auth *a, char *err, size_t err_size);
/* gRPC library init/teardown, refcounted by gRPC itself. [main thread] */
void rpc_global_init(void);
void rpc_global_shutdown(void);
