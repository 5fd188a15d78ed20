"""Storage identity as torch defines it (issue 23): distinct storages have distinct data_ptr()s,
views share their base's, offset by storage_offset * itemsize; untyped_storage() answers
data_ptr(), nbytes() and size(); set_(storage, ...) works; HF checkpoints save and load."""

import os

import pytest
import torch

import xlanb  # noqa: F401 - the xla device
from helpers import assert_close


def identity(d):
    a = torch.arange(12.0, device=d).reshape(3, 4)
    b = torch.ones(3, device=d)
    row, col = a[1], a[:, 2]
    s = a.untyped_storage()
    return dict(
        distinct=a.data_ptr() != b.data_ptr(),
        row_offset=row.data_ptr() - a.data_ptr(),
        col_offset=col.data_ptr() - a.data_ptr(),
        shared=row.untyped_storage().data_ptr() == a.data_ptr() == s.data_ptr(),
        nbytes=(s.nbytes(), s.size(), col.untyped_storage().nbytes(), b.untyped_storage().nbytes()),
        typed=a.storage().data_ptr() == a.data_ptr(),
        detached=a.detach().data_ptr() == a.data_ptr(),
        clone=a.clone().data_ptr() != a.data_ptr(),
        view_dtype=a.view(torch.int32).data_ptr() == a.data_ptr(),
        device=s.device.type,
    )


def test_data_ptr_and_untyped_storage_as_on_cpu():
    cpu, xla = identity("cpu"), identity("xla")
    assert xla.pop("device") == "xla" and cpu.pop("device") == "cpu"
    assert xla == cpu


def test_storages_do_not_overlap():
    ts = [torch.ones(n, device="xla") for n in (1, 7, 300)]
    spans = sorted((t.data_ptr(), t.data_ptr() + t.untyped_storage().nbytes()) for t in ts)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


def test_data_ptr_keeps_the_tensor_usable():
    x = torch.arange(4.0, device="xla")
    p = x.data_ptr()
    x.add_(1)
    assert x.data_ptr() == p
    assert_close(x.cpu(), torch.arange(4.0) + 1)


@pytest.mark.parametrize("d", ["cpu", "xla"])
def test_set_to_a_storage_with_a_layout_shares_it(d):
    a = torch.arange(6.0, device=d)
    b = torch.empty(0, device=d).set_(a.untyped_storage(), 2, (2, 2), (1, 2))
    whole = torch.empty(0, device=d).set_(a.untyped_storage())
    b[0, 0] = 100
    assert b.cpu().tolist() == [[100.0, 4.0], [3.0, 5.0]]
    assert whole.cpu().tolist() == a.cpu().tolist() == [0.0, 1.0, 100.0, 3.0, 4.0, 5.0]
    assert b.data_ptr() - a.data_ptr() == 8 and b.untyped_storage().data_ptr() == a.data_ptr()


def test_set_to_a_cpu_storage_is_refused_with_what_to_do():
    with pytest.raises(RuntimeError, match="move the tensor it came from to 'xla:0'"):
        torch.empty(0, device="xla").set_(torch.ones(3).untyped_storage(), 0, (2,), (1,))


def test_safetensors_save_file_round_trips(tmp_path):
    from safetensors.torch import load_file, save_file
    tensors = {"a": torch.arange(6.0, device="xla").reshape(2, 3),
               "b": torch.ones(2, dtype=torch.bfloat16, device="xla")}
    save_file(tensors, tmp_path / "t.safetensors")
    back = load_file(tmp_path / "t.safetensors", device="xla")
    assert set(back) == {"a", "b"}
    for k, v in back.items():
        assert v.device.type == "xla" and v.dtype == tensors[k].dtype
        assert torch.equal(v.cpu(), tensors[k].cpu())


def test_safetensors_refuses_shared_tensors_as_on_cpu(tmp_path):
    from safetensors.torch import save_file
    errors = []
    for d in ("cpu", "xla"):
        a = torch.ones(4, device=d)
        with pytest.raises(RuntimeError) as e:
            save_file({"a": a, "view": a[:2]}, tmp_path / f"{d}.safetensors")
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_hf_save_pretrained_and_from_pretrained_round_trip(tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=50, n_positions=32, bos_token_id=0,
                        eos_token_id=0)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).to("xla").eval()
    model.save_pretrained(tmp_path)
    assert os.path.exists(tmp_path / "model.safetensors")
    loaded = GPT2LMHeadModel.from_pretrained(tmp_path).to("xla")
    saved, back = model.state_dict(), loaded.state_dict()
    assert list(saved) == list(back)
    for name in saved:
        assert torch.equal(saved[name].cpu(), back[name].cpu()), name
    assert loaded.lm_head.weight.data_ptr() == loaded.transformer.wte.weight.data_ptr()     # still tied
    ids = torch.tensor([[1, 2, 3]], device="xla")
    assert_close(loaded(ids).logits.cpu(), model(ids).logits.cpu())


@pytest.mark.parametrize("d", ["cpu", "xla"])
def test_untyped_storage_bytes_read_as_on_cpu(d):
    x = torch.arange(3.0, device=d)
    s = x.untyped_storage()
    assert s.cpu().tolist() == s.tolist() == torch.arange(3.0).view(torch.uint8).tolist()
    assert bytes(s) == torch.arange(3.0).numpy().tobytes()
    as_int = torch.empty(0, dtype=torch.int32, device=d).set_(s, 1, (2,), (1,))
    assert as_int.cpu().tolist() == torch.arange(3.0).view(torch.int32)[1:].tolist()


def _writes_through_another_element_size(d):
    """Writes through tensors that see a storage's bytes as a dtype of another size; the values each
    dtype then reads back (CPU's are the reference: the bytes are the same memory)."""
    x = torch.arange(6, dtype=torch.float32, device=d).reshape(2, 3)
    as_int16 = torch.empty(0, dtype=torch.int16, device=d).set_(x.untyped_storage(), 0, (12,), (1,))
    as_int16[1] = 16256                                    # the high half of x[0, 0] becomes 1.0's
    v = x.view(torch.int16)                                # (2, 6)
    v[1, 2:4] = torch.tensor([1, 2], dtype=torch.int16, device=d)
    b = torch.arange(8, dtype=torch.uint8, device=d)
    b.view(torch.int32)[1] = -5                            # a wider dtype over 4 bytes
    f = torch.arange(3.0, device=d)
    f.untyped_storage().fill_(2)                           # bytes written into a float32 tensor's storage
    if xlanb.runtime_state().jax_device().platform == "tpu":
        return [t.cpu() for t in (x, as_int16, v, b, f)]   # float64's bits: refused there (test_torch_versions)
    w = torch.zeros(4, dtype=torch.float64, device=d)
    w.view(torch.float16)[3::4] = 1.5
    w.view(torch.uint8).view(torch.int32)[2:4].fill_(7)
    return [t.cpu() for t in (x, as_int16, v, b, f, w)]


def _complex_writes_through_another_element_size(d):
    c = torch.zeros(4, dtype=torch.complex64, device=d)
    c.view(torch.float32)[1] = 5                           # a narrower real dtype: c[0]'s imaginary part
    f = torch.zeros(8, device=d)
    f.view(torch.complex64)[1] = 1 + 2j                    # a wider complex dtype over f[2:4]
    return [t.cpu() for t in (c, f)]


def test_a_write_through_a_complex_view_of_another_element_size_is_cpus():
    """Complex as a real dtype and a real dtype as complex (lax's bitcast refuses complex: both raised)."""
    for cpu, xla in zip(_complex_writes_through_another_element_size("cpu"),
                        _complex_writes_through_another_element_size("xla")):
        assert xla.dtype == cpu.dtype and torch.equal(xla.view(torch.uint8), cpu.view(torch.uint8))


def test_a_write_through_a_dtype_of_another_element_size_is_cpus():
    for cpu, xla in zip(_writes_through_another_element_size("cpu"), _writes_through_another_element_size("xla")):
        assert xla.dtype == cpu.dtype and torch.equal(xla.view(torch.uint8), cpu.view(torch.uint8))
