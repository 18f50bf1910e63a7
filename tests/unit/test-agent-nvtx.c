/* SPDX-License-Identifier: MIT */
/* Which NVTX range names are steps (collectors/agent-nvtx.c, --step-pattern). */
#include <stdbool.h>

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

TEST_MAIN()
