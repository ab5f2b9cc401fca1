"""The optional compiled modules (Cython): built when Cython and a C compiler are at hand.

Everything else about the package is in pyproject.toml. A machine without a C compiler still
installs it: the extensions are optional (a failed build leaves the pure-Python modules in use,
proxy/compiled.py), and REDIS_GUARD_PURE_PYTHON=1 at install time skips them. Two kinds:

* the RESP scanners, `.pyx` twins of Python modules (`proxy/resp/_compiled_*.pyx`), the direct
  writer (`proxy/upstream/_compiled_write.pyx`), whose pure counterpart is the transport, a
  reply queue's append and popleft (`proxy/_compiled_queues.pyx`) and the monitor's counting
  (`proxy/monitor/_compiled_counts.pyx`);
* the session core, compiled from its own `.py` sources: the `.pxd` file beside each makes its
  classes `cdef` classes with typed fields and typed locals (Cython's "pure Python mode"), so
  the source of truth stays one `.py` file, which is what runs without the build; likewise the
  monitor's hot keys, big keys and slow log (`proxy/monitor/keys.py`).
"""

import os

from setuptools import Extension, setup

# CI's machines have 2 cores: cythonize and the C compiler run one job per core (the build was
# sequential, one core idle: about 150 s of its 190 s were gcc on one file after another).
JOBS = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
# No debug information: the default CFLAGS' -g makes gcc a third slower on Cython's large C files
# and the modules ten times larger; tracebacks through them are Cython's own either way.
CFLAGS = ["-g0"]

PYX = {
    "proxy.resp._compiled_requests": "proxy/resp/_compiled_requests.pyx",
    "proxy.resp._compiled_replies": "proxy/resp/_compiled_replies.pyx",
    "proxy.upstream._compiled_write": "proxy/upstream/_compiled_write.pyx",
    "proxy._compiled_queues": "proxy/_compiled_queues.pyx",
    "proxy.monitor._compiled_counts": "proxy/monitor/_compiled_counts.pyx",
    "proxy.backends.cluster._compiled_owners": "proxy/backends/cluster/_compiled_owners.pyx",
}
CORE = ("proxy.pending", "proxy.monitor.live", "proxy.resp.reader", "proxy.upstream.connection",
        "proxy.session.states", "proxy.session.session", "proxy.backends.route", "proxy.backends.standalone",
        "proxy.backends.cluster.connection", "proxy.backends.cluster.scatter", "proxy.backends.cluster.route",
        "proxy.session.guard",
        "proxy.monitor.keys")
CORE += ("proxy.policy.memo",)  # (a plan's Memo, read by the session's loop: session/guard.py)


def extensions():
    if os.environ.get("REDIS_GUARD_PURE_PYTHON"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # an install without build isolation and without Cython
        return []
    pyx = [Extension(name, [path], extra_compile_args=CFLAGS) for name, path in PYX.items() if os.path.exists(path)]
    core = [Extension(name, [name.replace(".", "/") + ".py"], extra_compile_args=CFLAGS) for name in CORE]
    built = cythonize(pyx, language_level=3, quiet=True, nthreads=JOBS,
                      compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True})
    # Annotations stay documentation (`data: bytes` would refuse a bytearray): types come from
    # the .pxd files only. Methods stay builtins (binding=False): a CyFunction per call costs.
    built += cythonize(core, language_level=3, quiet=True, nthreads=JOBS,
                       compiler_directives={"annotation_typing": False, "binding": False})
    for module in built:
        module.optional = True  # set after cythonize, which makes Extensions of its own without it
    return built


setup(ext_modules=extensions(), options={"build_ext": {"parallel": JOBS}})
