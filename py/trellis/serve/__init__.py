"""`trellis serve`: the engine behind an OpenAI-compatible HTTP API (desktop only; Starlette + uvicorn).

    worker.py   the engine on one thread: jobs run one at a time from a bounded FIFO queue
    app.py      HTTP <-> the engine's faces: routes, body limits, auth, OpenAI error objects, SSE
    cli.py      the command line and the uvicorn server (timeouts, connection bound)

Nothing in the engine imports this package; the browser never loads it.
"""
