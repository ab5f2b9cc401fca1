"""The client side of the proxy: one session per client connection (`session.py`: the dispatch
loop, the reply queue, flow control), its connection states (`states.py`), what it does with each
command (`behaviour.py`; the handlers of the actions that are not plain forwarding are each
backend's, in proxy/backends/), the policy's verdicts (`verdicts.py`), the proxy's own AUTH
(`auth.py`), CLIENT KILL (`clientkill.py`) and CLIENT PAUSE (`pause.py`)."""
