# Airlock: `make run` for a first look, `make test` for the suite.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install migrate seed lint bench bench-tools front-door chromium load worker beat clean

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

# The demo, seeded (or topped up) by `serve --demo`, which shows its logins and new agent keys last.
run: install front-door
	@AIRLOCK_DEMO=$${AIRLOCK_DEMO:-1} $(PY) manage.py migrate --noinput --verbosity 0
	@$(PY) manage.py collectstatic --noinput --verbosity 0
	@AIRLOCK_DEMO=$${AIRLOCK_DEMO:-1} $(PY) manage.py serve --demo --host $(HOST) --port $(PORT)

test: install chromium
	$(PY) -m pytest

# With REDIS_URL, `serve` runs the production process model, whose front door is Debian's nginx: installed
# here when missing and root; otherwise `serve` refuses and says how to get it (or to use `serve --dev`).
front-door:
	@[ -z "$$REDIS_URL" ] || command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] \
	  || { [ "$$(id -u)" = 0 ] && echo "Installing nginx-light, the front door of the production process model" \
	       && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light >/dev/null; } \
	  || echo "nginx is missing: install it (sudo apt-get install nginx-light) for the production process model."

# Debian's Chromium for the browser tests (Playwright's own download does not work here), as .ci/run does.
chromium:
	@[ -n "$$AIRLOCK_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 \
	  || { [ "$$(id -u)" = 0 ] && echo "Installing Chromium for the browser tests" \
	       && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || echo "Chromium is missing, so the browser tests will be skipped: install it (sudo apt-get install chromium) or set AIRLOCK_CHROMIUM."

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
