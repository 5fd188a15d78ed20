"""Run by `python -m xlanb.compat`: reports what the script sees."""

import json
import sys

import torch_xla
import torch_xla.core.xla_model as xm

print("RESULT " + json.dumps({"argv": sys.argv, "name": __name__, "device": str(torch_xla.device()),
                              "xm": xm.__name__}))
