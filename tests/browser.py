"""Headless Chromium driven over the DevTools protocol, for the dashboard's
browser tests and its page-load bench (scripts/bench/dashboard_load.py).

Chromium is Debian's `chromium`, started here as a direct child with its
own profile directory and stopped by its PID (SIGTERM, then SIGKILL), also
when the test fails. The page is driven over one DevTools websocket
(websocket-client): navigate, evaluate, screenshot; every JavaScript
exception, console error and browser log error is collected in
`Page.errors`.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import websocket

from cluster import stop, wait_for


class BrowserMissing(RuntimeError):
    pass


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    raise BrowserMissing("no chromium on PATH: the dashboard browser tests need Debian's chromium "
                         "(apt-get install -y chromium)")


class Browser:
    """One headless Chromium with a remote-debugging port chosen by itself."""

    def __init__(self, tmp: Path, width: int = 1400, height: int = 900):
        self.tmp = Path(tmp)
        self.width, self.height = width, height
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self, timeout: float = 30) -> "Browser":
        profile = self.tmp / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)  # a previous run's port
        self.log = open(self.tmp / "chromium.log", "wb")
        self.proc = subprocess.Popen(
            [chromium_path(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--mute-audio",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             "--remote-allow-origins=*", f"--user-data-dir={profile}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            try:
                return int(port_file.read_text().splitlines()[0])
            except (OSError, ValueError, IndexError):
                return 0

        self.port = wait_for(ready, timeout, "chromium's DevTools port", self.proc)
        return self

    def page(self) -> "Page":
        """A new tab, at about:blank, with the viewport set."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(req, timeout=10) as r:
            target = json.load(r)
        return Page(target, self.port, self.width, self.height)

    def logs(self) -> str:
        try:
            return (self.tmp / "chromium.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.log.close()
            self.proc = None

    def __enter__(self):
        try:
            return self.start()
        except BaseException:  # Python skips __exit__ when __enter__ raises
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


class Page:
    """One tab over its DevTools websocket. Close it: an open tab keeps its
    page's connections (the dashboard's event stream holds one)."""

    def __init__(self, target: dict, port: int, width: int, height: int):
        self.target_id, self.port = target["id"], port
        self.ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)
        self.errors: list[str] = []
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.send(method)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def send(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)
        raise TimeoutError(f"{method}: no answer in {timeout}s")

    def _event(self, msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "")
            self.errors.append(f"exception: {text} ({d.get('url', '')}:{d.get('lineNumber', '')})")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            self.errors.append(f"console.{p['type']}: {args}")
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.errors.append(f"log: {e.get('text', '')} {e.get('url', '')}")

    def navigate(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str):
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate {expression!r}: {r['exceptionDetails']}")
        return r.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float, what: str):
        """Poll expression until it is truthy (an exception counts as not
        yet: the page may still be loading); returns its value."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                value = self.evaluate(expression)
                if value:
                    return value
            except RuntimeError as e:
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}; "
                                   f"last exception: {last}; page errors: {self.errors}")
            time.sleep(0.1)

    def screenshot(self, path: Path, fit: str | None = None) -> Path:
        """A PNG of the viewport; with fit (a CSS selector), cut below the
        lowest element it matches (no empty page under the content)."""
        params = {"format": "png"}
        if fit:
            bottom = self.evaluate(f"Math.max(...[...document.querySelectorAll({json.dumps(fit)})]"
                                   ".map((e) => e.getBoundingClientRect().bottom))")
            width = self.evaluate("document.documentElement.clientWidth")
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": min(int(bottom) + 12, 4000), "scale": 1}
        data = self.send("Page.captureScreenshot", params)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        try:
            self.ws.close()
        except OSError:
            pass
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/close/{self.target_id}", timeout=10):
                pass
        except OSError:
            pass
