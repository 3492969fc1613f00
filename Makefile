# Set-up and the two everyday commands (see README.md):
#   make experiment  set up, then run the main job: the paper's experiment
#                    on 5,000 Fashion-MNIST images with an MLP, its figures
#                    and summary in runs/fashion_mnist_5k/report
#   make experiment-docs  regenerate the committed docs/experiment/ summaries
#                    (the main, convex and digits runs) and record the
#                    commit that made them
#   make noise-study  set up, then run the label-noise study: the main job's
#                    data with 20% and 40% of its labels flipped, uniform
#                    and adaptive sampling with each control, its summary
#                    in runs/label_noise/report
#   make wall-time  set up, then time the main job's runs to their targets
#                    one at a time (nothing else running), its report in
#                    runs/wall_time/fashion_mnist_5k/wall_time.md
#   make budget-study  set up, then run the budget-limited regime on all of
#                    Fashion-MNIST: its tuning on the validation split, the
#                    mechanisms against random reshuffling (clean and 20%
#                    of the labels flipped) and their wall-time pass one at
#                    a time (nothing else running), its reports in
#                    runs/fashion_mnist_budget/report
#   make test    set up, then run every test: pytest and `bazel test //...`
#   make api-docs  the API reference, from the docstrings, in build/api
# Set-up is idempotent: a virtual environment in .venv with TensorFlow and the
# package installed in place (its op library built against that TensorFlow,
# with two header-only libraries from Debian that TensorFlow's XLA headers
# include but its wheel lacks), Fashion-MNIST from Debian
# (dataset-fashion-mnist) for the experiment, and Bazel from Debian for the
# Bazel build.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TENSORFLOW := tensorflow==2.21.0
# Every C++/CUDA file of the op library (bazel/build_facts.bzl lists them for
# the builds; tests/test_build_facts.py checks this sees them all).
CC_SOURCES := $(shell find cc -name '*.cc' -o -name '*.h' -o -name '*.cu')
# What clang-format keeps in the style of .clang-format, and yapf in that of
# .style.yapf (TensorFlow's: Google's, 2-space indents).
CC_FORMATTED := $(CC_SOURCES) $(wildcard tests/*.cc benchmarks/*.cc \
  benchmarks/*.cu)
PY_FORMATTED := setup.py bazel tf_adasamp tests benchmarks examples
OP_LIBRARY := tf_adasamp/_sum_tree_ops.so
FASHION_MNIST := /usr/share/datasets/fashion-mnist
# Where Debian's googletest package puts the sources (WORKSPACE reads them).
GOOGLETEST := /usr/src/googletest

.PHONY: setup build-deps fashion-mnist experiment experiment-docs noise-study \
  wall-time budget-study \
  experiment-docs-check demo api-docs test pytest \
  bazel-test format format-check clang-format clean

# In two passes, so that the op library that pip's editable install builds
# in place counts: the second pass rebuilds it only if a source is newer.
setup: fashion-mnist
	@$(MAKE) --no-print-directory $(VENV)/installed
	@$(MAKE) --no-print-directory $(OP_LIBRARY)

fashion-mnist:
	test -d $(FASHION_MNIST) || { apt-get update -qq && \
	  apt-get install -y -qq dataset-fashion-mnist; }

build-deps:
	test -f /usr/include/highwayhash/arch_specific.h -a \
	  -f /usr/include/farmhash.h || { apt-get update -qq && \
	  apt-get install -y -qq libhighwayhash-dev libfarmhash-dev; }

$(VENV)/installed: setup.py pyproject.toml | build-deps
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TENSORFLOW)" setuptools wheel
	$(PY) -m pip install -q --no-build-isolation -e ".[test,data]"
	touch $@

$(OP_LIBRARY): $(CC_SOURCES) | $(VENV)/installed build-deps
	$(PY) setup.py -q build_ext --inplace

experiment: setup
	$(PY) -m tf_adasamp.experiment.reproduce --dataset=fashion_mnist_5k \
	  --trials=10 --output_dir=runs/fashion_mnist_5k

experiment-docs: setup
	$(PY) -m tf_adasamp.experiment.refresh

# Fails where the committed summaries are not the committed code's.
experiment-docs-check:
	$(PY) -m tf_adasamp.experiment.refresh --check

noise-study: setup
	$(PY) -m tf_adasamp.experiment.noise_study --trials=10 \
	  --output_dir=runs/label_noise

wall-time: setup
	$(PY) -m tf_adasamp.experiment.wall_time --trials=10 \
	  --output_dir=runs/wall_time/fashion_mnist_5k

budget-study: setup
	$(PY) -m tf_adasamp.experiment.budget_study \
	  --output_dir=runs/fashion_mnist_budget

demo: setup
	$(PY) -m tf_adasamp.experiment.demo

# The API reference: pdoc renders the docstrings (Google style) of tf_adasamp,
# the modules its __all__ names and tf_adasamp.sources as HTML in API_DOCS. A
# pdoc warning (a name that does not import, an annotation it cannot read)
# fails the build. tests/test_api_docs.py builds it in `make test` and checks
# that its links resolve.
API_DOCS := build/api
api-docs: setup
	rm -rf $(API_DOCS)
	$(PY) -W error -m pdoc --docformat google -o $(API_DOCS) tf_adasamp \
	  tf_adasamp.sources

# The format check and both suites run even if one fails; the exit status
# says if any did.
test: setup
	status=0; $(MAKE) --no-print-directory format-check || status=1; \
	  $(MAKE) --no-print-directory pytest || status=1; \
	  $(MAKE) --no-print-directory bazel-test || status=1; exit $$status

# One pytest worker per core (pytest-xdist): most tests keep one core busy.
pytest: setup
	$(PY) -m pytest -q -n auto tests

# Bazel tests its own build of the op library with the op-level pytest files
# (tests/BUILD) and the C++ unit tests (gtest, built from Debian's googletest
# sources: bazel/googletest.BUILD).
bazel-test: setup
	command -v bazel >/dev/null || { apt-get update -qq && \
	  apt-get install -y -qq bazel-bootstrap bazel-rules-java; }
	test -f $(GOOGLETEST)/googletest/src/gtest-all.cc || { \
	  apt-get update -qq && apt-get install -y -qq googletest; }
	bazel test //...

# format rewrites the tree in its style; format-check fails on any file that
# format would change, on what ruff's linters find (a docstring of the public
# API out of the Google style too) and on a type error mypy finds in the
# public API (pyproject.toml says which rules and files).
format: setup clang-format
	$(PY) -m yapf -i -p -r $(PY_FORMATTED)
	clang-format -i $(CC_FORMATTED)

format-check: setup clang-format
	$(PY) -m yapf --diff -p -r $(PY_FORMATTED)
	clang-format --dry-run --Werror $(CC_FORMATTED)
	$(PY) -m ruff check
	$(PY) -m mypy
	@echo "format-check: the tree is formatted, linted and type-checked"

clang-format:
	command -v clang-format >/dev/null || { apt-get update -qq && \
	  apt-get install -y -qq clang-format; }

clean:
	rm -rf build *.egg-info $(OP_LIBRARY)
	-bazel clean
