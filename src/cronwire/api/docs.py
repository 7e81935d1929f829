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
from fastapi.responses import FileResponse, HTMLResponse

from cronwire.api.static_assets import DOCS_CSP, AssetDirectory

BUNDLES_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
SWAGGER_INIT = Path(__file__).resolve().parent.parent / "console" / "docs" / "swagger-init.js"
ASSETS = "/docs/assets"


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
                f"<script src=\"{asset(request, 'redoc.standalone.js')}\"></script>")
        return assets.page(_page(f"{app.title} API - ReDoc", head, body))

    @router.get(f"{ASSETS}/{{name}}")
    async def docs_asset(name: str) -> FileResponse:
        return assets.response(name)

    return router
