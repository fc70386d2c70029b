"""``palui serve``: the long-running service (ASGI on Starlette, served by uvicorn), spec §8."""
