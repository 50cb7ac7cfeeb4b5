"""A small W3C WebDriver client (the standard library's urllib) for Debian's chromium-driver: enough
to drive headless Chromium through the dashboard (open a page, type, click, read, screenshot).

No Selenium: WebDriver is HTTP and JSON, and these few calls are all the tests need."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pslurm.cluster.local import free_ports

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
# as root, and on a machine whose only network is loopback (Chromium would otherwise try Google's hosts)
ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-extensions", "--window-size=1280,900", "--hide-scrollbars"]


def available() -> str:
    """Why a browser cannot be driven here ("" when it can)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    return f"{', '.join(missing)} missing (Debian's chromium and chromium-driver; .ci/run installs them)" \
        if missing else ""


class Browser:
    """One headless Chromium session through chromedriver; :meth:`close` ends both."""

    def __init__(self) -> None:
        [port] = free_ports(1)
        self.profile = tempfile.mkdtemp(prefix="pslurm-chromium-")
        self.driver = subprocess.Popen([CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while True:
            try:
                if self._call("GET", "/status")["ready"]:
                    break
            except OSError:
                pass
            if time.time() > deadline:
                self.close()
                raise AssertionError("chromedriver did not start")
            time.sleep(0.1)
        options = {"binary": CHROMIUM, "args": [*ARGS, f"--user-data-dir={self.profile}"]}
        reply = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}})
        self.session = f"/session/{reply['sessionId']}"

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return json.loads(reply.read())["value"]
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"webdriver {method} {path}: {exc.read().decode(errors='replace')[:500]}") from None

    def get(self, url: str) -> None:
        self._call("POST", f"{self.session}/url", {"url": url})

    @property
    def current_url(self) -> str:
        return str(self._call("GET", f"{self.session}/url"))

    def find(self, css: str) -> str:
        """The element matching ``css`` (AssertionError when none)."""
        return str(self._call("POST", f"{self.session}/element", {"using": "css selector", "value": css})[ELEMENT])

    def find_all(self, css: str) -> list[str]:
        found = self._call("POST", f"{self.session}/elements", {"using": "css selector", "value": css})
        return [str(item[ELEMENT]) for item in found]

    def type(self, css: str, text: str) -> None:
        self._call("POST", f"{self.session}/element/{self.find(css)}/value", {"text": text})

    def click(self, css: str) -> None:
        self._call("POST", f"{self.session}/element/{self.find(css)}/click", {})

    def text(self, css: str) -> str:
        return str(self._call("GET", f"{self.session}/element/{self.find(css)}/text"))

    def attribute(self, css: str, name: str) -> str | None:
        value = self._call("GET", f"{self.session}/element/{self.find(css)}/attribute/{name}")
        return None if value is None else str(value)

    def script(self, code: str, *args: Any) -> Any:
        return self._call("POST", f"{self.session}/execute/sync", {"script": code, "args": list(args)})

    def cookies(self) -> list[dict[str, Any]]:
        return list(self._call("GET", f"{self.session}/cookie"))

    def wait_for(self, predicate: Any, timeout: float = 30.0) -> Any:
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError("the page did not get there in time")

    def screenshot(self, path: Path) -> None:
        """The whole page (not only the window) as a PNG."""
        height = int(self.script("return Math.max(document.body.scrollHeight, 300)"))
        self._call("POST", f"{self.session}/window/rect", {"width": 1280, "height": min(height + 120, 4000)})
        path.write_bytes(base64.b64decode(self._call("GET", f"{self.session}/screenshot")))

    def close(self) -> None:
        try:
            if hasattr(self, "session"):
                self._call("DELETE", self.session)
        finally:
            self.driver.terminate()
            try:
                self.driver.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
            shutil.rmtree(self.profile, ignore_errors=True)
