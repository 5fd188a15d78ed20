# make test: set up .venv (with the JupyterLab extension built and installed), then run every test.
# make lab:  the same set-up, then start JupyterLab on notebooks/.
# The extension (labextension/, TypeScript) is built with npm and jupyter-builder only when
# xlanb/labextension/ is missing or older than its sources; node >= 20.19 is needed for that.
# The same sources, bundled by esbuild, are the report widget's front end (xlanb/notebook/static/).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

EXT_SRC := $(wildcard labextension/src/*.ts labextension/style/*) labextension/package.json \
	labextension/package-lock.json labextension/tsconfig.json labextension/install.json
EXT_NODE := labextension/node_modules/.package-lock.json
EXT_BUILT := xlanb/labextension/package.json
EXT_DIR := $(VENV)/share/jupyter/labextensions/xlanb-lab
WIDGET_BUILT := xlanb/notebook/static/widget.js

.PHONY: setup labextension widget wheel test test-matrix test-ops-full test-torch-suites hf-referee torch-xla-referee lab docs bench torch-xla-bench-env fuzz clean

$(STAMP): pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	rm -rf $(EXT_DIR)
	# the editable install runs no npm (SKIP_JUPYTER_BUILDER): the labextension rule below builds it
	SKIP_JUPYTER_BUILDER=1 $(PY) -m pip install --quiet -e .
	-$(PY) -m pip uninstall --quiet --yes rfc3987-syntax
	touch $(STAMP)

$(EXT_NODE): labextension/package.json labextension/package-lock.json
	cd labextension && npm ci --no-audit --no-fund

# jupyter-builder (the npm scripts call it) comes with jupyterlab in the venv; build:prod also
# bundles the widget
$(EXT_BUILT): $(EXT_NODE) $(EXT_SRC) | $(STAMP)
	cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" npm run build:prod

# the widget's ES module (and widget.css with it) alone, esbuild, about a second: when it is missing
# or older than the sources; after the extension build, which cleans it
$(WIDGET_BUILT): $(EXT_NODE) $(EXT_SRC) labextension/scripts/build-widget.js | $(EXT_BUILT)
	cd labextension && npm run build:widget

# installed as a copy, like the wheel's share/jupyter/labextensions/xlanb-lab
$(EXT_DIR)/package.json: $(EXT_BUILT) $(STAMP)
	rm -rf $(EXT_DIR)
	mkdir -p $(dir $(EXT_DIR))
	cp -R xlanb/labextension $(EXT_DIR)

labextension: $(EXT_DIR)/package.json

widget: $(WIDGET_BUILT)

setup: $(STAMP) labextension widget

# dist/xlanb-<version>-py3-none-any.whl with the prebuilt extension and widget: `pip install` it where
# xlanb is not on PyPI (a fresh Colab: upload it, then %pip install xlanb-*.whl); no node needed there
wheel: setup
	rm -rf dist
	$(PY) -m pip wheel . --no-deps -q -w dist
	@ls dist/*.whl

test: setup
	$(PY) -m pytest -q

# the wheel installed beside the oldest and the newest supported torch/jax/Python (PyPI wheels, in
# build/matrix/), and a representative subset of the tests run there from outside the source tree;
# MATRIX="--all" for every combination docs/portability.md lists, or "--combo 3.11:2.11.0:0.10.2"
test-matrix: wheel
	$(PY) tools/test_matrix.py $(MATRIX)

# every OpInfo of torch's op_db, in worker processes; rewrites docs/ops.md (~15 min on 2 cores)
test-ops-full: $(STAMP)
	$(PY) tools/ops_sweep.py --check

# PyTorch's own device-generic test files (instantiate_device_type_tests) on xla, as the referee:
# TORCH_TESTS is a folder of them (not part of this project; e.g. a pytorch checkout's test/),
# TORCH_TEST_FILES picks some (default: view_ops, indexing, shape_ops, type_promotion, reductions);
# per-file counts and the failing tests go to torch_suites.md and torch_suites.json
test-torch-suites: $(STAMP)
	@test -n "$(TORCH_TESTS)" || { echo "usage: make test-torch-suites TORCH_TESTS=<dir of pytorch test files>"; exit 2; }
	$(PY) tools/torch_suites.py --tests $(TORCH_TESTS) $(TORCH_TEST_FILES)

# HuggingFace architectures nobody here wrote, two training steps on xla against torch CPU
# (tools/hf_referee.py; docs/torch_suites.md has the last results)
hf-referee: $(STAMP)
	$(PY) tools/hf_referee.py $(HF_MODELS)

# torch_xla's own test files against xlanb.compat, as the referee: XLA is a pytorch/xla checkout
# (not part of this project); one pass count per file (docs/torch_xla.md has the last counts)
# REFEREE_PY: a Python with xlanb and torchvision for the examples and pages that import it
# (torchvision cannot be installed beside the CPU torch wheel of the venv); the venv's by default
REFEREE_PY ?= $(PY)
torch-xla-referee: $(STAMP)
	@test -n "$(XLA)" || { echo "usage: make torch-xla-referee XLA=<pytorch/xla checkout> [REFEREE_PY=<python with torchvision>]"; exit 2; }
	$(PY) -m pip install --quiet absl-py    # the test files' own dependency
	$(PY) tools/torch_xla_referee.py $(XLA)
	$(REFEREE_PY) tools/torch_xla_referee.py --examples $(XLA)
	$(REFEREE_PY) tools/torch_xla_referee.py --docs $(XLA)

lab: setup
	mkdir -p notebooks
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=notebooks $(if $(filter 0,$(shell id -u)),--allow-root)

docs: $(STAMP)
	$(PY) -m mkdocs build --strict

bench: setup
	$(PY) bench/run.py

# torch_xla's side of W7 in `make bench` (bench/hf_training.py): a venv of its own, as torch_xla 2.9 pins
# torch 2.9; PyPI's torch wheels (CUDA builds, about 3 GB with their nvidia packages) run on a CPU.
# PIP_CONSTRAINT= lifts a machine-wide pin of torch, where one is set; the same transformers as .venv's
TXLA_VENV := build/torch-xla-venv
torch-xla-bench-env: $(STAMP)
	$(PYTHON) -m venv $(TXLA_VENV)
	PIP_CONSTRAINT= $(TXLA_VENV)/bin/python -m pip install --quiet torch==2.9.0 torch_xla==2.9.0 \
		"transformers==$$($(PY) -c 'import transformers; print(transformers.__version__)')"

# the differential fuzzer: random programs on xla against torch CPU, seeds 0..N-1 (N=1000 unless given);
# failures are shrunk and printed
fuzz: $(STAMP)
	$(PY) tests/fuzz/runner.py --seeds $(or $(N),1000)

clean:
	rm -rf $(VENV) build dist *.egg-info labextension/node_modules labextension/lib xlanb/labextension \
		xlanb/notebook/static
