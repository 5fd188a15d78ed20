"""The one table of OpInfo samples the sweep does not run, each with its reason.

Keys are (op name, variant, dtype, direction); "*" matches anything in the last three
places. `op name` and `variant` are the OpInfo's `name` and `variant_test_name`.
A skipped (op, dtype, direction) is reported as skipped in docs/ops.md and counts as
not passing in the totals.

METADATA_ONLY lists ops whose values cannot be compared with another run (random or
uninitialised outputs): for them only the shapes and dtypes of the outputs are compared.
"""

from __future__ import annotations

# Reasons, reused below --------------------------------------------------------------------
SPARSE = "sparse layouts are not supported on xla"
JITERATOR = "jiterator ops exist only on CUDA (torch CPU raises too)"

SKIPS: dict[tuple[str, str, str, str], str] = {
    ("jiterator_2inputs_2outputs", "", "*", "*"): JITERATOR,
    ("jiterator_4inputs_with_extra_args", "", "*", "*"): JITERATOR,
    ("jiterator_binary", "", "*", "*"): JITERATOR,
    ("jiterator_binary_return_by_ref", "", "*", "*"): JITERATOR,
    ("jiterator_unary", "", "*", "*"): JITERATOR,
    ("sparse.sampled_addmm", "", "*", "*"): SPARSE,
    ("sparse.mm", "reduce", "*", "*"): SPARSE,
    ("to_sparse", "", "*", "*"): SPARSE,
    ("chalf", "", "*", "*"): "complex32 (chalf) has no XLA type",
    ("matrix_exp", "", "bfloat16", "fwd"): ("torch's CPU kernel returns NaN for these bfloat16 inputs (its Taylor "
                                            "series overflows in bfloat16); xla's float32 expm is finite"),
}

# Outputs that differ from run to run by design: compare shape and dtype only.
RANDOM = "random output: only shape and dtype are compared"
UNINITIALISED = "uninitialised output (empty*): only shape and dtype are compared"
METADATA_ONLY: dict[str, str] = {
    **{name: RANDOM for name in (
        "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "multinomial", "normal",
        "normal.in_place", "normal.number_mean", "rand_like", "randint", "randint_like", "randn", "randn_like",
        "uniform", "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d",
        "nn.functional.dropout3d", "nn.functional.feature_alpha_dropout.with_train",
        "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "nn.functional.rrelu")},
    "svd_lowrank": "random projection (torch.randn inside) drawn from the xla RNG: only shape and dtype are compared",
    "pca_lowrank": "random projection (torch.randn inside) drawn from the xla RNG: only shape and dtype are compared",
    **{name: UNINITIALISED for name in (
        "empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided")},
}

# Ops whose indices are implementation-defined among equal values (torch's docs say so):
# values are compared, and the indices must select those values from the input.
TIES: dict[str, str] = {name: "indices of equal values may differ: checked by gathering" for name in (
    "sort", "argsort", "topk", "kthvalue", "mode", "median", "nanmedian")}

# Samples that are random although the op is not always (dropout_p > 0): shape and dtype only.
RANDOM_WHEN: dict[str, tuple] = {
    "nn.functional.scaled_dot_product_attention": (
        lambda s: s.kwargs.get("dropout_p", 0.0) > 0, "dropout_p > 0: random output, shape and dtype compared"),
    "nn.functional.multi_head_attention_forward": (
        lambda s: len(s.args) > 9 and s.args[9] > 0 and s.kwargs.get("training", True),
        "dropout_p > 0 in training: random output, shape and dtype compared"),
}

# Wider tolerances (atol, rtol) where XLA and torch's CPU kernels legitimately round
# differently, each with its reason: {(op, dtype): (atol, rtol, reason)}.
BF16_STATS = ("bfloat16: torch's CPU kernel computes the variance another way and rounds its statistics "
              "to bfloat16; outputs near the mean differ by an ulp of the input")
BF16_ACCUMULATE = ("bfloat16: XLA accumulates the sum in another order (float32 inside, one rounding); "
                   "torch's CPU kernel rounds partial sums: differences of an ulp of the largest term")
F32_ACCUMULATE = ("float32: sums of ~100 products of values up to 81 in another order than oneDNN's; "
                  "5e-5 absolute where the terms cancel")
BF16_LOGITS = ("bfloat16: xla's decomposition rounds the logits (values in the hundreds) to bfloat16 between "
               "linear and cross_entropy; torch's fused kernel keeps them in float32")
TOLERANCE: dict[tuple[str, str], tuple[float, float, str]] = {
    ("nn.functional.linear_cross_entropy", "bfloat16"): (0.02, 2e-2, BF16_LOGITS),
    ("nn.functional.linear_cross_entropy.chunked", "bfloat16"): (0.02, 2e-2, BF16_LOGITS),
    ("nn.functional.linear_cross_entropy.chunked_none", "bfloat16"): (0.02, 2e-2, BF16_LOGITS),
    ("native_batch_norm", "bfloat16"): (0.07, 1.6e-2, BF16_STATS),
    ("_native_batch_norm_legit", "bfloat16"): (0.07, 1.6e-2, BF16_STATS),
    ("_batch_norm_with_update", "bfloat16"): (0.07, 1.6e-2, BF16_STATS),
    ("nn.functional.batch_norm", "bfloat16"): (0.07, 1.6e-2, BF16_STATS),
    ("nn.functional.instance_norm", "bfloat16"): (0.07, 1.6e-2, BF16_STATS),
    ("nn.functional.conv_transpose3d", "float32"): (1e-4, 1e-5, F32_ACCUMULATE),
    ("nn.functional.bilinear", "bfloat16"): (0.1, 1.6e-2, BF16_ACCUMULATE),
    ("logcumsumexp", "float32"): (3e-4, 3e-4, "float32: samples with inputs of 1e4 make the gradient "
                                               "ill-conditioned; torch CPU and xla are both ~3e-3 from float64"),
    ("matrix_exp", "float32"): (1e-5, 1e-3, "float32: XLA's expm (Pade, scaling and squaring) and torch's "
                                             "(Taylor, degree 18) differ by ~1e-4 relative on large entries"),
}


def skip_reason(name: str, variant: str, dtype: str, direction: str) -> str | None:
    for key in ((name, variant, dtype, direction), (name, variant, dtype, "*"), (name, variant, "*", direction),
                (name, variant, "*", "*")):
        reason = SKIPS.get(key)
        if reason is not None:
            return reason
    return None
