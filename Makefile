# pmsgate: every target creates the environment itself (installing uv with pip when missing).
SHELL := /bin/bash
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif
PORT ?= 8080
SANDBOX_PORT ?= 8090
# Two workers fit this machine kind (2 cores); TEST_WORKERS=0 runs the tests in one process.
TEST_WORKERS ?= 2
# Compiled modules are written once (__pycache__, ignored by git) and reused by every Python
# process of a run: both test workers and every server or CLI a test starts. Where the
# environment turns that off (PYTHONDONTWRITEBYTECODE), each process compiles again every
# module it imports: importing the app took 10 s of CPU instead of 4 s on this machine.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: env demo test lint package-check format serve sandbox bench clean messages image

env: .venv/.synced

# The optional extra 'otel' (traces, docs/operations.md) too, so its tests run.
.venv/.synced: pyproject.toml uv.lock
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --extra otel
	@touch $@

demo: env
	$(UV) run pmsgate demo

test: env
	$(UV) run pytest -n $(TEST_WORKERS) --durations=15

lint: env
	$(UV) run ruff check src tests bench tools
	$(UV) run ruff format --check src tests bench tools
	$(UV) run mypy
	$(UV) run deptry src
	$(UV) run lint-imports
	$(UV) run vulture

# The built wheel, installed without uv.lock (newest and lowest allowed versions), imports.
package-check: env
	UV="$(UV)" .ci/check-packaging

# The image, labelled with its version, commit and build time (docs/deploy.md, "The image").
ENGINE ?= podman
IMAGE ?= pmsgate:$(shell $(UV) version --short 2>/dev/null || echo dev)
image:
	$(ENGINE) build -f Containerfile -t $(IMAGE) \
		--build-arg VERSION="$$($(UV) version --short)" \
		--build-arg REVISION="$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
		--build-arg CREATED="$$(date -u +%Y-%m-%dT%H:%M:%SZ)" .

# The translation catalogue (docs/i18n.md): extract every message into messages.pot, then
# add the new ones to each language's messages.po (untranslated until someone writes them).
I18N := src/pmsgate/i18n
messages: env
	$(UV) run pybabel extract --no-location --sort-output -F babel.cfg -k N_ -o $(I18N)/messages.pot .
	$(UV) run pybabel update --no-fuzzy-matching --ignore-obsolete --width 100 -i $(I18N)/messages.pot -d $(I18N)/locales -D messages -l it

format: env
	$(UV) run ruff check --fix src tests bench tools
	$(UV) run ruff format src tests bench tools

serve: env
	$(UV) run pmsgate serve --port $(PORT)

sandbox: env
	$(UV) run pmsgate sandbox --port $(SANDBOX_PORT)

bench: env
	$(UV) run python -m bench.run

clean:
	rm -rf .venv .pmsgate .pytest_cache .mypy_cache .ruff_cache test-artifacts
