"""One module per client library or agent framework. Each lists the methods
ststrace wraps (``TARGETS``) and the oldest version it supports;
:mod:`ststrace._instrument` does the patching. Client libraries get the
``@llm``-like wrapper; a framework module brings its own through
``make_wrapper(path, patch)``."""
