import os, sys; sys.path.insert(0, os.path.dirname(__file__))  # noqa: E401,E702
from rulecheck import check, run_rule  # noqa: E402,F401

import pytest  # noqa: E402
import torch  # noqa: E402

from test_rules_nn_helpers import ncheck, nrun, op  # noqa: E402

A = 1e-5


def test_embedding_and_backward():
    w = torch.randn(10, 4)
    idx = torch.tensor([[1, 3, 3], [0, 9, 3]])
    ncheck("aten.embedding.default", w, idx)
    ncheck("aten.embedding.default", w.double(), torch.tensor(7))
    g = torch.randn(2, 3, 4)
    for pad in (-1, 3):
        for freq in (False, True):
            ncheck("aten.embedding_dense_backward.default", g, idx, 10, pad, freq, atol=A)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_embedding_bag(mode):
    w = torch.randn(7, 3)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 4])
    off = torch.tensor([0, 2, 2, 5])
    for pad in ((-1,), (2,), (-1, 2))[mode]:
        e = op("aten._embedding_bag.default")(w, idx, off, False, mode, False, None, False, pad)
        got = nrun("aten._embedding_bag.default", w, idx, off, False, mode, False, None, False, pad)
        torch.testing.assert_close(got[0], e[0], atol=A, rtol=1e-5)
        torch.testing.assert_close(got[1], torch.tensor([0, 0, 2, 2, 2, 3, 3, 3, 3]))
        if mode:   # CPU leaves bag_size zero (and offset2bag empty) for mode sum
            torch.testing.assert_close(got[2], e[2])
        if mode == 2:
            torch.testing.assert_close(got[3], e[3])
        g = torch.randn(4, 3)
        eb = op("aten._embedding_bag_dense_backward.default")(g, idx, e[1] if mode else got[1], e[2] if mode else
                                                              got[2], e[3], 7, False, mode, None, pad)
        gb = nrun("aten._embedding_bag_dense_backward.default", g, idx, got[1], got[2], got[3], 7, False, mode,
                  None, pad)
        torch.testing.assert_close(gb, eb, atol=A, rtol=1e-5)
    psw = torch.rand(9)
    if mode == 0:
        args = (w, idx, torch.tensor([0, 3, 9]), False, 0, False, psw, True, -1)
        torch.testing.assert_close(nrun("aten._embedding_bag.default", *args)[0],
                                   op("aten._embedding_bag.default")(*args)[0], atol=A, rtol=1e-5)


def test_native_dropout():
    x = torch.randn(64, 32) + 3
    out, mask = nrun("aten.native_dropout.default", x, 0.25, True, rng_seed=3)
    assert mask.dtype == torch.bool and out.dtype == torch.float32
    torch.testing.assert_close(out, x * mask / 0.75)
    assert 0.65 < mask.float().mean() < 0.85
    out2, mask2 = nrun("aten.native_dropout.default", x, 0.25, True, rng_seed=4)
    assert not torch.equal(mask, mask2)
    out, mask = nrun("aten.native_dropout.default", x, 0.25, False)
    assert torch.equal(out, x) and bool(mask.all())
    out, mask = nrun("aten.native_dropout.default", x, 1.0, None)
    assert not bool(mask.any()) and not bool(out.any())
    g = torch.randn(64, 32)
    ncheck("aten.native_dropout_backward.default", g, mask2, 1 / 0.75)
    ncheck("aten.native_dropout_backward.default", g.half(), mask2, 2.0)


def test_constant_pad_nd():
    x = torch.randn(2, 3, 4)
    ncheck("aten.constant_pad_nd.default", x, [1, 2], 0)
    ncheck("aten.constant_pad_nd.default", x, [1, 2, 0, 1, 2, 0], 2.5)
    ncheck("aten.constant_pad_nd.default", x, [-1, 2, 1, -1], -3)
    ncheck("aten.constant_pad_nd.default", torch.randint(0, 5, (3, 3)), [1, 1], 7)


@pytest.mark.parametrize("kind", ["reflection", "replication"])
def test_mode_pads_and_backward(kind):
    for d, shape, pad in ((1, (2, 3, 5), [2, 1]), (2, (3, 4, 5), [1, 2, 3, 0]),
                          (3, (1, 2, 3, 4, 5), [1, 0, 2, 1, 0, 2])):
        x = torch.randn(shape)
        name = f"aten.{kind}_pad{d}d"
        ncheck(name + ".default", x, pad)
        y = op(name + ".default")(x, pad)
        ncheck(name + "_backward.default", torch.randn(y.shape), x, pad, atol=A)


def test_embedding_bag_backward():
    w = torch.randn(7, 3)
    idx, off = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0, 4]), torch.tensor([0, 2, 2, 5])
    _, o2b, bag_size, maxi = op("aten._embedding_bag.default")(w, idx, off, False, 1, False, None, False, 2)
    g = torch.randn(4, 3)
    args = (g, idx, off, o2b, bag_size, maxi, 7)
    ncheck("aten._embedding_bag_backward.default", *args, False, 1, False, None, 2, atol=A)
    # scale_grad_by_freq: torch 2.13's CPU kernel divides by the wrong count (pytorch#190063;
    # CUDA is right), so compare with the documented semantics: row r divided by count(r)
    plain = op("aten._embedding_bag_backward.default")(*args, False, 1, False, None, 2)
    counts = torch.bincount(idx, minlength=7).clamp(min=1)
    got = nrun("aten._embedding_bag_backward.default", *args, True, 1, False, None, 2)
    torch.testing.assert_close(got, plain / counts[:, None], atol=A, rtol=1e-5)
