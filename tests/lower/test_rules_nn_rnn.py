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
