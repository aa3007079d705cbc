"""TLS as distributed does it, with stock processes and certificates made here.

The scheduler runs with `--tls-ca-file/--tls-cert/--tls-key` (so, as in
`dask scheduler`, encryption is required and it listens on tls://); stock
`dask worker`s with their nannies and a stock Client with a Security object
connect with certificates signed by the test's CA. Then bad peers (plain TCP,
garbage, certificates foreign, expired, not yet valid or missing, TLS 1.2)
are tried against the same scheduler: each is refused, the good
client keeps working, and the scheduler's goroutines and descriptors (its
own footprint in identity) come back to where they were.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import socket
import ssl
import struct
import time
from pathlib import Path

import msgpack
import numpy as np
import pandas as pd
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from distributed import Client
from distributed.core import rpc
from distributed.security import Security

from cluster import GoScheduler, Workers, scheduler_identity, wait_for

pytestmark = pytest.mark.timeout(300)

CONNECT_TIMEOUT = 2  # s: distributed.comm.timeouts.connect for the scheduler here


class CA:
    """A certificate authority that writes PEM files into a directory."""

    def __init__(self, tmp: Path, name: str):
        self.tmp = tmp
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = tmp / f"{name}-ca.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def leaf(self, name: str, start: float = -3600, end: float = 86400) -> tuple[str, str]:
        """cert and key files valid from now+start to now+end seconds;
        no host name in it (distributed checks none)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now + datetime.timedelta(seconds=start)).not_valid_after(now + datetime.timedelta(seconds=end))
            .sign(self.key, hashes.SHA256())
        )
        cp, kp = self.tmp / f"{name}-cert.pem", self.tmp / f"{name}-key.pem"
        cp.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        kp.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))
        return str(cp), str(kp)


def client_context(ca: Path, cert: str | None, key: str | None, max_version=None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(cert, key)
    if max_version:
        ctx.maximum_version = max_version
    return ctx


def footprint(address: str, security: Security) -> tuple[int, int]:
    """The scheduler's goroutines and descriptors, from its identity."""
    async def go():
        async with rpc(address, connection_args=security.get_connection_args("client")) as r:
            return await r.identity()
    ours = asyncio.run(asyncio.wait_for(go(), 30))["daskgo"]
    # descriptors other than the pool's connections to workers, which the
    # scheduler keeps for reuse (a gather through it opens one)
    return ours["goroutines"], ours["open_fds"] - ours["pool_open"]


def steady_footprint(address: str, security: Security) -> tuple[int, int]:
    """The footprint once the peers' own connections have settled (stock
    workers open a pooled RPC connection for their first heartbeat), i.e.
    the same in three readings half a second apart."""
    readings = [footprint(address, security)]
    deadline = time.monotonic() + 30
    while len(readings) < 3 or len(set(readings[-3:])) > 1:
        assert time.monotonic() < deadline, f"the footprint never settled: {readings}"
        time.sleep(0.5)
        readings.append(footprint(address, security))
    return readings[-1]


def refused(hostport: tuple[str, int], ctx: ssl.SSLContext | None, payload: bytes = b"") -> str:
    """Connect (TLS when ctx is given) and try a dask handshake; returns how
    the server refused, or fails the test when it did not."""
    sock = socket.create_connection(hostport, timeout=10)
    try:
        if ctx is not None:
            try:
                sock = ctx.wrap_socket(sock)
            except (ssl.SSLError, ConnectionError, OSError) as e:
                return f"handshake: {e}"
        hs = msgpack.packb({"compression": None, "python": [3, 11, 0], "pickle-protocol": 5})
        data = payload or struct.pack("<QQ", 1, len(hs)) + hs
        try:
            sock.sendall(data)
            got = sock.recv(4096)  # the server's handshake, or nothing: closed
        except (ssl.SSLError, ConnectionError, OSError) as e:
            return f"after handshake: {e}"
        # nothing (closed), or a TLS alert record (0x15) to a peer that
        # did not speak TLS
        assert not got or got[0] == 0x15, f"the server answered {got[:40]!r}: not refused"
        return "alert" if got else "closed"
    finally:
        sock.close()


@pytest.fixture
def tls_cluster(tmp_path):
    ca = CA(tmp_path, "cluster")
    cert, key = ca.leaf("peer")
    flags = ["--tls-ca-file", str(ca.path), "--tls-cert", cert, "--tls-key", key]
    env = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": f"{CONNECT_TIMEOUT}s",
           "DASK_DISTRIBUTED__COMM__TLS__MIN_VERSION": "1.3"}
    sched = GoScheduler(tmp_path, *flags, "--log-level", "debug", env=env)
    workers = Workers(tmp_path)
    try:
        sched.start()
        assert sched.address.startswith("tls://127.0.0.1:"), sched.address
        for i in range(2):
            workers.start(sched.address, f"w{i}", *flags, "--host", "tls://127.0.0.1", nthreads=2)
        security = Security(tls_ca_file=str(ca.path), tls_client_cert=cert, tls_client_key=key, require_encryption=True)
        with Client(sched.address, security=security, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
            yield sched, c, security, ca
    finally:
        workers.stop()
        sched.stop()


def test_stock_cluster_over_tls_computes_and_shuffles(tls_cluster):
    import dask.array as da
    import dask.dataframe as dd

    sched, c, security, ca = tls_cluster
    info = scheduler_identity(c)
    assert info["address"].startswith("tls://")
    assert len(info["workers"]) == 2 and all(a.startswith("tls://") for a in info["workers"])
    assert all(w["nanny"].startswith("tls://") for w in info["workers"].values())

    x = da.arange(200_000, chunks=10_000).reshape(400, 500)
    assert int(c.compute((x @ x.T).trace()).result()) == int(np.trace(np.arange(200_000).reshape(400, 500) @ np.arange(200_000).reshape(400, 500).T))

    rng = np.random.default_rng(0)
    pdf = pd.DataFrame({"k": rng.integers(0, 50, 3000), "v": rng.random(3000), "u": np.arange(3000)})
    shuffled = dd.from_pandas(pdf, npartitions=6).shuffle(on="k", shuffle_method="p2p")
    parts = c.gather(c.compute(shuffled.to_delayed()))
    got = pd.concat(parts).sort_values("u").reset_index(drop=True)
    pd.testing.assert_frame_equal(got, pdf.sort_values("u").reset_index(drop=True), check_exact=True)
    owners = [set(p.k) for p in parts]
    assert all(not (a & b) for i, a in enumerate(owners) for b in owners[i + 1:])
    # the scheduler dialed the workers over TLS (gather from workers goes
    # through it for who_has; a broadcast makes it dial every worker)
    assert c.run(lambda: 1) == {w: 1 for w in info["workers"]}


def test_bad_peers_are_refused_and_nothing_leaks(tls_cluster, tmp_path):
    sched, c, security, ca = tls_cluster
    host, port = sched.address.removeprefix("tls://").rsplit(":", 1)
    hostport = (host, int(port))
    assert c.submit(sum, [1, 2]).result() == 3
    before = steady_footprint(sched.address, security)

    other = CA(tmp_path / "other", "other") if (tmp_path / "other").mkdir() is None else None
    good_cert, good_key = ca.leaf("client2")
    expired = ca.leaf("expired", start=-172800, end=-86400)
    not_yet = ca.leaf("notyet", start=86400, end=172800)
    foreign = other.leaf("foreign")
    cases = {
        "plain TCP on the TLS port": (None, b""),
        "garbage instead of a ClientHello": (None, b"\x16\x03\x01\x02\x00" + b"\xff" * 600),
        "certificate from another CA": (client_context(ca.path, *foreign), b""),
        "expired certificate": (client_context(ca.path, *expired), b""),
        "not yet valid certificate": (client_context(ca.path, *not_yet), b""),
        "no client certificate": (client_context(ca.path, None, None), b""),
        "TLS 1.2, below the minimum 1.3": (client_context(ca.path, good_cert, good_key, ssl.TLSVersion.TLSv1_2), b""),
    }
    outcomes = {name: refused(hostport, ctx, payload) for name, (ctx, payload) in cases.items()}

    # a peer that connects and never starts the handshake is closed after
    # distributed.comm.timeouts.connect
    silent = socket.create_connection(hostport)
    t0 = time.monotonic()
    silent.settimeout(CONNECT_TIMEOUT + 10)
    assert silent.recv(1) == b"", "a silent peer got bytes"
    waited = time.monotonic() - t0
    silent.close()
    assert CONNECT_TIMEOUT * 0.8 <= waited <= CONNECT_TIMEOUT + 5, waited

    # the good client still works, and a new one connects
    assert c.submit(sum, [3, 4]).result() == 7
    with Client(sched.address, security=Security(tls_ca_file=str(ca.path), tls_client_cert=good_cert,
                                                 tls_client_key=good_key, require_encryption=True), timeout=30) as c2:
        assert c2.submit(sum, [5, 6]).result() == 11
    # each refusal is in the scheduler's log with the peer's address
    text = sched.logs_when(lambda t: t.count("handshake failed") >= len(cases))
    refusals = [json.loads(line) for line in text.splitlines()
                if line.startswith("{") and "handshake failed" in line]
    assert len(refusals) >= len(cases), (outcomes, refusals)
    assert all(r.get("peer", "").startswith("tls://127.0.0.1:") for r in refusals)

    seen = []

    def settled():
        now = footprint(sched.address, security)
        seen.append(now)
        return now if now[0] <= before[0] and now[1] <= before[1] else None
    try:
        wait_for(settled, 15, f"goroutines and descriptors back to {before}")
    except TimeoutError:
        pytest.fail(f"goroutines and descriptors {seen[-1]}, {before} before the bad peers")


def test_a_thousand_stalled_handshakes_do_not_keep_a_good_client_out(tls_cluster):
    import resource

    sched, c, security, ca = tls_cluster
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= 1200, f"this test needs 1,200 file descriptors; the hard limit is {hard}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    host, port = sched.address.removeprefix("tls://").rsplit(":", 1)
    before = steady_footprint(sched.address, security)
    stalled = []
    try:
        for _ in range(1000):
            stalled.append(socket.create_connection((host, int(port))))
        t0 = time.monotonic()
        cert, key = ca.leaf("late-client")
        with Client(sched.address, security=Security(tls_ca_file=str(ca.path), tls_client_cert=cert,
                                                     tls_client_key=key, require_encryption=True), timeout=5) as c2:
            assert c2.submit(sum, [1, 1]).result(timeout=5) == 2
        assert time.monotonic() - t0 < 5
    finally:
        for s in stalled:
            s.close()
    wait_for(lambda: (lambda now: now if now[0] <= before[0] and now[1] <= before[1] else None)(
        footprint(sched.address, security)), 20, f"goroutines and descriptors back to {before}")


def test_plain_tcp_is_refused_when_encryption_is_required(tmp_path):
    """require-encryption with a tcp:// listen address refuses to start,
    naming the address, as distributed's listener does."""
    ca = CA(tmp_path, "cluster")
    cert, key = ca.leaf("peer")
    sched = GoScheduler(tmp_path, "--protocol", "tcp", "--tls-ca-file", str(ca.path), "--tls-cert", cert, "--tls-key", key)
    try:
        with pytest.raises(RuntimeError, match="exited"):
            sched.start(timeout=20)
    finally:
        sched.stop()  # also one that started after all, or is still starting
    assert "encryption required" in sched.logs()


def test_dashboard_over_https(tmp_path):
    """distributed.scheduler.dashboard.tls.cert/key serve the HTTP routes
    over HTTPS (as start_http_server's ssl_options do)."""
    import urllib.request

    from cluster import free_port

    ca = CA(tmp_path, "web")
    cert, key = ca.leaf("dashboard")
    port = free_port()
    sched = GoScheduler(tmp_path, "--dashboard-address", f"127.0.0.1:{port}",
                        env={"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT": cert,
                             "DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY": key})
    try:
        sched.start()
        ctx = ssl.create_default_context(cafile=str(ca.path))
        ctx.check_hostname = False
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/health", context=ctx, timeout=10) as r:
            assert r.read() == b"ok"
        with pytest.raises(Exception):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10).read()
    finally:
        sched.stop()
