"""Wire compatibility of package comm with stock distributed, both ways.

1. Stock `distributed.core.rpc` against the Go binary: handshake, identity,
   echo, unknown ops, and bad input from raw sockets that must not disturb
   other clients.
2. Go as the calling side (comm/internal/rpccheck) against a stock
   `distributed.core.Server`.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import subprocess
import sys
import time
import urllib.request

import msgpack
import pytest
from distributed.core import rpc

from conftest import ROOT, stop_process

pytestmark = pytest.mark.timeout(120)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def identity_of(address, **kwargs):
    async with rpc(address) as r:
        return await r.identity(**kwargs)


def dashboard_health(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
        return r.read().decode()


def test_identity_via_stock_rpc(go_scheduler):
    info = run(identity_of(go_scheduler.address, n_workers=0))
    assert info["type"] == "Scheduler"
    assert info["id"].startswith("Scheduler-") and len(info["id"]) == len("Scheduler-") + 36
    assert info["address"] == go_scheduler.address
    # the port announced for the dashboard is the one bound and serving: the
    # default --dashboard-address :8787 (as dask scheduler's), or, when another
    # process holds 8787, a free port with the warning distributed gives
    # (ServerNode.start_http_server). Which of the two is up to the machine;
    # test_cli's deployment test insists on 8787 itself.
    port = info["services"]["dashboard"]
    assert set(info["services"]) == {"dashboard"}
    assert dashboard_health(port) == "ok"
    logs = [json.loads(line) for line in go_scheduler.logs_when(lambda t: '"dashboard at"' in t).splitlines()
            if line.startswith("{")]
    assert [r["port"] for r in logs if r.get("message") == "dashboard at"] == [port]
    fell_back = [r for r in logs if r.get("message", "").startswith("dashboard port is already in use")]
    if port != 8787:
        assert [(r["wanted"], r["port"]) for r in fell_back] == [(":8787", port)]
    else:
        assert fell_back == []
    assert isinstance(info["started"], float) and 0 < info["started"] <= time.time()
    assert (info["n_workers"], info["total_threads"], info["total_memory"]) == (0, 0, 0)
    assert info["workers"] == {}
    # ours: what the process holds (scheduler/server/process.go), live, so
    # not in the scheduler file
    ours = info.pop("daskgo")
    assert ours["goroutines"] > 0 and ours["open_fds"] > 0 and ours["helper_pid"] > 0
    assert ours["footprint"]["tasks"] == ours["footprint"]["per_task"] == 0
    assert ours["heap_alloc"] > 0
    on_file = json.loads(go_scheduler.scheduler_file.read_text())
    # the work-stealing counters move with every balance tick
    assert on_file.pop("stealing")["enabled"] is info.pop("stealing")["enabled"] is True
    assert on_file == info


def test_announced_dashboard_port_is_the_configured_one(tmp_path):
    """--dashboard-address is what identity announces: services["dashboard"]
    is the port the scheduler was started with, and a stock Client builds
    dashboard_link from it and the scheduler's host."""
    from distributed import Client

    from cluster import GoScheduler, free_port

    port = free_port()
    assert port != 8787
    with GoScheduler(tmp_path, "--dashboard-address", f"127.0.0.1:{port}") as sched:
        info = run(identity_of(sched.address))
        assert info["services"] == {"dashboard": port}
        assert json.loads(sched.scheduler_file.read_text())["services"] == {"dashboard": port}
        with Client(sched.address, timeout=30) as c:
            assert c.scheduler_info()["services"] == {"dashboard": port}
            assert c.dashboard_link == f"http://127.0.0.1:{port}/status"


def test_echo_and_unknown_op(go_scheduler):
    async def go():
        async with rpc(go_scheduler.address) as r:
            assert await r.echo(data=b"\x00bytes") == b"\x00bytes"
            assert await r.echo(data=("tuple", 1)) == ("tuple", 1)
            with pytest.raises(Exception, match="no_such_op"):
                await r.no_such_op(x=1)
            # the same connection pool keeps working after the error reply
            assert (await r.identity())["type"] == "Scheduler"
    run(go())


def frames_message(*frames: bytes) -> bytes:
    prelude = struct.pack("<Q", len(frames)) + b"".join(struct.pack("<Q", len(f)) for f in frames)
    return struct.pack("<Q", len(prelude) + sum(map(len, frames))) + prelude + b"".join(frames)


HANDSHAKE = frames_message(msgpack.packb({"compression": None, "python": (3, 11, 7), "pickle-protocol": 5}))

BAD_INPUTS = {
    "garbage instead of handshake": b"GET / HTTP/1.1\r\nHost: scheduler\r\n\r\n",
    "garbage after handshake": HANDSHAKE + b"\xde\xad\xbe\xef" * 64,
    "frame of 2**60 bytes": HANDSHAKE + struct.pack("<QQQ", 16 + 2**60, 1, 2**60),
    "2**40 frames": HANDSHAKE + struct.pack("<QQ", 8, 2**40),
    "truncated frame": HANDSHAKE + struct.pack("<QQQ", 116, 1, 100) + b"ten bytes!",
}


def recv_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)  # the socket timeout turns a hang into a failure
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize("payload", BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_closes_only_that_connection(go_scheduler, payload):
    host, port = go_scheduler.address.removeprefix("tcp://").rsplit(":", 1)

    async def go():
        async with rpc(go_scheduler.address) as bystander:  # connected before and after
            assert (await bystander.identity())["type"] == "Scheduler"
            with socket.create_connection((host, int(port)), timeout=30) as sock:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
                received = await asyncio.to_thread(recv_until_closed, sock)
            # at most the server's own handshake came back, then the close
            assert len(received) <= len(HANDSHAKE)
            assert (await bystander.identity())["type"] == "Scheduler"

    run(go())
    assert run(identity_of(go_scheduler.address))["type"] == "Scheduler"
    assert go_scheduler.proc.poll() is None
    # the warning about this peer, not another one (the dashboard's fallback
    # port is a warning too, when another process holds 8787)
    text = go_scheduler.logs_when(lambda t: any('"level":"warn"' in line and '"peer":"tcp://127.0.0.1:' in line
                                                for line in t.splitlines()))
    warnings = [json.loads(line) for line in text.splitlines()
                if line.startswith("{") and '"level":"warn"' in line]
    # the problem was logged, naming the peer
    assert any(w.get("peer", "").startswith("tcp://127.0.0.1:") for w in warnings), text


def test_non_dict_request_gets_error_reply(go_scheduler):
    host, port = go_scheduler.address.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(HANDSHAKE + frames_message(msgpack.packb([1, 2, 3])))
        sock.shutdown(socket.SHUT_WR)
        data = recv_until_closed(sock)
    msgs = []
    while data:
        _, n = struct.unpack_from("<QQ", data)
        lens = struct.unpack_from(f"<{n}Q", data, 16)
        body = data[16 + 8 * n:]
        msgs.append(msgpack.unpackb(body[:lens[0]]))
        data = body[sum(lens):]
    assert msgs[0]["pickle-protocol"] == 5  # the server's handshake
    assert msgs[1]["status"] == "uncaught-error"
    assert "expected a dict" in msgs[1]["exception"]
    assert run(identity_of(go_scheduler.address))["type"] == "Scheduler"


def test_sigterm_shuts_down_cleanly(go_scheduler):
    assert run(identity_of(go_scheduler.address))["type"] == "Scheduler"
    stop_process(go_scheduler.proc)
    assert go_scheduler.proc.returncode == 0, go_scheduler.logs()
    assert not go_scheduler.scheduler_file.exists()


PY_SERVER = r"""
import asyncio
from distributed.core import Server, Status
from distributed.protocol import to_serialize

acks = []

def ping(payload):
    return {"bytes": payload + b"!", ("tk", 1): "tuple-key", 7: "int-key",
            "nested": {"list": [1, 2.5, None, True], "tuple": (1, "a")}, "set": {3}}

def fail():
    raise ValueError("bad thing")

async def get_data(comm, keys, who=None):
    await comm.write({"status": "OK", "data": {k: to_serialize(b"value-" + k.encode()) for k in keys}})
    acks.append(await comm.read())
    return Status.dont_reply

async def main():
    server = Server({"ping": ping, "fail": fail, "get_data": get_data, "acks": lambda: list(acks)})
    await server.listen("tcp://127.0.0.1:0")
    print(server.address, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.fixture
def python_server():
    proc = subprocess.Popen([sys.executable, "-c", PY_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        address = proc.stdout.readline().strip()
        assert address.startswith("tcp://127.0.0.1:"), f"python server printed {address!r}"
        yield address
    finally:
        stop_process(proc)


@pytest.fixture(scope="session")
def rpccheck_binary(tmp_path_factory):
    path = tmp_path_factory.mktemp("bin") / "rpccheck"
    build = subprocess.run(["go", "build", "-o", str(path), "./comm/internal/rpccheck"],
                           cwd=ROOT, capture_output=True, text=True)
    if build.returncode != 0:
        pytest.fail(f"go build ./comm/internal/rpccheck failed:\n{build.stderr}", pytrace=False)
    return path


def test_go_calls_python_server(python_server, rpccheck_binary):
    done = subprocess.run([str(rpccheck_binary), python_server], capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    hs = out["handshake"]
    assert hs["pickle-protocol"] == 5 and hs["python"] == list(sys.version_info[:3])
    assert hs["compression"] == "" and hs["negotiated-compression"] == ""
    assert hs["negotiated-pickle"] == 5
    assert out["identity"]["type"] == "Server" and out["identity"]["id"].startswith("Server-")

    ping = out["ping"]
    assert ping["bytes"] == {"$bytes": "0001ff21"}
    assert ping['("tk", 1)'] == "tuple-key"
    assert ping["7"] == "int-key"
    assert ping["nested"] == {"list": [1, 2.5, None, True], "tuple": [1, "a"]}
    assert ping["set"] == {"$set": [3]}
    assert out["echo"] == ["x", 1, 2.5]
    assert out["unknown"] is None  # distributed replies None to ops it lacks
    assert "ValueError" in out["fail"] and "bad thing" in out["fail"]

    assert out["get_data"]["status"] == "OK"
    assert out["get_data"]["data"] == {"k": {"$blob": False, "frames": 1}}
    assert out["acks"] == ["OK"]  # Pool.Do let the caller acknowledge on the same comm
    assert out["pool_open"] == 1  # every pooled call reused one connection


def test_heartbeat_metrics_reach_scheduler_info_and_the_scheduler_file(go_scheduler, tmp_path):
    """heartbeat_worker is read lazily (scheduler/server/lazydecode.go
    heartbeatFast: the metrics dict kept undecoded); a stock Client's
    scheduler_info() and /json/identity.json still show the stock worker's
    get_metrics() dict as it sent it."""
    from distributed import Client

    from cluster import Workers, stock_scheduler_info

    workers = Workers(tmp_path)
    try:
        workers.start(go_scheduler.address, "hb", "--no-nanny")
        with Client(go_scheduler.address, timeout=30) as c:
            c.wait_for_workers(1, timeout=60)
            # the worker's first heartbeat comes at once; later ones every 0.5 s
            deadline = time.monotonic() + 30
            while True:
                # the stock Client's own scheduler_info(), asked again while
                # its cached copy lists no workers (see stock_scheduler_info)
                (info,) = stock_scheduler_info(c)["workers"].values()
                if "bandwidth" in info["metrics"] or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            m = info["metrics"]
            assert isinstance(m["bandwidth"]["total"], (int, float)) and m["bandwidth"]["total"] > 0
            assert isinstance(m["memory"], int) and m["memory"] > 0
            assert isinstance(m["cpu"], float) and isinstance(m["time"], float)
            assert m["task_counts"] == {} or isinstance(m["task_counts"], dict)
            port = c.scheduler_info()["services"]["dashboard"]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/identity.json", timeout=10) as r:
                on_http = json.loads(r.read())
            (w,) = on_http["workers"].values()
            assert w["metrics"]["memory"] > 0 and set(w["metrics"]) == set(m)
    finally:
        workers.stop()
