"""`GET /console`: the tenant console, static files from ``cronwire/console``.

The page is a client of the public `/v1` API and nothing else: the server hands out the
same files to everyone, and the tenant's token stays in the browser's ``sessionStorage``
(it is sent only as the ``Authorization`` header of `/v1` calls).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse

from cronwire.api.static_assets import CONSOLE_CSP, AssetDirectory

CONSOLE_DIR = Path(__file__).resolve().parent.parent / "console"


def console_router(directory: Path = CONSOLE_DIR) -> APIRouter:
    assets = AssetDirectory.of(directory, CONSOLE_CSP)
    router = APIRouter(include_in_schema=False)

    @router.get("/console")
    @router.get("/console/")
    async def console_page() -> FileResponse:
        return assets.response("index.html")

    @router.get("/")
    async def front_door(request: Request) -> RedirectResponse:
        """A person who opens the server's address lands on the console (the API's docs
        are linked from the start-up log line and the README)."""
        return RedirectResponse(f"{request.scope.get('root_path', '')}/console", status_code=307)

    @router.get("/console/assets/{name}")
    async def console_asset(name: str) -> FileResponse:
        return assets.response(name)

    return router
