"""The Cython-compiled twins: which modules run, and that the compiled ones do what the pure ones do."""
