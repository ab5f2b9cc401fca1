"""`redis-guard serve`: the event loop and the collector's settings (`loop.py`), the upstream
and the command table resolved before the first connection (`upstream.py`), the configuration
the command line's flags amount to (`options.py`), one serving process (`worker.py`) and the
start-up that ties them together, with `--workers N`'s supervision (`command.py`)."""
