"""What the browser tests share (the dbt docs site, test_docs_site.py; the project's docs site,
test_mkdocs_site.py): a folder served on 127.0.0.1, and headless Chromium driven through
chromedriver (Debian's packages, `make system-deps`), set up for a machine without network."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def served(folder: Path) -> Iterator[str]:
    """`folder` over HTTP on 127.0.0.1 (a free port): yields its URL, ending in `/`."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        thread.join()


@contextlib.contextmanager
def chromium(profile: Path, window: str, console: bool = False) -> Iterator[webdriver.Chrome]:
    """Headless Chromium with its profile in `profile` and a `window` of "width,height"; with
    `console`, the browser's console messages are kept (`driver.get_log("browser")`)."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    assert not missing, f"{missing} not installed: `make system-deps` installs them"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    # Offline machine: no sandbox (root), no GPU, nothing that phones home.
    for argument in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={window}",
    ):
        options.add_argument(argument)
    if console:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
