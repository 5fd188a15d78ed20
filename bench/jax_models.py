"""bench/models.py's models, written in JAX (torch's layouts and initialisations), and AdamW by hand
with torch.optim.AdamW's update rule (decoupled weight decay, bias-corrected moments)."""

import math

import jax
import jax.numpy as jnp

from common import W3, W4


def linear_init(key, d_in, d_out):
    bound = 1.0 / math.sqrt(d_in)
    kw, kb = jax.random.split(key)
    return {"w": jax.random.uniform(kw, (d_out, d_in), jnp.float32, -bound, bound),   # torch's [out, in]
            "b": jax.random.uniform(kb, (d_out,), jnp.float32, -bound, bound)}


def linear(p, x):
    return x @ p["w"].T + p["b"]


def cross_entropy(logits, labels):
    picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
    return jnp.mean(jax.nn.logsumexp(logits, axis=-1) - picked)


def mlp_init(key):
    k1, k2 = jax.random.split(key)
    return {"fc1": linear_init(k1, W3["d_in"], W3["d_hid"]), "fc2": linear_init(k2, W3["d_hid"], W3["d_out"])}


def mlp_loss(p, x, y):
    return cross_entropy(linear(p["fc2"], jax.nn.relu(linear(p["fc1"], x))), y)


def layer_norm(p, x, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["w"] + p["b"]


def _ln(d):
    return {"w": jnp.ones((d,), jnp.float32), "b": jnp.zeros((d,), jnp.float32)}


def gpt_init(key):
    s = W4
    d = s["d_model"]
    keys = jax.random.split(key, 3 + s["layers"])
    blocks = []
    for k in keys[3:]:
        kq, kp, k1, k2 = jax.random.split(k, 4)
        blocks.append({"ln1": _ln(d), "qkv": linear_init(kq, d, 3 * d), "proj": linear_init(kp, d, d),
                       "ln2": _ln(d), "ff1": linear_init(k1, d, s["d_ff"]), "ff2": linear_init(k2, s["d_ff"], d)})
    return {"tok": jax.random.normal(keys[0], (s["vocab"], d), jnp.float32),
            "pos": jax.random.normal(keys[1], (s["seq"], d), jnp.float32),
            "blocks": blocks, "lnf": _ln(d), "head": linear_init(keys[2], d, s["vocab"])}


def _block(p, x, mask):
    b, t, d = x.shape
    h = W4["heads"]

    def heads(z):
        return z.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)
    q, k, v = (heads(z) for z in jnp.split(linear(p["qkv"], layer_norm(p["ln1"], x)), 3, axis=-1))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // h) + mask
    attn = (jax.nn.softmax(scores, axis=-1) @ v).transpose(0, 2, 1, 3).reshape(b, t, d)
    x = x + linear(p["proj"], attn)
    return x + linear(p["ff2"], jax.nn.gelu(linear(p["ff1"], layer_norm(p["ln2"], x)), approximate=False))


def gpt_loss(p, idx, pos, mask, tgt):
    x = p["tok"][idx] + p["pos"][pos]
    for block in p["blocks"]:
        x = _block(block, x, mask)
    return cross_entropy(linear(p["head"], layer_norm(p["lnf"], x)), tgt)


def adamw_init(params):
    return {"params": params, "m": jax.tree.map(jnp.zeros_like, params), "v": jax.tree.map(jnp.zeros_like, params)}


def adamw_train_step(loss_fn):
    """step(state, lr, t, *batch) -> (state, loss); lr and t (1-based) are traced scalars, so the LR
    schedule and the step count change no executable."""
    s = W4
    b1, b2 = s["betas"]

    def step(state, lr, t, *batch):
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], *batch)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)

        def update(p, m, v):
            p = p * (1 - lr * s["weight_decay"])
            return p - (lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2) + s["eps"])
        return {"params": jax.tree.map(update, state["params"], m, v), "m": m, "v": v}, loss
    return step
