# Both targets build the virtual environment on first use, so a fresh machine with only
# Python 3.11, pip and gcc needs nothing else. The package declares compatible ranges; the
# exact known-good versions come from constraints.txt.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PARITY_STAMP := $(VENV)/.installed-parity
BEAM_STAMP := $(VENV)/.installed-beam

# XLA's CPU runtime allocates each execution's temporaries as one buffer (303 MB a step for
# the quickstart's Open-QA fine-tuning, by strace), above glibc's largest mmap threshold, so
# with the default malloc every step maps, faults in and unmaps it: a third of a
# reproduction's CPU time was the kernel's. One arena without mmap or trimming keeps it in the
# heap: the same numbers, 15% less wall time on a 300-step fine-tuning with its start-up
# (benchmarks/malloc.py, E100); a reproduction seed took 1 h 12 min under it (E101; seed 0, a
# session earlier without it: 1 h 37 min). Set for the long runs only: the test
# suite was not faster under it (9 min 13 s against 8 min 53 s, one run each). Ignored off glibc.
MALLOC_TUNABLES := glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184
quickstart reproduce reproduce-smoke: export GLIBC_TUNABLES ?= $(MALLOC_TUNABLES)

.PHONY: quickstart reproduce reproduce-smoke test test-slow test-multihost test-parity venv venv-accelerator clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

# JAX for an accelerator in place of the CPU build (same JAX version as constraints.txt):
#   make venv-accelerator JAX_BUILD=cuda12     NVIDIA GPUs (CUDA 12 wheels from PyPI)
#   make venv-accelerator JAX_BUILD=tpu        Cloud TPU VMs (libtpu from PyPI)
JAX_BUILD ?= cuda12
venv-accelerator: $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt 'jax[$(JAX_BUILD)]'
	$(BIN)/python -c 'import jax; print(jax.default_backend(), jax.devices())'

quickstart: $(STAMP)
	$(BIN)/realm-bench quickstart

# Every row of Tables 1 and 2 and the staleness sweep over SEEDS seeds (resumable), then the
# tables, plots and check under OUT; reproduce-smoke is the same at test sizes on the tiny world.
# LANES processes share the stages, one core each (realm_bench/lanes.py; 1: one process).
SEEDS ?= 3
OUT ?= results/runs/reproduce
LANES ?= 2
reproduce: $(STAMP)
	$(BIN)/realm-bench reproduce --seeds $(SEEDS) --out $(OUT) --lanes $(LANES)

reproduce-smoke: $(STAMP)
	$(BIN)/realm-bench reproduce --smoke --out results/runs/reproduce_smoke

# The suite includes `realm-bench blocks` on a small dump, so it installs the `beam` extra
# (Apache Beam, mwparserfromhell, NLTK; pinned in constraints.txt) on first use.
$(BEAM_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,beam]'
	touch $(BEAM_STAMP)

test: $(BEAM_STAMP)
	$(BIN)/python -m pytest -q

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# Two local processes x 4 simulated CPU devices (jax.distributed, gloo collectives) against one
# process with 8: training, resumed runs (synchronous and asynchronous refresh) and the merged
# top-k (8 minutes on 2 cores shared with a reproduction).
test-multihost: $(STAMP)
	$(BIN)/python -m pytest -q -m multihost tests/test_multihost.py

# Our networks against Hugging Face's REALM classes on copied weights; installs the `parity`
# extra (torch and transformers, pinned in constraints.txt) on first use. Prints the measured
# relative error of each compared quantity.
$(PARITY_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,parity]'
	touch $(PARITY_STAMP)

test-parity: $(PARITY_STAMP)
	$(BIN)/python -m pytest -q -m parity tests/parity

clean:
	rm -rf $(VENV) results/runs
