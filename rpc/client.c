/* SPDX-License-Identifier: MIT */
/*
 * client.c - blocking unary calls over the gRPC C core (profctl, tests).
 *
 * Each call uses its own completion queue and waits for the single batch
 * (send metadata + message + close, receive metadata + message + status).
 * The channel lifts the receive limit to INT32_MAX as the TF client does,
 * since a capture's XSpace is routinely hundreds of MB.
 */
#define LOG_TOPIC "rpc.client"

#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "auth.h"
#include "base/log.h"
#include "rpc.h"

struct rpc_client {
	grpc_channel *ch;
};

int rpc_client_new(const char *target, struct rpc_client **ret)
{
	struct rpc_client *c = calloc(1, sizeof(*c));
	grpc_channel_credentials *creds;
	grpc_arg args[3];
	grpc_channel_args ca = {.num_args = 2, .args = args};

	if (!c)
		return -ENOMEM;
	if (strncmp(target, "grpc://", 7) == 0)
		target += 7;
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = INT32_MAX;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	args[1].value.integer = 4 << 20;
	/* Security (auth.c): TLS when profctl was given --tls-ca, else plain. */
	if (rpc_auth_client_server_name()) {
		args[ca.num_args].type = GRPC_ARG_STRING;
		args[ca.num_args].key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG;
		args[ca.num_args++].value.string = (char *)rpc_auth_client_server_name();
	}
	creds = rpc_auth_channel_credentials();
	c->ch = grpc_channel_create(target, creds, &ca);
	grpc_channel_credentials_release(creds);
	if (!c->ch) {
		free(c);
		return -EINVAL;
	}
	*ret = c;
	return 0;
}

struct rpc_client *rpc_client_free(struct rpc_client *c)
{
	if (c) {
		grpc_channel_destroy(c->ch);
		free(c);
	}
	return NULL;
}

int rpc_client_call_raw(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
			uint64_t timeout_ms, uint8_t **ret_bytes, size_t *ret_len, char *status_msg,
			size_t status_msg_size)
{
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	gpr_timespec deadline = timeout_ms
		? gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis((int64_t)timeout_ms, GPR_TIMESPAN))
		: gpr_inf_future(GPR_CLOCK_REALTIME);
	grpc_slice method = grpc_slice_from_static_string(path);
	grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method,
						   NULL, deadline, NULL);
	grpc_metadata_array md_init, md_trail;
	grpc_byte_buffer *send_bb, *recv_bb = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_op ops[6];
	grpc_metadata auth_md;
	grpc_event ev;
	size_t len = protobuf_c_message_get_packed_size(req);
	grpc_slice body = grpc_slice_malloc(len);
	int r;

	protobuf_c_message_pack(req, GRPC_SLICE_START_PTR(body));
	send_bb = grpc_raw_byte_buffer_create(&body, 1);
	grpc_slice_unref(body);
	grpc_metadata_array_init(&md_init);
	grpc_metadata_array_init(&md_trail);

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	/* The bearer token (auth.c), sent with every call when configured. */
	if (rpc_auth_client_bearer()) {
		memset(&auth_md, 0, sizeof(auth_md));
		auth_md.key = grpc_slice_from_static_string("authorization");
		auth_md.value = grpc_slice_from_static_string(rpc_auth_client_bearer());
		ops[0].data.send_initial_metadata.count = 1;
		ops[0].data.send_initial_metadata.metadata = &auth_md;
	}
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_init;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md_trail;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;

	if (grpc_call_start_batch(call, ops, 6, (void *)1, NULL) != GRPC_CALL_OK) {
		r = -EIO;
		goto out;
	}
	ev = grpc_completion_queue_pluck(cq, (void *)1, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	if (ev.type != GRPC_OP_COMPLETE) {
		r = -EIO;
		goto out;
	}
	if (status_msg && status_msg_size) {
		size_t n = MIN(GRPC_SLICE_LENGTH(details), status_msg_size - 1);

		memcpy(status_msg, GRPC_SLICE_START_PTR(details), n);
		status_msg[n] = 0;
	}
	r = (int)status;
	*ret_bytes = NULL;
	*ret_len = 0;
	if (status == GRPC_STATUS_OK && recv_bb) {
		grpc_byte_buffer_reader rd;

		if (!grpc_byte_buffer_reader_init(&rd, recv_bb)) {
			r = -EBADMSG;
			goto out;
		}
		size_t total = grpc_byte_buffer_length(recv_bb), off = 0;
		uint8_t *out = malloc(total ? total : 1);
		grpc_slice sl;

		if (!out) {
			grpc_byte_buffer_reader_destroy(&rd);
			r = -ENOMEM;
			goto out;
		}
		/* Slice by slice, so a 1 GB reply is not held twice. */
		while (grpc_byte_buffer_reader_next(&rd, &sl)) {
			if (off + GRPC_SLICE_LENGTH(sl) > total) {
				/* A compressed reply inflates past its wire length. */
				size_t ncap = MAX(total * 2, off + GRPC_SLICE_LENGTH(sl));
				uint8_t *p = realloc(out, ncap);

				if (!p) {
					grpc_slice_unref(sl);
					free(out);
					grpc_byte_buffer_reader_destroy(&rd);
					r = -ENOMEM;
					goto out;
				}
				out = p;
				total = ncap;
			}
			memcpy(out + off, GRPC_SLICE_START_PTR(sl), GRPC_SLICE_LENGTH(sl));
			off += GRPC_SLICE_LENGTH(sl);
			grpc_slice_unref(sl);
		}
		grpc_byte_buffer_reader_destroy(&rd);
		*ret_bytes = out;
		*ret_len = off;
	}
out:
	grpc_byte_buffer_destroy(send_bb);
	if (recv_bb)
		grpc_byte_buffer_destroy(recv_bb);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md_init);
	grpc_metadata_array_destroy(&md_trail);
	grpc_call_unref(call);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return r;
}

int rpc_client_call(struct rpc_client *c, const char *path, const ProtobufCMessage *req,
		    const ProtobufCMessageDescriptor *reply_desc, uint64_t timeout_ms,
		    ProtobufCMessage **ret_reply, char *status_msg, size_t status_msg_size)
{
	uint8_t *bytes = NULL;
	size_t len = 0;
	int r = rpc_client_call_raw(c, path, req, timeout_ms, &bytes, &len, status_msg, status_msg_size);

	*ret_reply = NULL;
	if (r != RPC_OK) {
		free(bytes);
		return r;
	}
	*ret_reply = protobuf_c_message_unpack(reply_desc, NULL, len, bytes);
	free(bytes);
	if (!*ret_reply) {
		if (status_msg && status_msg_size)
			snprintf(status_msg, status_msg_size, "the reply is not a valid %s", reply_desc->name);
		return -EBADMSG;
	}
	return RPC_OK;
}
