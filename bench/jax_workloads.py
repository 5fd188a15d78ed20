"""Pure JAX, jitted: the reference for every ratio. Usage: python jax_workloads.py W1|W3"""

import math
import sys

import jax
import jax.numpy as jnp
import numpy as np

from common import W3, emit, median, perf, timeit


def w1():
    x = jnp.asarray(np.random.rand(128, 128).astype(np.float32))

    def chain(x):
        for _ in range(500):                  # 500 x (mul, add) = 1000 elementwise ops
            x = x * 1.0001 + 0.5
        return x
    f = jax.jit(chain)
    f(x).block_until_ready()
    cached = timeit(lambda: f(x).block_until_ready(), n=50, warmup=5)
    emit("W1", "jax", {"cached_step": median(cached)})


def w3():
    s = W3
    key = jax.random.PRNGKey(0)
    k1, k2, k3, k4 = jax.random.split(key, 4)

    def lin_init(k, din, dout):
        b = 1.0 / math.sqrt(din)
        ka, kb = jax.random.split(k)
        return {"w": jax.random.uniform(ka, (dout, din), jnp.float32, -b, b),
                "b": jax.random.uniform(kb, (dout,), jnp.float32, -b, b)}
    params = {"fc1": lin_init(k1, s["d_in"], s["d_hid"]), "fc2": lin_init(k2, s["d_hid"], s["d_out"])}
    x = jax.random.normal(k3, (s["batch"], s["d_in"]), jnp.float32)
    y = jax.random.randint(k4, (s["batch"],), 0, s["d_out"])

    def loss_fn(p, x, y):
        h = jax.nn.relu(x @ p["fc1"]["w"].T + p["fc1"]["b"])
        logits = h @ p["fc2"]["w"].T + p["fc2"]["b"]
        picked = jnp.take_along_axis(logits, y[:, None], axis=-1)[:, 0]
        return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)

    def step(p, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, g: a - s["lr"] * g, p, grads), loss
    step = jax.jit(step, donate_argnums=(0,))
    t0 = perf()
    params, loss = step(params, x, y)
    loss.block_until_ready()
    first = perf() - t0
    times = []
    for i in range(53):
        t0 = perf()
        params, loss = step(params, x, y)
        loss.block_until_ready()
        if i >= 3:
            times.append(perf() - t0)
    emit("W3", "jax", {"first_step": first, "steady_step": median(times)})


{"W1": w1, "W3": w3}[sys.argv[1]]()
