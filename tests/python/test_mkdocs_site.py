"""The project's docs site (mkdocs.yml, `make docs-site`), built and read in a real browser.

`mkdocs build --strict` must succeed: a link to a missing page or a missing anchor, a page left
out of the navigation or an absolute link is a warning, and strict mode makes it a failure. The
built site is served on 127.0.0.1 and opened in headless Chromium (Debian's chromium and
chromedriver, `make system-deps`, as for the dbt docs site): the home page renders, the search
finds "TOAST" and leads to a page that says it (in any case), and every page of the navigation
loads with its title and without an error in the browser's console.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from browser import chromium, served
from lakehouse import REPO
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = [pytest.mark.system, pytest.mark.xdist_group("test_mkdocs_site.py")]


def nav_pages(nav: list[Any]) -> list[str]:
    """The Markdown files of mkdocs.yml's navigation, in order."""
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.fixture(scope="module")
def url(site: Path) -> Iterator[str]:
    with served(site) as address:
        yield address


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    profile = tmp_path_factory.mktemp("chromium-profile")
    with chromium(profile, "1400,1000", console=True) as driver:
        yield driver


def console_errors(browser: webdriver.Chrome) -> list[str]:
    return [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def test_the_site_builds_in_strict_mode(site: Path) -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert config["strict"] is True
    assert config["validation"]["anchors"] == "warn"  # strict turns a broken anchor into a failure
    for page in nav_pages(config["nav"]):
        folder = "" if page == "index.md" else page.removesuffix(".md") + "/"
        assert (site / folder / "index.html").is_file(), page


def test_home_page_renders(url: str, browser: webdriver.Chrome) -> None:
    browser.get(url)
    heading = WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "h1"))
    assert heading.text == "cdc-lakehouse"
    assert heading.is_displayed()
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "make run" in body and "make test" in body
    # the navigation lists every section of mkdocs.yml
    for section in ("Guides", "Reference", "Benchmarks and peers"):
        assert section in body, section
    assert not console_errors(browser)


def test_search_finds_toast(url: str, browser: webdriver.Chrome) -> None:
    browser.get(url)
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "h1"))
    # Material's search box (in the header on a wide window; behind an icon on a narrow one)
    box = browser.find_element(By.CSS_SELECTOR, "input.md-search__input")
    if not box.is_displayed():
        browser.find_element(By.CSS_SELECTOR, "label[for='__search']").click()
    box.click()
    box.send_keys("TOAST")

    def first_result(driver: webdriver.Chrome) -> str | bool:
        # Material re-renders the result list while the index loads and as each key arrives:
        # a result found one moment can be gone the next (StaleElementReferenceException, seen
        # in a clean-clone run), so the link is read in the same poll that finds it
        try:
            found = driver.find_elements(By.CSS_SELECTOR, ".md-search-result__item a")
            return (found[0].get_attribute("href") or False) if found else False
        except StaleElementReferenceException:
            return False

    first = WebDriverWait(browser, 30, poll_frequency=0.5).until(first_result)
    browser.get(first)
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.TAG_NAME, "h1"))
    # the search is case-insensitive: the page it leads to says toast, in some case
    assert "toast" in browser.find_element(By.TAG_NAME, "body").text.lower(), first


def test_every_page_of_the_navigation_loads(url: str, browser: webdriver.Chrome) -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    problems = []
    for page in nav_pages(config["nav"]):
        address = url + ("" if page == "index.md" else page.removesuffix(".md") + "/")
        browser.get(address)
        headings = WebDriverWait(browser, 30).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, "article h1")
        )
        title = (REPO / "docs" / page).read_text().splitlines()[0].removeprefix("# ")
        if not headings or headings[0].text.strip() != title:
            problems.append(f"{page}: heading {[h.text for h in headings]}, expected {title!r}")
        errors = console_errors(browser)
        if errors:
            problems.append(f"{page}: console errors {errors}")
        # every image on the page loaded (the benchmark and peer charts)
        broken = browser.execute_script(
            "return [...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
            ".map(i => i.getAttribute('src'))"
        )
        if broken:
            problems.append(f"{page}: images not loaded {broken}")
    assert not problems, "\n".join(problems)
