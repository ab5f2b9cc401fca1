"""The optional compiled RESP modules (Cython): built when Cython and a C compiler are at hand.

Everything else about the package is in pyproject.toml. A machine without a C compiler still
installs it: the extensions are optional (a failed build leaves the pure-Python modules in use,
proxy/resp/compiled.py), and REDIS_GUARD_PURE_PYTHON=1 at install time skips them.
"""

import os

from setuptools import Extension, setup

SOURCES = {
    "proxy.resp._compiled_requests": "proxy/resp/_compiled_requests.pyx",
    "proxy.resp._compiled_replies": "proxy/resp/_compiled_replies.pyx",
}


def extensions():
    if os.environ.get("REDIS_GUARD_PURE_PYTHON"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:  # an install without build isolation and without Cython
        return []
    modules = [Extension(name, [path]) for name, path in SOURCES.items() if os.path.exists(path)]
    built = cythonize(modules, language_level=3, quiet=True,
                      compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True})
    for module in built:
        module.optional = True  # set after cythonize, which makes Extensions of its own without it
    return built


setup(ext_modules=extensions())
