"""nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell on xla: torch calls its fused cells there
(`_thnn_fused_lstm_cell`, `_thnn_fused_gru_cell` and their backward ops), which CPU has no kernel for.
Forward, the input's gradient and every parameter's gradient equal CPU's (which runs the unfused
cell), with and without biases, in float64; and a two-layer LSTM trains in lazy mode as on CPU."""

import pytest
import torch

import xlanb


def _run(module, x):
    y = module(x)
    y = y[0] if isinstance(y, tuple) else y
    (y * y).sum().backward()
    return y


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU, torch.nn.LSTMCell, torch.nn.GRUCell])
def test_forward_and_gradients_equal_cpus(cls, bias):
    torch.manual_seed(1)
    cpu = cls(4, 8, bias=bias).double()
    xla = cls(4, 8, bias=bias).double()
    xla.load_state_dict(cpu.state_dict())
    xla = xla.to("xla")
    shape = (3, 4) if cls.__name__.endswith("Cell") else (5, 3, 4)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    xx = x.detach().to("xla").requires_grad_()
    y, yx = _run(cpu, x), _run(xla, xx)
    torch.testing.assert_close(yx.cpu(), y, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(xx.grad.cpu(), x.grad, rtol=1e-12, atol=1e-12)
    for (name, p), q in zip(cpu.named_parameters(), xla.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=1e-12, atol=1e-12, msg=name)


def test_an_lstm_trains_in_lazy_mode_as_on_cpu():
    def train(device):
        torch.manual_seed(0)
        model = torch.nn.LSTM(6, 16, num_layers=2, batch_first=True).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(4, 7, 6).to(device)
        losses = []
        for _ in range(3):
            out, (h, c) = model(x)
            loss = out.pow(2).mean() + c.abs().mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            if device == "xla":
                xlanb.sync()
            losses.append(loss.item())
        return losses
    with xlanb.eager_mode_context(False):
        assert train("xla") == pytest.approx(train("cpu"), rel=1e-5)


@pytest.mark.parametrize("batch_first", [False, True])
def test_packed_sequences_through_an_lstm_equal_cpus(batch_first):
    # torch keeps a PackedSequence's batch sizes on the CPU, on every device; the data stays on xla
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    results = {}
    for device in ("cpu", "xla"):
        torch.manual_seed(0)
        x = torch.randn(4, 3, 2, dtype=torch.float64)
        x = (x.transpose(0, 1).contiguous() if batch_first else x).to(device).requires_grad_()
        packed = pack_padded_sequence(x, torch.tensor([4, 2, 1]), batch_first=batch_first)
        torch.manual_seed(1)
        lstm = torch.nn.LSTM(2, 3, batch_first=batch_first).double().to(device)
        out, _ = lstm(packed)
        padded, lengths = pad_packed_sequence(out, batch_first=batch_first)
        (padded * padded).sum().backward()
        assert packed.batch_sizes.device.type == "cpu" and packed.data.device.type == device
        results[device] = (packed.data.cpu(), packed.batch_sizes, padded.cpu(), lengths, x.grad.cpu())
    for got, want in zip(results["xla"], results["cpu"]):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_unsorted_lengths_get_cpus_error():
    from torch.nn.utils.rnn import pack_padded_sequence
    with pytest.raises(RuntimeError) as cpu:
        pack_padded_sequence(torch.randn(4, 3, 2), torch.tensor([2, 4, 1]))
    with pytest.raises(RuntimeError) as xla:
        pack_padded_sequence(torch.randn(4, 3, 2, device="xla"), torch.tensor([2, 4, 1]))
    assert str(xla.value) == str(cpu.value)
