"""Why xlanb drives one xla device per process (docs/torch_xla.md): torch's autograd engine keeps one
ready queue per device of a type, as many as the type's device guard counts, and the guard torch
gives a Python backend counts one. A tensor of xlanb's device type with index 1 could run forward,
never backward. This checks that limit in a fresh process (it is torch's, whatever xlanb does), so
that the day torch lifts it, this test says that `xla:N` devices can be built."""

import subprocess
import sys
import textwrap


def test_torch_runs_no_backward_on_a_second_device_of_a_python_backend():
    code = """
        import torch, xlanb
        from torch.utils._pytree import tree_map

        class Plain(torch.Tensor):      # a tensor on xla:1 whose ops torch computes on the CPU
            @staticmethod
            def __new__(cls, elem):
                t = torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype,
                                                         device=torch.device(xlanb.device().type, 1),
                                                         requires_grad=elem.requires_grad)
                t.elem = elem
                return t

            @classmethod
            def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
                unwrap = lambda x: x.elem if isinstance(x, Plain) else x
                out = func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))
                return tree_map(lambda x: Plain(x) if isinstance(x, torch.Tensor) else x, out)

        x = Plain(torch.ones(3)).requires_grad_()
        y = (x * 2).sum()
        print("FORWARD OK", y.device, flush=True)
        try:
            y.backward()
            print("BACKWARD OK", flush=True)
        except RuntimeError as error:
            print("BACKWARD REFUSED", str(error).splitlines()[0], flush=True)
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert "FORWARD OK xla:1" in done.stdout, done.stdout + done.stderr
    assert "BACKWARD OK" not in done.stdout, (
        "torch now runs backward on a second device of a Python backend: xlanb could drive xla:0..N-1 in one "
        "process (docs/torch_xla.md, 'torch_xla.device(n)')")
    assert "BACKWARD REFUSED" in done.stdout or done.returncode != 0, done.stdout + done.stderr
