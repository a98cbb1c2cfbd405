# Airlock's image: the same code runs the web workers (Granian WSGI, the default command), the stream
# process (uvicorn ASGI), the Celery worker and beat; docker-compose.yml puts the nginx front door before them.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    AIRLOCK_VAR_DIR=/app/var \
    STATIC_ROOT=/app/staticfiles \
    FORWARDED_ALLOW_IPS=127.0.0.1,::1

WORKDIR /app
RUN useradd --create-home --uid 10001 airlock
# bubblewrap confines confined: tools (runs/plane/confinement.py); the container runtime must allow user
# namespaces for it, or those tools refuse to run (sandbox_unavailable) rather than run unconfined.
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*

# Dependencies first, so code changes do not reinstall them.
COPY pyproject.toml README.md ./
COPY sdk ./sdk
RUN pip install . ./sdk

COPY . .
# Hashed static files for production; these build-time values are never used at run time.
RUN DEBUG=0 SECRET_KEY=collectstatic-only ALLOWED_HOSTS=build AIRLOCK_SIGNING_KEY=unused AIRLOCK_PUBLIC_URL=https://build \
    python manage.py collectstatic --noinput --verbosity 0 \
 && mkdir -p /app/var && chown airlock:airlock /app/var

USER airlock
EXPOSE 8000
# The web workers (airlock/serving.py, web_command) and the stream process (stream_command, docker-compose.yml)
# take the client's address from X-Forwarded-For only when the connection comes from an address in
# FORWARDED_ALLOW_IPS (set it to your front door's addresses): the login lock and the key-guessing limit count by it.
CMD ["granian", "--interface", "wsgi", "--no-ws", "--host", "0.0.0.0", "--port", "8000", \
     "--workers", "2", "--blocking-threads", "8", "--log-level", "warning", "airlock.wsgi:application"]
