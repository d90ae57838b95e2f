"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) from files inside the package: no CDN, so the pages render on
a host without internet access.

FastAPI's own pages load Swagger UI and ReDoc from jsDelivr (and ReDoc its fonts from Google); a server on
an isolated cluster answered a blank page. The apps are built with ``docs_url=None, redoc_url=None`` and
:func:`install_docs` adds the two pages, pointing at ``convtune/api/static/docs/`` served by
:class:`~starlette.staticfiles.StaticFiles` under :data:`STATIC_PATH` (versions and licences of the vendored
files: ``static/docs/NOTICE.md``). Swagger UI's online validator badge is turned off too
(``validatorUrl: null``): it would send the schema's address to validator.swagger.io.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

#: where the vendored files are served (URL path) and where they lie (package, folder inside it)
STATIC_PATH = "/static/docs"
STATIC_PACKAGE = ("convtune.api", "static/docs")
#: the files every page needs; tests/storage/test_storage_packaging.py checks that the wheel ships them
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.svg")


def install_docs(app: FastAPI, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Mount the assets and add the Swagger UI and ReDoc pages to ``app`` (built with ``docs_url=None``)."""
    app.mount(STATIC_PATH, StaticFiles(packages=[STATIC_PACKAGE]), name="docs-static")
    # the schema's examples and the key's security schemes are the same on both pages
    swagger_parameters = {**(app.swagger_ui_parameters or {}), "validatorUrl": None}

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(openapi_url=root + (app.openapi_url or "/openapi.json"),
                                   title=f"{app.title} – API docs",
                                   swagger_js_url=f"{root}{STATIC_PATH}/swagger-ui-bundle.js",
                                   swagger_css_url=f"{root}{STATIC_PATH}/swagger-ui.css",
                                   swagger_favicon_url=f"{root}{STATIC_PATH}/favicon.svg",
                                   swagger_ui_parameters=swagger_parameters)

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(openapi_url=root + (app.openapi_url or "/openapi.json"),
                              title=f"{app.title} – ReDoc", redoc_js_url=f"{root}{STATIC_PATH}/redoc.standalone.js",
                              redoc_favicon_url=f"{root}{STATIC_PATH}/favicon.svg", with_google_fonts=False)
