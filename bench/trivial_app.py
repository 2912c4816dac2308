"""A trivial FastAPI endpoint under ``pmsgate serve``'s own uvicorn configuration.

The floor the side-by-side benchmark (:mod:`bench.wrk_side_by_side`) measures the
gateway's cached tool call against: ``POST /trivial`` answers ``{"status": "ok"}`` —
no middleware, no dependency, no database. Served with the same ``uvicorn.Config`` as
``pmsgate serve`` (:func:`pmsgate.cli._uvicorn_config`: ``loop="auto"``, ``http="auto"``,
i.e. uvloop and httptools; proxy headers; no logging configuration), so the two differ
only in the app.

``python -m bench.trivial_app --port N`` serves it on 127.0.0.1 until terminated.
"""

from __future__ import annotations

import argparse

import uvicorn
from fastapi import FastAPI

from pmsgate.cli import _uvicorn_config

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


@app.post("/trivial")
async def trivial() -> dict[str, str]:
    """The least a FastAPI route does: a constant JSON object."""
    return {"status": "ok"}


def main() -> None:
    """Entry point of ``python -m bench.trivial_app``."""
    parser = argparse.ArgumentParser(prog="python -m bench.trivial_app")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    config = _uvicorn_config(app, host=args.host, port=args.port, forwarded_allow_ips="127.0.0.1")
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
