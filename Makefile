# Airlock: `make run` for a first look, `make test` for the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install migrate seed lint bench bench-tools load worker beat clean

$(VENV)/.installed: pyproject.toml sdk/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit("Airlock needs Python 3.11 or newer") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' -e ./sdk
	@touch $@

install: $(VENV)/.installed

migrate: install
	$(PY) manage.py migrate --noinput

seed: migrate
	$(PY) manage.py seed_demo

run: seed
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py serve --host $(HOST) --port $(PORT)

test: install
	$(PY) -m pytest

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

# Debian's wrk and nginx, which the benches need, installed when missing (as root, as on these machines).
bench-tools:
	@command -v wrk >/dev/null 2>&1 && { command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; } \
	  || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk nginx-light; } \
	  || echo "Install wrk and nginx-light (apt-get) to run the benches."

bench: install bench-tools
	AIRLOCK_DEMO=1 $(PY) -m bench

# 200 agents for 60 s through the production process model (Granian WSGI, 2 workers; the uvicorn stream
# process; the nginx front door), a Celery worker, PostgreSQL and Redis; then the books.
load: install bench-tools
	AIRLOCK_DEMO=1 $(PY) -m bench.load --agents $${LOAD_AGENTS:-200} --seconds $${LOAD_SECONDS:-60}

worker: install
	$(VENV)/bin/celery -A console worker --loglevel INFO

beat: install
	$(VENV)/bin/celery -A console beat --loglevel INFO

clean:
	rm -rf $(VENV) staticfiles airlock.sqlite3 var
