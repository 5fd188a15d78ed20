# make test: set up .venv and run every test.   make lab: set up and start JupyterLab.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup test lab bench clean

$(STAMP): pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet -e .
	-$(PY) -m pip uninstall --quiet --yes rfc3987-syntax
	touch $(STAMP)

setup: $(STAMP)

test: setup
	$(PY) -m pytest -q

lab: setup
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

bench: setup
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info
