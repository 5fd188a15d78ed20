"""Pure JAX, jitted: the reference for every ratio. Usage: python jax_workloads.py W1|W2|W3|W4

W1 also measures the lowering reference (trace + lower of the 1000-op chain); W2 is jax.numpy op by
op, each op's result waited for (block_until_ready).
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

import jax_models as M
from common import W1_OPS, W2_OPS, W3, W3_STEPS, W4, W4_STEPS, emit, median, perf, timeit, warmup_lr


def chain(x):
    for _ in range(W1_OPS // 2):
        x = x * 1.0001 + 0.5
    return x


def w1():
    x = jnp.asarray(np.random.rand(128, 128).astype(np.float32))
    x.block_until_ready()
    f = jax.jit(chain)
    t0 = perf()
    f(x).block_until_ready()                  # trace + lower + compile + run, in a fresh process
    first = perf() - t0
    cached = timeit(lambda: f(x).block_until_ready(), n=50, warmup=5)
    lowers = []
    for _ in range(5):                        # a fresh function each time: no trace cache hit
        def fresh(x):
            return chain(x)
        t0 = perf()
        jax.jit(fresh).lower(x)
        lowers.append(perf() - t0)
    emit("W1", "jax", {"first_call": first, "cached_step": median(cached), "lower_1000": median(lowers)})


def w2_ops(x, w):
    for _ in range(W2_OPS // 8):
        x = jnp.tanh(x).block_until_ready()
        x = (x * 1.0001).block_until_ready()
        x = (x @ w).block_until_ready()
        s = x.sum(axis=0).block_until_ready()
        x = (x - s).block_until_ready()
        x = x.T.block_until_ready()
        x = (x * 0.5).block_until_ready()     # torch's in-place mul_, functionally
        x = (x + 0.25).block_until_ready()
    return x


def w2():
    x = jnp.asarray(np.random.rand(128, 128).astype(np.float32))
    w = jnp.asarray(np.random.rand(128, 128).astype(np.float32) / 64)
    per_run = timeit(lambda: w2_ops(x, w), n=20, warmup=3)
    emit("W2", "jax", {"per_op": median(per_run) / W2_OPS})


def sgd_step(p, x, y):
    loss, grads = jax.value_and_grad(M.mlp_loss)(p, x, y)
    return jax.tree.map(lambda a, g: a - W3["lr"] * g, p, grads), loss


def w3():
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    params = M.mlp_init(k1)
    x = jax.random.normal(k2, (W3["batch"], W3["d_in"]), jnp.float32)
    y = jax.random.randint(k3, (W3["batch"],), 0, W3["d_out"])
    step = jax.jit(sgd_step, donate_argnums=(0,))
    t0 = perf()
    params, loss = step(params, x, y)
    loss.block_until_ready()
    first = perf() - t0
    for _ in range(3):
        params, loss = step(params, x, y)
    loss.block_until_ready()
    times = []
    for _ in range(W3_STEPS):
        t0 = perf()
        params, loss = step(params, x, y)
        loss.block_until_ready()
        times.append(perf() - t0)
    t0 = perf()                                # no wait per step: dispatch runs ahead
    for _ in range(W3_STEPS):
        params, loss = step(params, x, y)
    loss.block_until_ready()
    no_wait = (perf() - t0) / W3_STEPS
    mem = jax.jit(sgd_step, donate_argnums=(0,)).lower(params, x, y).compile().memory_analysis()
    emit("W3", "jax", {"first_step": first, "steady_step": median(times), "steady_no_wait": no_wait,
                       **{f"device_{k}": getattr(mem, f"{k}_size_in_bytes") for k in
                          ("argument", "output", "temp", "alias")}})


def w4():
    s = W4
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    state = M.adamw_init(M.gpt_init(k1))
    idx = jax.random.randint(k2, (s["batch"], s["seq"]), 0, s["vocab"])
    tgt = jax.random.randint(k3, (s["batch"], s["seq"]), 0, s["vocab"])
    pos = jnp.arange(s["seq"])
    mask = jnp.triu(jnp.full((s["seq"], s["seq"]), -1e9, jnp.float32), k=1)
    step = jax.jit(M.adamw_train_step(M.gpt_loss), donate_argnums=(0,))
    count = 0

    def one():
        nonlocal state, count
        lr = np.float32(s["lr"] * warmup_lr(count))      # the LambdaLR factor of this step
        count += 1
        state, loss = step(state, lr, np.float32(count), idx, pos, mask, tgt)
        loss.block_until_ready()
    t0 = perf()
    one()
    first = perf() - t0
    one()
    after_two = step._cache_size()
    times = timeit(one, n=W4_STEPS, warmup=1)
    emit("W4", "jax", {"first_step": first, "steady_step": median(times),
                       "recompiles_after_2": step._cache_size() - after_two})

if __name__ == "__main__":
    {"W1": w1, "W2": w2, "W3": w3, "W4": w4}[sys.argv[1]]()
