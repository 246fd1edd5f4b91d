"""One module per client library. Each lists the methods ststrace wraps and
checks that the installed version has them; :mod:`ststrace._instrument` does
the patching."""
