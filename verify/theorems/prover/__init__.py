"""The prover the theorems are written in, and the helpers they share.

``query.py`` decides one formula in Z3 resource units; ``prover.py`` runs a theorem's steps
(prove, refute, exhaust, lemma) within its budget, searching the small domain first
(``small.py``); ``terms.py`` holds the formula helpers; ``theorem.py`` the ``@theorem``
decorator; ``traces.py`` turns witnesses and counterexamples into replayable traces;
``symbols.py`` and ``states.py`` the symbolic geometries, tables and shared lemmas;
``obligations.py`` the native arithmetic's overflow obligations.
"""
