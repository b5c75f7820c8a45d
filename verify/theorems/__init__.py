"""The theorem suite: every section-7 property, stated over the spec's own closed forms.

``THEOREMS`` maps each name to a ``Theorem`` (name, plain-words statement, what it
guarantees an engine, the formula script, expected verdict, the wrong variants it must
reject, its budget of Z3 resource units), in report order.  ``run_theorem`` evaluates one in
the current process; ``livetail.verify.runner`` runs each in a fresh process (Z3's results
depend on solver history), with a wall-clock kill only as a hang guard, which is how they
should be run.

The package, by what things are:

- ``prover/``: the proof language and its machinery: queries and their budgets
  (``query.py``), the ``Prover`` (``prover.py``), formula helpers (``terms.py``), the
  small-domain search (``small.py``), the ``@theorem`` decorator (``theorem.py``), trace
  building (``traces.py``), symbols and closed-form lemmas (``symbols.py``), symbolic states
  and transition lemmas (``states.py``), the arithmetic obligations (``obligations.py``);
- ``worlds/``: the bounded theorems' runs of the spec's classes (managers, prefix caching,
  the host tier); ``sites/``: the native hot-path expressions ``hot_paths.py`` proves;
- one module per section-7 property (or family) the theorems in it establish:
  ``all_or_nothing`` (1), ``closed_forms`` (2), ``sequential_charge`` (3), ``shift``
  (section 6), ``live_tail_safety`` (4), ``reclaim`` (5), ``conservation`` (6),
  ``arithmetic`` and ``hot_paths`` (7), ``prefix`` (8), ``retention`` (9), ``plans`` (10),
  ``host_offload`` and ``host_loads`` (11);
- ``registry.py``: every theorem, in report order, with the property it establishes;
  ``run.py``: ``run_theorem``; ``tables.py``: the docs' tables, generated from the registry.
"""

from __future__ import annotations

from .prover.query import DEFAULT_RLIMIT
from .prover.theorem import EXPECTED, VERDICTS, Theorem
from .registry import NO_THEOREM, PROPERTY, REGISTRY, SECTION7, THEOREMS, properties
from .run import run_theorem
from .tables import (
    MODEL_CALLS,
    domain,
    executed,
    markdown,
    property_table,
    readme_table,
)

__all__ = [
    "DEFAULT_RLIMIT",
    "EXPECTED",
    "MODEL_CALLS",
    "NO_THEOREM",
    "PROPERTY",
    "REGISTRY",
    "SECTION7",
    "THEOREMS",
    "VERDICTS",
    "Theorem",
    "domain",
    "executed",
    "markdown",
    "properties",
    "property_table",
    "readme_table",
    "run_theorem",
]
