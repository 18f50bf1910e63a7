# SPDX-License-Identifier: MIT
"""JAX workloads for bench/gpu-overhead.py, with launch-loop.cu's protocol.

    jax-work.py loop|train [--server PORT]

loop   a launch-bound loop: a jitted elementwise op on 1024 floats, one
       kernel per call, BATCH calls then block_until_ready;
train  a small training step: a 2-layer MLP (784-512-10, batch 128),
       softmax cross-entropy, jitted value_and_grad + SGD update.
--server PORT starts JAX's own profiler server (jax.profiler.start_server),
the in-process way to profile that profd replaces.

stdin:  run SECONDS | steps K | quit; stdout: "ready", then one JSON line
per command (see launch-loop.cu). "kernels" is null: the count comes from
the traces.
"""
import json
import sys
import time

import jax
import jax.numpy as jnp

kind = sys.argv[1]
if "--server" in sys.argv:
    jax.profiler.start_server(int(sys.argv[sys.argv.index("--server") + 1]))

if kind == "loop":
    BATCH = 64
    f = jax.jit(lambda x: x * 1.0001 + 0.5)
    state = jnp.ones((1024,), jnp.float32)

    def batch():
        global state
        for _ in range(BATCH):
            state = f(state)
        state.block_until_ready()
else:
    BATCH = 4
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = {"w1": jax.random.normal(k1, (784, 512)) * 0.05, "b1": jnp.zeros(512),
              "w2": jax.random.normal(k2, (512, 10)) * 0.05, "b2": jnp.zeros(10)}
    xs = jax.random.normal(k3, (128, 784))
    ys = jax.nn.one_hot(jnp.arange(128) % 10, 10)

    def loss(p, x, y):
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(h @ p["w2"] + p["b2"]), axis=-1))

    @jax.jit
    def step(p, x, y):
        v, g = jax.value_and_grad(loss)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g), v

    state = params

    def batch():
        global state
        v = None
        for _ in range(BATCH):
            state, v = step(state, xs, ys)
        v.block_until_ready()

for _ in range(20):
    batch()
print("ready", flush=True)
for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    if words[0] == "run":
        end = time.time_ns() + int(float(words[1]) * 1e9)
        rec = []
        while time.time_ns() < end:
            t = time.time_ns()
            batch()
            rec.append([t, time.time_ns() - t])
        out = {"op": "run", "batch": BATCH, "b": rec}
    elif words[0] == "steps":
        t0 = time.time_ns()
        for _ in range(int(words[1])):
            batch()
        out = {"op": "steps", "t0": t0, "t1": time.time_ns(), "kernels": None}
    else:
        break
    print(json.dumps(out), flush=True)
