"""Files the API serves to browsers (the console, the docs pages) with strict headers.

Only names in a fixed allowlist are served, so a request can never reach a path outside
the packaged directory. Every response says what it is (``nosniff``), may not be framed,
and carries a Content-Security-Policy that allows scripts from this origin only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from fastapi.responses import FileResponse, HTMLResponse
from starlette.exceptions import HTTPException

# The console runs no inline script and no inline style; it talks to this origin only.
CONSOLE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
# Swagger UI and ReDoc still set style attributes and <style> elements from their bundles
# (styled-components), so the docs pages allow inline style; script stays 'self' only.
DOCS_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; font-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def security_headers(csp: str, cache: str = "no-cache") -> dict[str, str]:
    return {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cache-Control": cache,
    }


class AssetDirectory:
    """The servable files of one packaged directory, by file name."""

    def __init__(self, files: Mapping[str, Path], csp: str, cache: str = "no-cache") -> None:
        self._files = dict(files)
        self._csp = csp
        self._cache = cache

    @classmethod
    def of(cls, directory: Path, csp: str, *, extra: Iterable[Path] = (),
           cache: str = "no-cache") -> AssetDirectory:
        found = [p for p in directory.iterdir() if p.is_file()] + list(extra)
        files = {p.name: p for p in found if p.suffix in MEDIA_TYPES}
        return cls(files, csp, cache)

    def names(self) -> list[str]:
        return sorted(self._files)

    def response(self, name: str) -> FileResponse:
        path = self._files.get(name)
        if path is None:
            raise HTTPException(404, f"{name}: no such asset")
        return FileResponse(path, media_type=MEDIA_TYPES[path.suffix],
                            headers=security_headers(self._csp, self._cache))

    def page(self, html: str) -> HTMLResponse:
        return HTMLResponse(html, headers=security_headers(self._csp))
