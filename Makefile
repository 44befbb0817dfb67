# queuetree: every target a newcomer or CI needs. `make test` installs what it needs itself.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# One version: pyproject.toml's, which queuetree.__version__, the manifests' image tag, the image
# built here and the Helm chart's version and appVersion repeat (tests/deploy/test_manifests.py
# and test_chart.py check that they agree).
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)

.PHONY: setup lint typecheck layers unit unit-python unit-controlplane e2e e2e-real controlplane controlplane-peers test fuzz run bench image e2e-kind release chart clean

## setup: create .venv and install queuetree with its pinned dev tools (fast when nothing changed)
setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

## lint: ruff (lint and format check)
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## typecheck: mypy --strict on queuetree/ (and kubesim/)
typecheck: setup
	$(BIN)/mypy

## layers: the import contracts of DESIGN.md (import-linter)
layers: setup
	$(BIN)/lint-imports

## unit: unit and integration tests, on one worker per core (pytest-xdist); the tests that start
## the real control plane all run on one worker, one control plane at a time (tests/conftest.py)
WORKERS ?= auto
unit: setup
	$(BIN)/pytest tests -n $(WORKERS) --dist loadgroup

## unit-python: the unit tests that start no control plane, on one worker per core
unit-python: setup
	$(BIN)/pytest tests -m "not controlplane" -n $(WORKERS)

## unit-controlplane: the unit tests that start the real control plane (one at a time)
unit-controlplane: controlplane
	$(BIN)/pytest tests -m controlplane

## e2e: the end-to-end suite against kubesim (started by the suite itself)
e2e: setup
	$(BIN)/pytest e2e --e2e --backend=kubesim --durations=15

# Without Go the real backend cannot be built: said loudly, and fatal where
# QUEUETREE_REQUIRE_REAL=1 (.ci/run sets it: CI never skips the real backend).
define no_go
	if [ -n "$$QUEUETREE_REQUIRE_REAL" ]; then \
		echo "make $@: QUEUETREE_REQUIRE_REAL is set, but go is not on PATH: the real control plane cannot be built" >&2; exit 1; \
	fi; \
	printf '\n%s\n%s\n\n' "!!! make $@: SKIPPED the real control-plane backend: go is not on PATH." \
		"!!! Install Go >= 1.26.0 to build kube-apiserver, etcd and kwok from their modules (docs/e2e.md)."
endef

## controlplane: build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd, kwok,
## Karpenter's kwok provider, the Kubeflow training operator and KubeRay from their Go modules into
## ~/.cache/queuetree (a no-op that takes seconds when cached)
controlplane: setup
	@if command -v go >/dev/null 2>&1; then $(BIN)/python -m controlplane build; else $(no_go); fi

## controlplane-peers: build the peers queuetree is compared with (Kueue), the same way; never
## part of make controlplane or make test
controlplane-peers: setup
	@if command -v go >/dev/null 2>&1; then $(BIN)/python -m controlplane build --peers; else $(no_go); fi

## e2e-real: the end-to-end suite against the real control plane (built by `make controlplane`)
e2e-real: controlplane
	@if command -v go >/dev/null 2>&1; then $(BIN)/pytest e2e --e2e --backend=real --durations=15; else $(no_go); fi

## test: everything this machine can run, in two lanes at once (hack/lanes.sh): the real control
## plane's (its build, e2e on it) and everything else beside it, the unit tests that start a
## control plane last, once the rest of that lane is done (the real lane is the longer)
test: setup
	@hack/lanes.sh \
		"python=$(MAKE) --no-print-directory lint typecheck layers unit-python e2e unit-controlplane" \
		"real=$(MAKE) --no-print-directory controlplane e2e-real"

## fuzz: every property test with random seeds and FUZZ_SCALE times its examples (make test runs
## the same examples each time); failures are kept in .hypothesis/ and tried first on the next run
FUZZ_SCALE ?= 10
fuzz: setup
	QUEUETREE_HYPOTHESIS_PROFILE=fuzz QUEUETREE_FUZZ_SCALE=$(FUZZ_SCALE) \
		$(BIN)/pytest tests -m hypothesis -q --timeout=3600 -n $(WORKERS)

## run: the local sandbox (kubesim + webhook + operator)
run: setup
	@if $(BIN)/queuetree sandbox --help >/dev/null 2>&1; then \
		$(BIN)/queuetree sandbox; \
	else \
		echo "make run: the sandbox (queuetree sandbox) is not built yet."; \
		echo "What works today: make test, and 'queuetree --help'."; \
		exit 2; \
	fi

## bench: benchmarks, one JSON object per line (the operator's also on the real control plane;
## the autoscaler's, with Karpenter, only there)
REAL_ONLY_BENCHES := benchmarks/bench_autoscaling.py
bench: controlplane
	@for b in $(filter-out $(REAL_ONLY_BENCHES),$(wildcard benchmarks/bench_*.py)); do $(BIN)/python $$b || exit 1; done
	@if command -v go >/dev/null 2>&1; then \
		$(BIN)/python benchmarks/bench_operator.py --backend real && \
		$(BIN)/python benchmarks/bench_autoscaling.py --backend real; \
	fi

## image: build the container image (needs a Docker engine; none runs on the development machines)
image:
	@if [ ! -f Dockerfile ]; then echo "make image: the Dockerfile is not written yet"; exit 2; fi
	@command -v docker >/dev/null && docker info >/dev/null 2>&1 || { echo "make image: needs a running Docker engine"; exit 2; }
	docker build --build-arg VERSION=$(VERSION) -t queuetree:$(VERSION) .

## chart: regenerate charts/queuetree from manifests/ (hack/gen_chart.py; tests/deploy/test_chart.py
## fails while the committed chart differs)
chart: setup
	$(BIN)/python hack/gen_chart.py

## release: the artifacts of version $(VERSION) in $(DIST)/: the wheel, the image's build context
## and the packaged Helm chart, once the chart is current and the CHANGELOG has the version
## (hack/release.py; tests/deploy/test_release.py runs it in make test)
DIST ?= dist
release: setup
	$(BIN)/python hack/release.py --dist $(DIST)

## e2e-kind: the same e2e suite on a kind cluster (needs Docker and kind)
e2e-kind:
	@if [ ! -x hack/e2e-kind.sh ]; then echo "make e2e-kind: hack/e2e-kind.sh is not written yet"; exit 2; fi
	hack/e2e-kind.sh

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache build dist *.egg-info
