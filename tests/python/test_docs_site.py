"""The dbt docs site, checked in a real browser.

Every model is built (on an empty landing zone, conftest's `empty_lakehouse`) and `dbt docs
generate` writes the site; it is served on 127.0.0.1 and opened
in headless Chromium (Debian's chromium and chromedriver, `make system-deps`). The lineage graph
of a gold model must render and show the whole path landing source -> bronze -> change log ->
silver -> gold -> exposure, read from the page's own graph (dbt-docs' Angular `graph` service and
its cytoscape instance). A screenshot goes to artifacts/. The generated manifest and catalog must
also describe every model, every column of every built table, every source and exposure.
"""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lakehouse import REPO
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("empty-lakehouse")]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = REPO / "artifacts"
GOLD = "model.cdc_lakehouse.fct_orders"
# One landing-to-dashboard path per source table fct_orders reads.
PATHS = [
    [
        f"source.cdc_lakehouse.landing_northwind.{entity}",
        f"model.cdc_lakehouse.bronze_northwind__{entity}",
        f"model.cdc_lakehouse.stg_northwind__{entity}_changes",
        f"model.cdc_lakehouse.{entity}",
        GOLD,
        "exposure.cdc_lakehouse.sales_dashboard",
    ]
    for entity in ("orders", "order_details")
]

# The lineage graph as the page holds it: nodes and edges of the cytoscape instance that
# dbt-docs' `graph` service renders, with their visibility and on-screen boxes.
GRAPH_JS = """
const graph = angular.element(document.body).injector().get('graph');
const cy = graph.graph_element;
if (graph.loading || !cy || cy.nodes().length === 0) return null;
const box = cy.container().getBoundingClientRect();
return {
  orientation: graph.orientation,
  container: {width: box.width, height: box.height},
  nodes: cy.nodes().map(n => ({
    id: n.id(), label: n.data('label'), resource_type: n.data('resource_type'),
    visible: n.visible(), box: n.renderedBoundingBox(),
  })),
  edges: cy.edges().map(e => ({
    source: e.source().id(), target: e.target().id(), visible: e.visible(),
  })),
};
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def site(empty_lakehouse: dict[str, Path]) -> Path:
    """The generated docs site (target/) of the whole project: every model, seed and snapshot
    built (on an empty landing zone: the site shows structure, descriptions and columns, not
    data), shared with the dbt unit tests (conftest.py)."""
    return empty_lakehouse["site"]


@pytest.fixture(scope="module")
def url(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    thread.join()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
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
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1600,1000",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_lineage_graph_shows_landing_to_gold(url: str, browser: webdriver.Chrome) -> None:
    # The model page with its lineage graph open on the model, its ancestors and descendants.
    browser.get(f"{url}#!/model/{GOLD}?g_v=1&g_i=%2Bfct_orders%2B")
    graph = WebDriverWait(browser, 60, poll_frequency=0.5).until(
        lambda driver: driver.execute_script(GRAPH_JS)
    )
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "docs_lineage_fct_orders.png"
    browser.save_screenshot(str(shot))

    nodes = {node["id"]: node for node in graph["nodes"]}
    edges = {(edge["source"], edge["target"]): edge for edge in graph["edges"]}
    problems = []
    for path in PATHS:
        for node_id in path:
            node = nodes.get(node_id)
            if node is None or not node["visible"]:
                problems.append(f"node {node_id} not shown")
                continue
            # drawn inside the graph's canvas, with a label of some size
            box, area = node["box"], graph["container"]
            inside = box["x1"] >= 0 and box["x2"] <= area["width"]
            inside = inside and box["y1"] >= 0 and box["y2"] <= area["height"]
            if not (inside and box["w"] > 10 and box["h"] > 10):
                problems.append(f"node {node_id} not drawn in the graph area: {box}")
        for edge in zip(path, path[1:], strict=False):
            if edge not in edges or not edges[edge]["visible"]:
                problems.append(f"edge {edge[0]} -> {edge[1]} not shown")
    assert not problems, f"lineage graph (screenshot {shot}):\n" + "\n".join(problems)
    assert graph["orientation"] == "fullscreen"
    assert nodes[PATHS[0][0]]["resource_type"] == "source"
    assert nodes[PATHS[0][-1]]["resource_type"] == "exposure"


def test_model_page_shows_descriptions(site: Path, url: str, browser: webdriver.Chrome) -> None:
    manifest = json.loads((site / "manifest.json").read_text())
    model = manifest["nodes"][GOLD]
    browser.get(f"{url}#!/model/{GOLD}")
    description = model["description"].split(",")[0]

    def page_text(driver: webdriver.Chrome) -> str | bool:
        # The page's template (headings such as "Description") is drawn before the model's
        # data is bound to it: wait for the model's own text, not for a heading.
        text = driver.find_element("tag name", "body").text
        return text if description in text else False

    try:
        text = WebDriverWait(browser, 60, poll_frequency=0.5).until(page_text)
    except TimeoutException:
        text = browser.find_element("tag name", "body").text
    assert description in text, text
    assert model["columns"]["order_total"]["description"] in text


def test_every_model_and_column_is_described(site: Path) -> None:
    """Every model, seed and snapshot, and every column its table really has (catalog), has a
    description; so does every source and exposure."""
    manifest = json.loads((site / "manifest.json").read_text())
    catalog = json.loads((site / "catalog.json").read_text())
    problems = []
    for unique_id, node in manifest["nodes"].items():
        if node["resource_type"] not in ("model", "seed", "snapshot"):
            continue
        if not node["description"].strip():
            problems.append(f"{unique_id}: no description")
        table = catalog["nodes"].get(unique_id)
        if table is None:
            problems.append(f"{unique_id}: not in the catalog (not built?)")
            continue
        described = {name for name, c in node["columns"].items() if c["description"].strip()}
        for column in table["columns"]:
            if column not in described:
                problems.append(f"{unique_id}.{column}: no description")
        for column in node["columns"]:
            if column not in table["columns"]:
                problems.append(f"{unique_id}.{column}: documented but not in the table")
    for unique_id, node in [*manifest["sources"].items(), *manifest["exposures"].items()]:
        if not node["description"].strip():
            problems.append(f"{unique_id}: no description")
    assert manifest["exposures"], "no exposure: gold has consumers"
    assert not problems, "\n".join(problems)


def test_manifest_lineage_runs_from_every_source(site: Path) -> None:
    """The whole graph, from the manifest the site draws: every landing source feeds a bronze
    model, and the paths the browser test shows are edges of the manifest."""
    manifest = json.loads((site / "manifest.json").read_text())
    parents = manifest["parent_map"]
    children = manifest["child_map"]
    problems = [
        f"{child} does not read {parent}"
        for path in PATHS
        for parent, child in zip(path, path[1:], strict=False)
        if parent not in parents.get(child, [])
    ]
    for source in manifest["sources"]:
        if not any(c.startswith("model.") and ".bronze_" in c for c in children.get(source, [])):
            problems.append(f"{source}: no bronze model reads it")
    assert not problems, "\n".join(problems)
