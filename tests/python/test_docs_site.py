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

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import chromium, served
from lakehouse import REPO
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("empty-lakehouse")]

ARTIFACTS = REPO / "artifacts"
GOLD = "model.cdc_lakehouse_example.fct_orders"
# One landing-to-dashboard path per source table fct_orders reads.
PATHS = [
    [
        f"source.cdc_lakehouse_example.landing_northwind.{entity}",
        f"model.cdc_lakehouse_example.bronze_northwind__{entity}",
        f"model.cdc_lakehouse_example.stg_northwind__{entity}_changes",
        f"model.cdc_lakehouse_example.{entity}",
        GOLD,
        "exposure.cdc_lakehouse_example.sales_dashboard",
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


@pytest.fixture(scope="module")
def site(empty_lakehouse: dict[str, Path]) -> Path:
    """The generated docs site (target/) of the whole project: every model, seed and snapshot
    built (on an empty landing zone: the site shows structure, descriptions and columns, not
    data), shared with the dbt unit tests (conftest.py)."""
    return empty_lakehouse["site"]


@pytest.fixture(scope="module")
def url(site: Path) -> Iterator[str]:
    with served(site) as address:
        yield address


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    with chromium(tmp_path / "chromium-profile", "1600,1000") as driver:
        yield driver


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
