/* SPDX-License-Identifier: MIT */
/*
 * profctl-terminate.c - `profctl terminate`: stop a running capture early (Terminate RPC).
 */
#include <stdio.h>
#include <string.h>

#include "profctl.h"
#include "rpc.h"
#include "tensorflow/profiler_service.pb-c.h"

int cmd_terminate(int argc, char **argv)
{
	Tensorflow__TerminateRequest req = TENSORFLOW__TERMINATE_REQUEST__INIT;
	ProtobufCMessage *m = NULL;
	int r;

	if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		printf("Usage: profctl terminate URL SESSION\n"
		       "\n"
		       "Ask the server at URL to stop the capture of session SESSION now\n"
		       "(/tensorflow.ProfilerService/Terminate). The capture still returns what it\n"
		       "has collected to whoever started it (profctl capture, TensorBoard).\n"
		       "SESSION is the session id: the directory name under plugins/profile, as\n"
		       "printed by 'profctl capture'. Servers answer OK even for unknown sessions.\n"
		       "\n"
		       "Exit status: 0 ok; 1 the call failed; 2 bad usage.\n");
		return PROFCTL_EXIT_OK;
	}
	if (argc != 3)
		return profctl_usage_err("terminate", "expected URL and SESSION");
	if ((r = profctl_check_url("terminate", argv[1])))
		return r;
	req.session_id = argv[2];
	r = profctl_call(argv[1], "/tensorflow.ProfilerService/Terminate", &req.base,
		 &tensorflow__terminate_response__descriptor, PROFCTL_RPC_TIMEOUT_MS, &m);
	if (r)
		return r;
	protobuf_c_message_free_unpacked(m, NULL);
	printf("terminate sent for session %s on %s\n", argv[2], argv[1]);
	return PROFCTL_EXIT_OK;
}
