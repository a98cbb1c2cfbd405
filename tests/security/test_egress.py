"""The egress guard, attacked: every server-side request path × every way to write an internal address.

Production settings (private addresses refused, ports 80/443/8080/8443 plus the test listeners'). The
true edges are real: a local HTTP listener on 127.0.0.1 counts every request it gets, DNS is
`socket.getaddrinfo` answering what a test says (rebinding: a public answer first, loopback after),
and `socket.socket.connect` records every connection and lets only loopback through (a public address
answers "connection refused", so no test traffic leaves the machine).
"""

from __future__ import annotations

import contextlib
import errno
import html
import http.server
import ipaddress
import re
import socket
import ssl
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpcore
import httpx
import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from approvals.models import DeliveryStatus, WebhookDelivery
from console.env import port_list
from console.models import Team
from lib import egress
from registry.snapshots import publish_snapshot
from reliability.jobs import check_job
from reliability.models import LongJob
from reliability.reconcile import check_with_tool, open_reconciliation
from reliability.services import register_mcp_server
from runs.adapters.python import register
from runs.events import append_event
from runs.models import ToolCall
from tests.conftest import login
from tests.runs.factories import grant, manifest, run_for
from traces.models import TraceSettings
from traces.recording import record_span
from traces.services import forward_spans, trace_settings_for

pytestmark = pytest.mark.django_db
PUBLIC = "93.184.215.14"  # a global address; the test network refuses it, nothing leaves the machine
RAW_ERROR_TEXT = re.compile(
    r"Errno|Traceback|ConnectError|ConnectTimeout|Connection refused|"
    r"HTTPStatusError|ExceptionGroup|\[SSL"
)


# --- the edges: a listener, DNS and connect() ---------------------------------------------------


class Listener:
    """A real HTTP server on 127.0.0.1 that records every request and answers `answer`."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self.answer: tuple[int, dict, bytes] = (200, {}, b'{"status": "succeeded"}')
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                listener.requests.append((self.command, self.path, self.headers.get("Host", "")))
                status, headers, body = listener.answer
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_DELETE = _serve

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.stop()


@pytest.fixture
def target():
    """A second listener: where a redirect points."""
    server = Listener()
    yield server
    server.stop()


REAL_GETADDRINFO = socket.getaddrinfo
REAL_CONNECT = socket.socket.connect
REAL_CONNECT_EX = socket.socket.connect_ex


class Network:
    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: list[str] = []
        self.connects: list[tuple[str, int]] = []

    def resolve(self, name: str, *answers: list[str]) -> None:
        """`name` resolves to each answer in turn; the last one repeats."""
        self.answers[name] = [list(answer) for answer in answers]

    def getaddrinfo(self, host, port, *args, **kwargs):
        name = (host.decode() if isinstance(host, bytes) else str(host or "")).lower()
        if name not in self.answers:
            return REAL_GETADDRINFO(host, port, *args, **kwargs)
        self.lookups.append(name)
        queue = self.answers[name]
        ips = queue.pop(0) if len(queue) > 1 else queue[0]
        port = int(port or 0)
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (ip, port, 0, 0))
            if ":" in ip
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))
            for ip in ips
        ]

    def _allow(self, address) -> bool:
        self.connects.append((address[0], address[1]))
        return ipaddress.ip_address(address[0].split("%")[0]).is_loopback

    def install(self, monkeypatch) -> None:
        network = self

        def connect(sock, address):
            if isinstance(address, tuple) and not network._allow(address):
                raise ConnectionRefusedError(errno.ECONNREFUSED, "the test network only reaches loopback")
            return REAL_CONNECT(sock, address)

        def connect_ex(sock, address):
            if isinstance(address, tuple) and not network._allow(address):
                return errno.ECONNREFUSED
            return REAL_CONNECT_EX(sock, address)

        monkeypatch.setattr(socket, "getaddrinfo", self.getaddrinfo)
        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture
def network(monkeypatch):
    net = Network()
    net.install(monkeypatch)
    return net


@pytest.fixture
def production(settings, listener, target):
    """DEBUG off and the guard's production defaults; the listeners' ports are allowed, so that the
    address rule (not the port rule) is what refuses them."""
    settings.DEBUG = False
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    settings.AIRLOCK_EGRESS_PORTS = [80, 443, 8080, 8443, listener.port, target.port]
    settings.AIRLOCK_EGRESS_ALLOW_HOSTS = []
    settings.AIRLOCK_WEBHOOK_MAX_ATTEMPTS = 1
    settings.AIRLOCK_RETRY_BASE_SECONDS, settings.AIRLOCK_RETRY_CAP_SECONDS = 0.01, 0.02
    settings.AIRLOCK_JOB_FIRST_CHECK_SECONDS = settings.AIRLOCK_JOB_CHECK_BASE_SECONDS = 0
    settings.AIRLOCK_JOB_MAX_CHECKS = 5
    settings.AIRLOCK_RECONCILE_FIRST_CHECK_SECONDS = 0
    return settings


# --- the world and the paths ---------------------------------------------------------------------


@register("egress_test.start_export", effect="read")
def _start_export(*, arguments, context):
    return {"job_id": "job-1", "status": "running"}


@register("egress_test.write_note", effect="read")
def _write_note(*, arguments, context):
    return {"ok": True}


@dataclass
class World:
    acme: object
    agent: object
    tenant_admin: object
    owner: object
    platform_admin: object
    capture: object


@pytest.fixture
def world(acme, agent, tenant_admin, owner, platform_admin, django_capture_on_commit_callbacks) -> World:
    grant(acme, "*")
    return World(acme, agent, tenant_admin, owner, platform_admin, django_capture_on_commit_callbacks)


def _skill(name: str, adapter: str, *, effect: str = "read", **execution) -> None:
    from console.models import Team
    from registry.models import Skill, SkillVersion

    team = Team.objects.get_or_create(slug="support-tools", defaults={"name": "Support tools"})[0]
    body = manifest(name, adapter=adapter, effect=effect, timeout_ms=3000)
    body["execution"].update(execution)
    entry, _ = Skill.objects.get_or_create(
        name=name, defaults={"skill_id": body["skill_id"], "namespace": name.split(".")[0], "owner_team": team}
    )
    SkillVersion.objects.create(
        skill=entry,
        version="1.0.0",
        major=1,
        status="active",
        manifest=body,
        effect=effect,
        data_classification="internal",
    )
    publish_snapshot(reason="egress test")


def _gate(w: World, name: str):
    from runs.gate import process_batch

    run = run_for(w.agent)
    return run, process_batch(run=run, calls=[{"call_id": "c1", "name": name, "arguments": {}}])[0]


def _forward_and_show(w: World) -> str:
    """Forward a span, then the settings page: what the tenant admin is shown about the last attempt."""
    record_span(run=run_for(w.agent), kind="other", name="probe", started_at=timezone.now())
    with contextlib.suppress(httpx.HTTPError):  # a transient failure is raised for the task's retry
        forward_spans(tenant_id=w.acme.pk)
    error = TraceSettings.objects.get(tenant=w.acme).last_forward_error
    page = login(Client(), w.tenant_admin).get(reverse("traces:settings", args=[w.acme.slug]))
    assert page.status_code == 200 and html.escape(error) in page.content.decode()
    return error


def via_webhook(base: str, w: World) -> str:
    run = run_for(w.agent, callback_url=f"{base}/hook", webhook_secret="whsec-egress")
    with w.capture(execute=True):
        append_event(run=run, kind="run.status", payload={"status": "running"})
    delivery = WebhookDelivery.objects.get(run=run)
    assert delivery.status != DeliveryStatus.DELIVERED
    return delivery.last_error


def via_trace_forwarding(base: str, w: World) -> str:
    """An endpoint stored earlier (before the guard, or while its name pointed elsewhere)."""
    TraceSettings.objects.filter(pk=trace_settings_for(w.acme).pk).update(
        forward_enabled=True, forward_endpoint=f"{base}/v1/traces"
    )
    return _forward_and_show(w)


def via_trace_settings_form(base: str, w: World) -> str:
    response = login(Client(), w.tenant_admin).post(
        reverse("traces:settings", args=[w.acme.slug]),
        {"retention_days": 30, "forward_enabled": "on", "forward_endpoint": f"{base}/v1/traces", "forward_headers": ""},
    )
    if response.status_code == 400:  # refused when saved
        return response.content.decode()
    assert response.status_code == 302  # the name was public when it was checked: the send checks it again
    return _forward_and_show(w)


def via_http_skill(base: str, w: World) -> str:
    _skill("egress.probe", f"{base}/skill")
    _, result = _gate(w, "egress.probe")
    assert result["status"] == "error"
    return result["error"]["message"]


def via_mcp_import(base: str, w: World) -> str:
    response = login(Client(), w.platform_admin).post(
        reverse("registry:import_mcp"), {"target": f"{base}/mcp", "team": "support-tools", "server_name": "probe"}
    )
    assert response.status_code == 400
    return response.content.decode()


def via_mcp_execution(base: str, w: World) -> str:
    _skill("probe.lookup", "mcp://probe/lookup")  # owned by support-tools, which the server is shared with
    register_mcp_server(name="probe", transport="http", url=f"{base}/mcp").shared_with.add(
        Team.objects.get(slug="support-tools")
    )
    _, result = _gate(w, "probe.lookup")
    assert result["status"] == "error"
    return result["error"]["message"]


def via_job_status(base: str, w: World) -> str:
    _skill("egress.export", "python:egress_test.start_export", effect="write", job_status=f"{base}/jobs/{{job_id}}")
    run, result = _gate(w, "egress.export")
    assert result["status"] == "ok", result
    job = check_job(job_id=LongJob.objects.get(run=run).pk)
    return job.last_error


def via_reconciliation(base: str, w: World) -> str:
    _skill("egress.note", "python:egress_test.write_note", effect="write", reconcile=f"{base}/keys/{{idempotency_key}}")
    run, result = _gate(w, "egress.note")
    assert result["status"] == "ok", result
    item = open_reconciliation(call=ToolCall.objects.get(run=run, call_id="c1"), reason="timeout")
    check_with_tool(item_id=item.pk)
    item.refresh_from_db()
    return item.last_check_error


PATHS = {
    "webhook": via_webhook,
    "trace_forwarding": via_trace_forwarding,
    "trace_settings_form": via_trace_settings_form,
    "http_skill": via_http_skill,
    "mcp_import": via_mcp_import,
    "mcp_execution": via_mcp_execution,
    "job_status": via_job_status,
    "reconciliation": via_reconciliation,
}
FORM_PATHS = {"trace_settings_form"}  # Django's URLField may refuse an odd literal before the guard sees it

# (id, host as written in the URL, the rule the user must be shown)
ADDRESS_FORMS = [
    ("ipv4-loopback", "127.0.0.1:{port}", "loopback"),
    ("unspecified", "0.0.0.0:{port}", "unspecified address"),
    ("ipv6-loopback", "[::1]:{port}", "loopback"),
    ("ipv4-mapped-ipv6", "[::ffff:127.0.0.1]:{port}", "loopback"),
    ("cloud-metadata", "169.254.169.254", "link-local (cloud metadata)"),
    ("cgnat", "100.64.0.1", "shared address space (CGNAT)"),
    ("decimal", "2130706433:{port}", "loopback"),
    ("octal", "0177.0.0.1:{port}", "loopback"),
    ("hex", "0x7f.1:{port}", "loopback"),
    ("short", "127.1:{port}", "loopback"),
    ("localhost", "localhost:{port}", "loopback"),
    ("name-to-loopback", "internal.example.test:{port}", "loopback"),
    ("name-to-private", "intranet.example.test", "private range"),
]


def _no_internal_connection(network: Network, *ports: int) -> None:
    internal = [(ip, port) for ip, port in network.connects if port in {*ports, 80, 443} and ip != PUBLIC]
    assert internal == [], f"connected to {internal}"


@pytest.mark.parametrize("form_id,host,rule", ADDRESS_FORMS, ids=[f[0] for f in ADDRESS_FORMS])
@pytest.mark.parametrize("path", list(PATHS))
def test_every_server_side_path_refuses_every_internal_address(
    path, form_id, host, rule, production, network, listener, world
):
    network.resolve("internal.example.test", ["127.0.0.1"])
    network.resolve("intranet.example.test", ["10.20.30.40"])
    text = PATHS[path](f"http://{host.format(port=listener.port)}", world)

    assert listener.requests == []
    _no_internal_connection(network, listener.port)
    assert rule in text or (path in FORM_PATHS and "Enter a valid URL" in text), text[:500]
    assert not RAW_ERROR_TEXT.search(text), text[:500]


@pytest.mark.parametrize("path", list(PATHS))
def test_dns_rebinding_connects_only_to_the_vetted_address(path, production, network, listener, world):
    """The name is public when it is checked and loopback when asked again: whatever connects, connects to
    the address it vetted (the public one), and a later answer is refused, never used."""
    network.resolve("rebind.example.test", [PUBLIC], ["127.0.0.1"])
    text = PATHS[path](f"http://rebind.example.test:{listener.port}", world)

    assert listener.requests == []
    assert [ip for ip, port in network.connects if port == listener.port] in ([], [PUBLIC], [PUBLIC, PUBLIC])
    assert "loopback" in text or "could not be reached" in text or "refused the connection" in text, text[:500]
    assert not RAW_ERROR_TEXT.search(text), text[:500]


@pytest.mark.parametrize("path", list(PATHS))
def test_a_redirect_to_loopback_is_not_followed(path, production, network, listener, target, world, settings):
    """The first hop is an allowed internal host (the allowlist seam); it answers 302 to loopback."""
    settings.AIRLOCK_EGRESS_ALLOW_HOSTS = ["hooks.allowed.test"]
    network.resolve("hooks.allowed.test", ["127.0.0.1"])
    listener.answer = (302, {"Location": f"http://127.0.0.1:{target.port}/stolen"}, b"{}")
    text = PATHS[path](f"http://hooks.allowed.test:{listener.port}", world)

    assert listener.requests, "the allowed first hop was reached"
    assert all(host == f"hooks.allowed.test:{listener.port}" for _, _, host in listener.requests)
    assert target.requests == []
    assert f"127.0.0.1:{target.port}" not in text  # the Location is not shown either
    assert not RAW_ERROR_TEXT.search(text), text[:500]


@pytest.mark.parametrize("form_id,host,rule", ADDRESS_FORMS, ids=[f[0] for f in ADDRESS_FORMS])
def test_the_mcp_server_form_refuses_internal_urls(form_id, host, rule, production, network, listener, world):
    network.resolve("internal.example.test", ["127.0.0.1"])
    network.resolve("intranet.example.test", ["10.20.30.40"])
    response = login(Client(), world.platform_admin).post(
        reverse("reliability:mcp_server_list"),
        {"name": "probe", "transport": "http", "url": f"http://{host.format(port=listener.port)}/mcp"},
    )
    assert response.status_code == 400
    assert rule in response.content.decode() or "Enter a valid URL" in response.content.decode()
    assert listener.requests == []


# --- the guard itself ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address,rule",
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified address"),
        ("::", "unspecified address"),
        ("10.0.0.1", "private range"),
        ("172.16.5.4", "private range"),
        ("192.168.1.1", "private range"),
        ("fd00::1", "private range"),
        ("fec0::1", "private range"),
        ("169.254.169.254", "link-local (cloud metadata)"),
        ("fe80::1", "link-local (cloud metadata)"),
        ("100.64.0.1", "shared address space (CGNAT)"),
        ("100.127.255.254", "shared address space (CGNAT)"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("240.0.0.1", "reserved range"),
        ("255.255.255.255", "reserved range"),
        ("192.0.2.1", "reserved range"),
        ("198.18.0.1", "reserved range"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local (cloud metadata)"),
        ("::127.0.0.1", "loopback"),
        ("64:ff9b::a00:1", "private range"),
        ("2002:7f00:1::", "loopback"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo, client 127.0.0.1
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_address_rules(address, rule):
    assert egress.address_rule(ipaddress.ip_address(address)) == rule


@pytest.mark.parametrize(
    "url,message",
    [
        ("ftp://example.com/", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("gopher://127.0.0.1:70/", "only http and https"),
        ("http:///nohost", "no host"),
        ("http://8.8.8.8:6379/", "port 6379 is not an allowed port"),
        ("http://8.8.8.8:99999/", "malformed"),
        ("http://[::1/", "malformed"),
    ],
)
def test_scheme_port_and_shape_are_refused_before_any_lookup(url, message, settings, network):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    settings.AIRLOCK_EGRESS_PORTS = [80, 443, 8080, 8443]
    with pytest.raises(egress.EgressRefused, match=message):
        egress.check_url(url)
    assert network.lookups == [] and network.connects == []


def test_public_urls_pass_and_unresolvable_names_are_left_to_the_connection(settings, network):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    network.resolve("api.example.test", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"])
    egress.check_url("https://api.example.test/v1")
    egress.check_url("https://93.184.215.14/hook")
    egress.check_url("https://no-such-host.invalid/")  # refused at connection time if it resolves badly then


def test_one_bad_address_among_good_ones_refuses_the_name(settings, network):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    network.resolve("mixed.example.test", [PUBLIC, "10.0.0.7"])
    with pytest.raises(egress.EgressRefused, match="private range"):
        egress.check_url("https://mixed.example.test/")


def test_allowlisted_names_and_networks_may_be_private_but_ports_still_count(settings, network):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    settings.AIRLOCK_EGRESS_PORTS = [4318]
    settings.AIRLOCK_EGRESS_ALLOW_HOSTS = ["otel-collector", "10.8.0.0/16"]
    network.resolve("otel-collector", ["172.18.0.5"])
    egress.check_url("http://otel-collector:4318/v1/traces")
    egress.check_url("http://10.8.3.4:4318/v1/traces")
    with pytest.raises(egress.EgressRefused, match="private range"):
        egress.check_url("http://10.9.0.1:4318/")
    with pytest.raises(egress.EgressRefused, match="port 6379"):
        egress.check_url("http://otel-collector:6379/")


def test_the_old_switch_still_refuses(settings):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = True
    settings.AIRLOCK_ALLOW_PRIVATE_CALLBACKS = False
    with pytest.raises(egress.EgressRefused, match="loopback"):
        egress.check_url("http://127.0.0.1/")


def test_the_connection_goes_to_the_address_that_was_vetted(settings, network, monkeypatch):
    """Rebinding at the edge: one lookup per connection, and the socket gets that lookup's address."""
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    network.resolve("rebind.example.test", [PUBLIC], ["127.0.0.1"])
    connected: list[tuple[str, int]] = []

    class Recorder(httpcore.SyncBackend):
        def connect_tcp(self, host, port, **kwargs):
            connected.append((host, port))
            raise httpcore.ConnectError("recorded")

    backend = egress._PinnedBackend()
    monkeypatch.setattr(backend, "_inner", Recorder())
    with pytest.raises(httpcore.ConnectError):
        backend.connect_tcp("rebind.example.test", 443)
    assert connected == [(PUBLIC, 443)] and network.lookups == ["rebind.example.test"]
    with pytest.raises(egress.EgressRefused, match="loopback"):  # the next connection asks again: refused
        backend.connect_tcp("rebind.example.test", 443)
    assert connected == [(PUBLIC, 443)]


def test_a_client_told_to_follow_redirects_still_checks_every_hop(settings, network, listener, target):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    settings.AIRLOCK_EGRESS_ALLOW_HOSTS = ["hooks.allowed.test"]
    network.resolve("hooks.allowed.test", ["127.0.0.1"])
    listener.answer = (302, {"Location": f"http://127.0.0.1:{target.port}/stolen"}, b"{}")
    with egress.client() as http, pytest.raises(egress.EgressRefused, match="loopback"):
        http.get(f"http://hooks.allowed.test:{listener.port}/", follow_redirects=True)
    assert len(listener.requests) == 1 and target.requests == []


async def test_the_async_client_pins_and_refuses_too(settings, network, listener):
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    network.resolve("internal.example.test", ["127.0.0.1"])
    async with egress.async_client() as http:
        for url in (f"http://internal.example.test:{listener.port}/", f"http://0177.0.0.1:{listener.port}/"):
            with pytest.raises(egress.EgressRefused, match="loopback"):
                await http.get(url)
    assert listener.requests == []


# --- TLS to a pinned address still names and verifies the host -----------------------------------


def _certificate(tmp_path: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def test_tls_names_and_verifies_the_host_while_connecting_to_the_vetted_ip(settings, network, tmp_path, monkeypatch):
    name = "secure.example.test"
    cert_file, key_file = _certificate(tmp_path, name)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file, key_file)
    seen_sni: list[str | None] = []
    server_context.sni_callback = lambda sock, sni, ctx: seen_sni.append(sni)
    server = Listener(tls=server_context)
    client_context = ssl.create_default_context(cafile=str(cert_file))
    monkeypatch.setattr(egress, "_ssl_context", lambda: client_context)
    settings.AIRLOCK_EGRESS_ALLOW_PRIVATE = False
    settings.AIRLOCK_EGRESS_ALLOW_HOSTS = [name]  # a trusted internal service, reached by name
    network.resolve(name, ["127.0.0.1"])
    try:
        with egress.client() as http:
            response = http.get(f"https://{name}:{server.port}/hello")
        assert response.status_code == 200
        assert seen_sni == [name] and server.requests[0][2] == f"{name}:{server.port}"
        assert ("127.0.0.1", server.port) in network.connects
        settings.AIRLOCK_EGRESS_ALLOW_HOSTS = ["127.0.0.1/32"]
        with egress.client() as http, pytest.raises(httpx.ConnectError, match="certificate"):
            http.get(f"https://127.0.0.1:{server.port}/hello")  # the certificate names the host, not the IP
    finally:
        server.stop()


# --- no path around the guard --------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
RAW_HTTP = re.compile(
    r"\bhttpx2?\.(get|post|put|patch|delete|request|stream|Client|AsyncClient)\(|"
    r"urllib\.request|http\.client|\burlopen\(|\brequests\.(get|post)\("
)


def test_no_server_code_sends_http_around_the_guard():
    """Every outgoing request of the server goes through lib/egress.py; `sdk/` (the agents' client),
    `simulation/` and `bench/` (tools that call Airlock itself) are not the server."""
    offenders = []
    tops = [
        top
        for top in ROOT.iterdir()
        if top.is_dir()
        and not top.name.startswith(".")
        and top.name
        not in {"tests", "sdk", "simulation", "bench", "var", "static", "templates", "docs", "airlock.egg-info"}
    ]
    for path in [file for top in tops for file in top.rglob("*.py")]:
        relative = path.relative_to(ROOT)
        if relative == Path("lib/egress.py") or "migrations" in relative.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        offenders += [f"{relative}: {m.group(0)}" for m in RAW_HTTP.finditer(text)]
        if "streamable_http_client(" in text and "egress.async_client(" not in text:
            offenders.append(f"{relative}: streamable_http_client without the guarded client")
    assert offenders == []


@pytest.mark.parametrize("items,ports", [(["*"], None), (["80", "443"], [80, 443])])
def test_port_setting(items, ports):
    assert port_list("AIRLOCK_EGRESS_PORTS", items) == ports


@pytest.mark.parametrize("items", [["http"], ["0"], ["70000"], ["80", "*"]])
def test_port_setting_refuses_nonsense(items):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="AIRLOCK_EGRESS_PORTS"):
        port_list("AIRLOCK_EGRESS_PORTS", items)
