"""The `torch_dynamo_backends` entry point named "xlanb" (pyproject.toml).

torch loads it the first time a torch.compile call names backend="xlanb" and registers `backend`:
importing it imports xlanb (the device, the op capture) and prepares the backend (dynamo's hooks
installed before dynamo traces the function).
"""

from xlanb.dynamo import prepare

backend = prepare()
