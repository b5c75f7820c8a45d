"""The differential machine: spec and native (or a wrong spec variant) in lockstep.

Each module imports only modules listed before it (``tests/test_import_graph.py`` checks
this order, and that no import closes a circle anywhere in livetail):

- ``oracle``     the slot-by-slot definitions of ``semantics.md`` and the prompt keys
- ``side``       the implementations (``Impl``, ``implementations``), one side's pool,
                 coordinator and tables (``Side``), the state compared (``State``)
- ``step``       one step: its queries, each side's record, the report; ``Extension``,
                 what a plug-in adds to the core
- ``sink``       ``TraceSink``: where a Hypothesis run leaves its failing trace
- ``bad_calls``  the usage errors the ``bad`` op makes
- ``checks``     the section-7 property checks of a step
- ``core``       ``LockstepCore``: runs one op on every side, compares, checks
- ``names``, ``plan``, ``forks``   plug-ins of the core (sections 12, 9 and 13.6): ops,
                 oracle, rules
- ``host_side``, ``host``   the host tier (section 10): its sides and ``HostWorld``
- ``lockstep``   ``Lockstep`` = the core with its plug-ins; ``run_trace`` (device or host)
- ``rules``, ``host_rules``   the Hypothesis machines (``differential_machine``,
                 ``host_machine``)

Above the package: ``verify/campaign.py``, ``verify/replay.py`` and the command line.
``implementations`` and ``run_trace`` are importable from the package itself as well
(``verify/theorems`` runs its witness traces through them).
"""

from .lockstep import run_trace
from .side import implementations

__all__ = ["implementations", "run_trace"]
