"""Each test starts with dynamo's caches empty too (compiled frames survive xlanb.reset())."""

import pytest
import torch


@pytest.fixture(autouse=True)
def fresh_dynamo():
    import torch._dynamo
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
