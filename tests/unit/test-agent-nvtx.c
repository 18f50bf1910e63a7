/* SPDX-License-Identifier: MIT */
/* Which NVTX range names are steps (collectors/agent/agent-nvtx.c, --step-pattern),
 * and which range names a kernel's tf_op (agent_nvtx_tf_op()). */
#include <stdbool.h>
#include <string.h>

#include "agent-nvtx.h"
#include "harness.h"

TEST(agent_nvtx_default_step_names)
{
	agent_nvtx_set_step_patterns(NULL);
	ASSERT_TRUE(agent_nvtx_is_step("train_step"));
	ASSERT_TRUE(agent_nvtx_is_step("Train_Step 12"));
	ASSERT_TRUE(agent_nvtx_is_step("step_3"));
	ASSERT_TRUE(agent_nvtx_is_step("iteration#n=4#"));
	ASSERT_TRUE(agent_nvtx_is_step("[Strategy]DDPStrategy.training_step"));
	ASSERT_TRUE(agent_nvtx_is_step("run_training_batch"));
	ASSERT_TRUE(agent_nvtx_is_step("train_function"));
	ASSERT_TRUE(!agent_nvtx_is_step("steps_done"));
	ASSERT_TRUE(!agent_nvtx_is_step("forward"));
	ASSERT_TRUE(!agent_nvtx_is_step("XlaModule:#hlo_module=jit_train_step,program_id=3#"));
	ASSERT_TRUE(!agent_nvtx_is_step(""));
	ASSERT_TRUE(!agent_nvtx_is_step("#step#"));
}

TEST(agent_nvtx_step_pattern_option)
{
	agent_nvtx_set_step_patterns("my_iter,epoch_batch");
	ASSERT_TRUE(agent_nvtx_is_step("my_iter 0"));
	ASSERT_TRUE(agent_nvtx_is_step("loop/epoch_batch"));
	ASSERT_TRUE(!agent_nvtx_is_step("train_step"));
	ASSERT_TRUE(!agent_nvtx_is_step("my_iterx"));
	agent_nvtx_set_step_patterns(NULL);
	ASSERT_TRUE(agent_nvtx_is_step("train_step"));
}

static const char *op_of(const char *const *texts, uint32_t n, int step)
{
	static char op[512];

	agent_nvtx_tf_op(texts, n, step, op, sizeof(op));
	return op;
}

/* The innermost framework op under the step, in forms XProf's
 * ParseTfOpFullname() categorises (xprof tf_op_utils.cc), not the step. */
TEST(agent_nvtx_tf_op_is_the_innermost_op)
{
	const char *tf[] = { "train_step", "dense:MatMul" };
	const char *nested[] = { "epoch 3", "train_step", "model/block 1", "dense:MatMul", "relu:Relu" };
	const char *jax[] = { "train_step", "layer:transpose[permutation=(0, 1)]" };
	/* PyTorch under emit_nvtx(): record_function names, then operators
	 * with the suffixes emit_nvtx() appends. */
	const char *torch[] = { "train_step", "forward", "aten::linear, seq = 12, op_id = 40",
				"aten::addmm, seq = 13, op_id = 41, sizes = [[4], [2, 3], [3, 4]]" };
	const char *overload[] = { "step", "aten::add.Tensor, op_id = 7" };
	const char *plain[] = { "train_step", "backward" };
	const char *bare[] = { "train_step" };
	const char *xla[] = { "train_step", "dense:MatMul", "fusion.3#hlo_op=fusion.3,hlo_module=m#" };

	ASSERT_STREQ(op_of(tf, 2, 0), "dense:MatMul");
	ASSERT_STREQ(op_of(nested, 5, 1), "model/block_1/dense/relu:Relu");
	ASSERT_STREQ(op_of(jax, 2, 0), "layer:transpose[permutation=(0, 1)]");
	ASSERT_STREQ(op_of(torch, 4, 0), "forward/aten.linear/aten.addmm:addmm");
	ASSERT_STREQ(op_of(overload, 2, 0), "aten.add.Tensor:add");
	/* No op under the step: the innermost range, as it is. */
	ASSERT_STREQ(op_of(plain, 2, 0), "backward");
	ASSERT_STREQ(op_of(bare, 1, 0), "train_step");
	/* XLA's annotations win. */
	ASSERT_STREQ(op_of(xla, 3, 0), "fusion.3:fusion");
	/* Not ops: tf.data iterators, a lone name, a C++ scope without an op. */
	{
		const char *it[] = { "train_step", "Iterator::Batch" };
		const char *odd[] = { "train_step", "My Block:forward pass" };

		ASSERT_STREQ(op_of(it, 2, 0), "Iterator::Batch");
		ASSERT_STREQ(op_of(odd, 2, 0), "My Block:forward pass");
	}
	/* No step: every range above the op is its scope. */
	ASSERT_STREQ(op_of(tf, 2, -1), "train_step/dense:MatMul");
}

TEST_MAIN()
