"""`/docs` (Swagger UI) and `/redoc` from files in installed packages, never a CDN.

FastAPI's own pages load their scripts from a CDN and start them with an inline script, so
they render blank on a machine without internet and cannot run under a strict CSP. The
bundles here come from the ``fastapi-offline`` wheel; the start-up code is our own file.
"""

from __future__ import annotations

import html
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from cronwire.api.static_assets import DOCS_CSP, AssetDirectory, security_headers

BUNDLES_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
SWAGGER_INIT = Path(__file__).resolve().parent.parent / "console" / "docs" / "swagger-init.js"
ASSETS = "/docs/assets"
REDOC_BUNDLE = "redoc.standalone.js"
# ReDoc 2 always renders an <img> of its own logo from its CDN in the sidebar's footer (no
# option turns it off). Served with that address swapped for an empty inline image, the
# page asks nobody outside this origin for anything.
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
BLANK_IMAGE = b"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E"


def _redoc_without_cdn_logo() -> bytes:
    return (BUNDLES_DIR / REDOC_BUNDLE).read_bytes().replace(REDOC_CDN_LOGO, BLANK_IMAGE)


def _page(title: str, head: str, body: str) -> str:
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{html.escape(title)}</title>{head}</head><body>{body}</body></html>\n"
    )


def docs_router(app: FastAPI) -> APIRouter:
    """Routes for the docs of ``app`` (whose own docs_url and redoc_url must be None)."""
    assets = AssetDirectory.of(BUNDLES_DIR, DOCS_CSP, extra=[SWAGGER_INIT],
                               cache="public, max-age=86400")
    router = APIRouter(include_in_schema=False)

    def openapi_url(request: Request) -> str:
        return html.escape(f"{request.scope.get('root_path', '')}{app.openapi_url}")

    def asset(request: Request, name: str) -> str:
        return html.escape(f"{request.scope.get('root_path', '')}{ASSETS}/{name}")

    @router.get("/docs")
    async def swagger_ui(request: Request) -> HTMLResponse:
        head = (f"<link rel=\"icon\" href=\"{asset(request, 'favicon.png')}\">"
                f"<link rel=\"stylesheet\" href=\"{asset(request, 'swagger-ui.css')}\">")
        body = (f"<div id=\"swagger-ui\" data-openapi-url=\"{openapi_url(request)}\"></div>"
                f"<script src=\"{asset(request, 'swagger-ui-bundle.js')}\"></script>"
                f"<script src=\"{asset(request, 'swagger-init.js')}\"></script>")
        return assets.page(_page(f"{app.title} API - Swagger UI", head, body))

    @router.get("/redoc")
    async def redoc(request: Request) -> HTMLResponse:
        head = f"<link rel=\"icon\" href=\"{asset(request, 'favicon.png')}\">"
        # ReDoc's standalone bundle renders every <redoc spec-url> element by itself.
        body = (f"<redoc spec-url=\"{openapi_url(request)}\"></redoc>"
                f"<script src=\"{asset(request, REDOC_BUNDLE)}\"></script>")
        return assets.page(_page(f"{app.title} API - ReDoc", head, body))

    redoc_bundle = _redoc_without_cdn_logo()

    @router.get(f"{ASSETS}/{REDOC_BUNDLE}")
    async def redoc_asset() -> Response:
        return Response(redoc_bundle, media_type="text/javascript; charset=utf-8",
                        headers=security_headers(DOCS_CSP, "public, max-age=86400"))

    @router.get(f"{ASSETS}/{{name}}")
    async def docs_asset(name: str) -> FileResponse:
        return assets.response(name)

    return router
