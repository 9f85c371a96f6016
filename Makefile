# make lab   — set everything up (first time only) and open the notebooks in JupyterLab
# make test  — set everything up (first time only) and run every test and every notebook
# make site  — the course as a static website in build/site/ (Chinese: build/site/zh_CN/), from the stored notebooks
# make lab-zh — the Chinese edition in JupyterLab: Chinese notebooks (build/zh/) in a Chinese interface
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The project's JupyterLab defaults, installed into the environment (a user's own settings still win).
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json

.PHONY: setup lab test clean outputs gpu-image site

setup: $(STAMP) $(LAB_SETTINGS)

# Re-runs only when the pins or the package metadata change. pip compiles every module it installs: where
# PYTHONDONTWRITEBYTECODE is set (containers often set it) nothing else would, and each `import torch` would compile
# torch's modules again (3.3 s of CPU instead of 1.5 s, in each of the 400-odd Python processes a `make test` starts).
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

# The website: README.md, the notebooks with their stored outputs, each exercise's stub and each C++ file a notebook
# shows (docs/conf.py, docs/course_site.py). Warnings are errors: a broken link or a missing picture fails the build.
# Sphinx reads a staging folder under build/ that docs/course_site.py lays out; the notebooks are only read.
# COURSE_REPOSITORY_URL=https://github.com/<owner>/<repo>/blob/main links each file's path to the hosted repository
# (for a published site); without it the path links to the file itself, copied into the site.
# The Chinese edition is the same sources with docs/locale/zh_CN's catalogues, under build/site/zh_CN/; every page
# links to itself in the other language.
SITE_SRC := build/site-src
# build/site/ is written anew (a page removed from the course leaves nothing behind); what Sphinx read is kept in
# build/site-doctrees/, so a second build reads only what changed.
site: setup
	mkdir -p $(SITE_SRC)
	rm -rf build/site
	$(PY) -m sphinx -W --keep-going -q -b html -c docs -d build/site-doctrees/en $(SITE_SRC) build/site
	$(PY) -m sphinx -W --keep-going -q -b html -c docs -d build/site-doctrees/zh_CN -D language=zh_CN $(SITE_SRC) build/site/zh_CN
	@echo "site: build/site/index.html (中文: build/site/zh_CN/index.html)"

# After changing English text: extracts every sentence a learner reads into build/gettext/*.pot and merges them
# into the Chinese catalogues docs/locale/zh_CN/LC_MESSAGES/*.po. A new sentence arrives untranslated, a changed one
# marked fuzzy with its old translation; tests/test_translation.py fails until each is translated.
.PHONY: catalogues
catalogues: setup
	mkdir -p $(SITE_SRC)
	rm -rf build/gettext
	$(PY) -m sphinx -W --keep-going -q -b gettext -c docs $(SITE_SRC) build/gettext
	$(VENV)/bin/sphinx-intl update -p build/gettext -l zh_CN -d docs/locale -w 0 --no-obsolete -j 1 >/dev/null
	$(PY) tools/translation.py tidy

# The Chinese notebooks (build/zh/notebooks/: the stored notebooks, their Markdown from the catalogues; the code
# cells and outputs as they are), opened in JupyterLab's Chinese interface (its own settings folder chooses the
# language pack). build/zh/ links csrc/, exercises/ and solutions/ to the repository: the notebooks' relative links
# work, and an exercise edited there is the one `check` reads.
.PHONY: lab-zh
lab-zh: setup
	$(PY) tools/translation.py notebooks
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(ROOT_FLAG) --LabApp.user_settings_dir=build/zh/lab-settings build/zh

# Removes the compiled layers; the next load rebuilds them.
clean:
	rm -rf build

# Re-executes the notebooks and stores their outputs (after changing a notebook or the C++ it shows).
outputs: setup
	$(PY) tools/refresh_notebooks.py

# The stable-ABI operators (csrc/stable) as one wheel for every CPython >= 3.10 and torch >= 2.13:
# dist/myops_stable-<version>-cp310-abi3-manylinux_<glibc>_x86_64.whl. Built against the installed torch, in place.
.PHONY: wheel
# stable/wheeltools.py (WHEEL_COMMAND, REPAIR_COMMAND) says why two steps; auditwheel needs patchelf on PATH.
wheel: setup
	rm -rf build/stable/linux-wheel dist/myops_stable-*.whl
	$(PY) -m pip wheel --no-deps --no-build-isolation --wheel-dir build/stable/linux-wheel ./stable
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m auditwheel repair --exclude libc10.so --exclude 'libtorch*.so' --wheel-dir dist build/stable/linux-wheel/myops_stable-*.whl

# The wheel on the next torch release (stable/test_next.py says how): its value checks, and the tests marked
# pytorch_pin, in build/test-next/. Not part of `make test`: the first run downloads torch's CUDA build (about 3 GB).
.PHONY: test-next
test-next: wheel
	$(PY) stable/test_next.py

# A stand-in for the GPU machine's image, on this machine (tests/test_gpu_image.py runs the GPU check's CPU half in
# it): Python 3.12 with torch 2.11.0's CUDA build and tools/gpu-image.txt, no notebook packages, and the pinned pip
# CUDA compiler of requirements.txt (with its runtime) laid out as a system toolkit, found on PATH, not from pip.
# About 5 GB under build/gpu-image/; made once, remade when the pins change.
GPU_IMAGE        := build/gpu-image
# Any Python 3.12: pyenv's if there is one (its python3.12 shim may point at no version), else python3.12 on PATH.
GPU_IMAGE_PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12) python3.12)
gpu-image: $(GPU_IMAGE)/.installed

$(GPU_IMAGE)/.installed: tools/gpu-image.txt requirements.txt $(STAMP)
	rm -rf $(GPU_IMAGE)
	$(GPU_IMAGE_PYTHON) -m venv $(GPU_IMAGE)/venv
	$(GPU_IMAGE)/venv/bin/python -m pip install --quiet -r tools/gpu-image.txt
	grep -E '^nvidia-(cuda-nvcc|nvvm|cuda-crt|cuda-cccl)==' requirements.txt | sed 's/;.*//' > $(GPU_IMAGE)/toolkit.txt
	echo 'nvidia-cuda-runtime==13.0.96' >> $(GPU_IMAGE)/toolkit.txt
	$(PY) -m pip install --quiet --no-deps --target $(GPU_IMAGE)/toolkit-pip -r $(GPU_IMAGE)/toolkit.txt
	$(PY) -c "import sys; from pathlib import Path; from myops.toolchain import toolkit_layout; \
	  toolkit_layout(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve())" \
	  $(GPU_IMAGE)/toolkit-pip/nvidia/cu13 $(GPU_IMAGE)/cuda
	touch $@
