# make lab   — set everything up (first time only) and open the notebooks in JupyterLab
# make test  — set everything up (first time only) and run every test and every notebook
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The project's JupyterLab defaults, installed into the environment (a user's own settings still win).
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

.PHONY: setup lab test clean outputs

setup: $(STAMP) $(LAB_SETTINGS)

# Re-runs only when the pins or the package metadata change.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

# No "get notified about official Jupyter news?" pop-up over the notebook on first start.
$(LAB_SETTINGS): tools/jupyterlab-overrides.json $(STAMP)
	mkdir -p $(dir $@)
	cp $< $@

# JupyterLab refuses to run as root unless told to (containers and CI machines often are root).
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# Serves on localhost only, with a token in the URL it prints and opens.
lab: setup
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(ROOT_FLAG) notebooks

test: setup
	$(PY) -m pytest

# Removes the compiled layers; the next load rebuilds them.
clean:
	rm -rf build

# Re-executes the notebooks and stores their outputs (after changing a notebook or the C++ it shows).
outputs: setup
	$(PY) tools/refresh_notebooks.py

# The stable-ABI operators (csrc/stable) as one wheel for every CPython >= 3.10 and torch 2.13-2.14:
# dist/myops_stable-<version>-cp310-abi3-<platform>.whl. Built against the installed torch, in place.
.PHONY: wheel
wheel: setup
	$(PY) -m pip wheel --no-deps --no-build-isolation --wheel-dir dist ./stable
