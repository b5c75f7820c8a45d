"""The bounded theorems' runs of the spec's own classes over every small configuration.

``managers.py``: group configurations and snapshots; ``prefix.py``: layouts, chunkings and
``World`` (a coordinator, tables and the ops run so far) for prefix caching; ``host.py``:
``HostWorld``, the same with a host pool and a data oracle.
"""
