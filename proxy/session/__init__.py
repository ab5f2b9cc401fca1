"""The client side of the proxy: one session per client connection (`session.py`), its
connection states (`states.py`), what it does with each command (`behaviour.py`), and the
handlers of the actions that are not plain forwarding (`handlers.py`)."""
