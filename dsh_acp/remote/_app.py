"""The ASGI application: ``/acp`` (Streamable HTTP and WebSocket) and ``/healthz``.

Every ``/acp`` request passes the guard (the token, the origin) before its handler runs; the
health check needs no token and says only whether the server takes connections.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from . import _http
from ._guard import refusal
from ._hub import Hub
from ._websocket import serve_websocket

__all__ = ["ENDPOINT", "build_app"]

ENDPOINT = "/acp"


def build_app(hub: Hub) -> Starlette:
    """The server's application, serving ``hub``'s connections."""

    async def acp(request: Request) -> Response:
        refused = refusal(request.headers, hub.options)
        if refused is not None:
            return PlainTextResponse(refused.text, status_code=refused.status, headers=refused.headers)
        if request.method == "POST":
            return await _http.post(request, hub)
        if request.method == "GET":
            return _http.get(request, hub)
        return _http.delete(request, hub)

    async def websocket(websocket: WebSocket) -> None:
        await serve_websocket(websocket, hub)

    async def healthz(request: Request) -> Response:
        if hub.stopping:
            return JSONResponse({"status": "stopping"}, status_code=503)
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route(ENDPOINT, acp, methods=["GET", "POST", "DELETE"]),
            WebSocketRoute(ENDPOINT, websocket),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )
