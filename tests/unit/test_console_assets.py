"""The console's and the docs' files as the API serves them: strict headers, only the
packaged files, nothing from a CDN, and no code path that parses tenant text as HTML."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from cronwire.api.app import create_app
from cronwire.api.console import CONSOLE_DIR, console_router
from cronwire.api.ops_app import OpsApp

CONSOLE_FILES = sorted(p for p in CONSOLE_DIR.iterdir() if p.is_file())
# Ways a string becomes markup or code in a browser; the console uses none of them.
HTML_SINKS = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|"
                        r"new Function|setAttribute\(\s*[\"']style|\.style\.")
SVG_NAMESPACE = "http://www.w3.org/2000/svg"


async def _ready() -> dict[str, bool]:
    return {"database": True}


@pytest.fixture
async def client() -> httpx.AsyncClient:
    app = create_app(_ready, lambda: b"", [console_router()])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cronwire")


async def test_console_page_has_a_strict_content_security_policy(client: httpx.AsyncClient) -> None:
    async with client:
        for path in ("/console", "/console/"):
            response = await client.get(path)
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/html")
            csp = response.headers["content-security-policy"]
            assert "default-src 'self'" in csp and "script-src 'self';" in csp
            assert "unsafe" not in csp and "frame-ancestors 'none'" in csp
            assert response.headers["x-content-type-options"] == "nosniff"
            assert '<script type="module" src="/console/assets/app.js"></script>' in response.text
            assert re.search(r"<script>|\sstyle=|\son[a-z]+=", response.text) is None


@pytest.mark.parametrize(("name", "media"), [("app.js", "text/javascript"),
                                             ("style.css", "text/css"),
                                             ("favicon.svg", "image/svg+xml")])
async def test_console_assets_are_served_with_their_media_type(
    client: httpx.AsyncClient, name: str, media: str
) -> None:
    async with client:
        response = await client.get(f"/console/assets/{name}")
    assert response.status_code == 200 and response.headers["content-type"].startswith(media)
    assert "content-security-policy" in response.headers


@pytest.mark.parametrize("name", ["nope.js", "..%2Fapi%2Fconsole.py", "%2Fetc%2Fpasswd",
                                  "swagger-init.js"])
async def test_only_packaged_console_files_are_served(client: httpx.AsyncClient, name: str) -> None:
    async with client:
        response = await client.get(f"/console/assets/{name}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_docs_pages_load_packaged_bundles_only(client: httpx.AsyncClient) -> None:
    async with client:
        for path, bundle in (("/docs", "/docs/assets/swagger-ui-bundle.js"),
                             ("/redoc", "/docs/assets/redoc.standalone.js")):
            page = await client.get(path)
            assert page.status_code == 200 and bundle in page.text
            assert "http" not in page.text.replace('name="viewport"', "")
            assert "script-src 'self';" in page.headers["content-security-policy"]
            asset = await client.get(bundle)
            assert asset.status_code == 200
            assert asset.headers["content-type"].startswith("text/javascript")
        assert (await client.get("/docs/assets/swagger-init.js")).status_code == 200
        assert (await client.get("/docs/assets/swagger-ui.css")).status_code == 200


async def test_redoc_asks_no_cdn_for_its_logo(client: httpx.AsyncClient) -> None:
    """ReDoc's sidebar footer loads its logo from cdn.redoc.ly (the CSP refused
    it, with a console error); the bundle is served with that image inline."""
    async with client:
        bundle = (await client.get("/docs/assets/redoc.standalone.js")).text
    assert "cdn.redoc.ly" not in bundle and 'alt:"redocly logo"' in bundle
    assert "data:image/svg+xml" in bundle


async def test_the_servers_address_leads_to_the_console(client: httpx.AsyncClient) -> None:
    async with client:
        response = await client.get("/")
    assert response.status_code == 307 and response.headers["location"] == "/console"


async def test_console_and_docs_routes_stay_out_of_the_openapi_document(
    client: httpx.AsyncClient,
) -> None:
    async with client:
        paths = (await client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith(("/console", "/docs", "/redoc"))]


@pytest.mark.parametrize("path", [p for p in CONSOLE_FILES if p.suffix in {".js", ".html", ".css"}],
                         ids=lambda p: p.name)
def test_console_sources_load_nothing_remote_and_never_parse_html(path: Path) -> None:
    text = path.read_text().replace(SVG_NAMESPACE, "")  # a name, not something loaded
    assert re.search(r"https?://", text) is None, "every asset ships in the package"
    if path.suffix == ".js":
        assert HTML_SINKS.search(text) is None


async def test_the_console_and_the_docs_exist_only_with_the_api_role() -> None:
    app = OpsApp(_ready, lambda: b"")  # what serve builds without the api role
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://cronwire") as client:
        for path in ("/console", "/docs", "/redoc", "/openapi.json"):
            assert (await client.get(path)).status_code == 404, path
        assert (await client.get("/healthz")).status_code == 200
